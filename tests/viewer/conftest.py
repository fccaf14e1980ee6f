"""A real catalog for the viewer, and the viewer serving it on a free loopback port.

`viewer_catalog` starts from the export suite's small real sweep (`sweep_catalog`: two simulated models, a model
whose endpoint is down so every rollout errors, and a scripted endpoint that sends arguments that are not JSON),
copied so that nothing here changes it, and adds what a rollout page shows beyond it, each made the way a sweep
makes it: a rollout of a scripted model whose output is hostile HTML, a `sim-oracle` rollout that talks with an
NPC, rubric-judge verdicts from `sim-judge`, and
quality and safety judgements from the embedded assessment platform. The hostile model searches, then sends a
mail whose subject and body are markup (so its state diff carries it too), and fails the task's verifiers.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval_pipelines.clients.platform import PlatformClient
from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.local.services import local_evaluation_service
from eval_pipelines.pipeline.assessment import JudgeSetup, judge_manifest, judgements_file_stem, upload_partition
from eval_pipelines.pipeline.steps import judge_partition_rubrics
from eval_pipelines.platform.embedded import EmbeddedPlatform
from eval_pipelines.reports.viewer.app import create_app
from eval_pipelines.runtime.local import shared_runtime
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.store import Warehouse
from tests.export.conftest import (
    SWEEP_ID,
    SweepCatalog,
    _run,
    sweep_catalog,  # noqa: F401  (the export suite's fixture, registered here as well)
)
from tests.support.scripted_llm import Script, create_scripted_app, text_reply, tool_call_reply

HOSTILE = "hostile"
#: What a model may write: markup that would run or restyle the page if it reached the HTML unescaped.
HOSTILE_TEXT = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"><b id="injected">bold</b>'
HOSTILE_QUERY = '"><script>window.pwned = 3</script>'
HOSTILE_SUBJECT = "<i>lunch</i><script>window.pwned = 4</script>"
JUDGED_MODEL = "sim-oracle"
EMAIL = "email_ops:1.0.0"
CHAT = "team_chat:1.0.0"
#: Only Jonas, an NPC, knows the build number this task needs.
NPC_TASK = "team_chat_004"


@dataclass(frozen=True)
class ViewedCatalog:
    db: Path
    sweep_id: str

    def rows(self, sql: str, params: list[object] | None = None) -> list[dict[str, object]]:
        return SweepCatalog(self.db, self.sweep_id).rows(sql, params)

    def rollout_id(self, where: str, params: list[object] | None = None) -> str:
        """The first rollout (by id) of the sweep that matches `where` (a condition on rollout_scores as s and
        rollouts as r)."""
        rows = self.rows(
            "select s.rollout_id from rollout_scores as s join rollouts as r using (rollout_id) "
            f"where s.sweep_id = ? and ({where}) order by s.rollout_id limit 1",
            [self.sweep_id, *(params or [])],
        )
        assert rows, f"no rollout where {where}"
        return str(rows[0]["rollout_id"])


def _judge(warehouse: Warehouse, platform_dir: Path, scenario_key: str) -> None:
    """Quality and safety judgements of one partition, by the embedded platform's (simulated) judges."""

    async def judge() -> None:
        with EmbeddedPlatform(platform_dir) as platform:
            async with PlatformClient(platform.url, platform.token) as client:
                manifest = await upload_partition(
                    client, warehouse, JUDGED_MODEL, scenario_key, sweep_id=SWEEP_ID, space_id=platform.space_id
                )
                assert manifest is not None
                summary = await judge_manifest(client, manifest)
        warehouse.write(
            "judgements",
            summary.table,
            model_key=JUDGED_MODEL,
            scenario_key=scenario_key,
            file_stem=judgements_file_stem(JudgeSetup(), SWEEP_ID),
        )

    asyncio.run(judge())


@pytest.fixture(scope="session")
def viewer_catalog(
    sweep_catalog: SweepCatalog,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> ViewedCatalog:
    data = tmp_path_factory.mktemp("viewer") / "data"
    shutil.copytree(sweep_catalog.db.parent / "warehouse", data / "warehouse")
    warehouse = Warehouse(data / "warehouse")
    scenarios = ScenarioCatalog(builtin_scenarios_dir())
    email, chat = scenarios.get(EMAIL), scenarios.get(CHAT)
    script = Script(
        [
            tool_call_reply("email__search_emails", {"query": HOSTILE_QUERY}, call_id="call_search"),
            # Mutates the mailbox (a state diff) and fails the task's verifiers: the subject lacks 'projector'.
            tool_call_reply(
                "email__send_email",
                {"to": "aisha.okafor@example.com", "subject": HOSTILE_SUBJECT, "body": HOSTILE_TEXT},
                call_id="call_send",
            ),
            text_reply(HOSTILE_TEXT),
        ]
    )
    scripted = BackgroundServer(create_scripted_app(script)).start()
    try:
        with local_evaluation_service(data, scenarios.root) as local:
            backend = local.backend()
            try:
                # An NPC who must be asked: the trace holds a conversation with him.
                oracle = {"model": JUDGED_MODEL, "base_url": "sim://local", "api_key": "x"}
                _run(backend, warehouse, data, chat, JUDGED_MODEL, oracle, task_ids=[NPC_TASK], rollout_count=1)
                config = {"model": HOSTILE, "base_url": f"{scripted.url}/v1", "api_key": "x"}
                _run(backend, warehouse, data, email, HOSTILE, config, task_ids=["email_ops_001"], rollout_count=1,
                     max_parallel=1)  # fmt: skip
            finally:
                backend.close()
    finally:
        scripted.stop()
    judge = shared_runtime(scenarios).resolve(ModelConfig(model="sim-judge", base_url="sim://local", api_key="x"))
    judge_partition_rubrics(warehouse, email, JUDGED_MODEL, email.key, judge, sweep_id=SWEEP_ID)
    _judge(warehouse, data / "platform", email.key)
    return ViewedCatalog(build_catalog(warehouse.root, data / "eval.duckdb").path, SWEEP_ID)


@pytest.fixture(scope="session")
def viewer(viewer_catalog: ViewedCatalog) -> Iterator[str]:
    """The viewer's base URL."""
    with BackgroundServer(create_app(viewer_catalog.db)) as server:
        yield server.url
