"""Judges on a slow local server that answers one request at a time finish with the sweep's timeout and
concurrency: every call waits for its turn without a clock running, none is cancelled and sent again, and every
judgement is written.

Scaled to keep the test short: the server of the problem report takes 20 s per answer; here it takes
ANSWER_SECONDS = 1 s (1/20), and the sweep's judge timeout is JUDGE_TIMEOUT_SECONDS = 2.5 s, larger than one answer
but smaller than the whole queue's wait (3 rubric verdicts, then 3 rows x 2 platform judges, one after another).
The platform's own default timeout is set to PLATFORM_DEFAULT_TIMEOUT_SECONDS = 0.5 s, less than one answer: a
platform judge that did not take the sweep's timeout would fail every call.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.clients.platform import DEFAULT_PIPELINE_TIMEOUT_SECONDS, PlatformTarget
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.sweeps import model_config_for
from eval_pipelines.pipeline.assessment import (
    AssessedPartition,
    JudgeSetup,
    assessment_dataset_step,
    judgements_step,
)
from eval_pipelines.pipeline.steps import judge_partition_rubrics, launch_request, run_and_collect, verify_partition
from eval_pipelines.platform.app import create_platform_app
from eval_pipelines.platform.auth import TokenRegistry
from eval_pipelines.platform.config import PlatformSettings
from eval_pipelines.platform.models import ModelRegistry, RegisteredModel
from eval_pipelines.schemas.platform import AssessRunRequest
from eval_pipelines.schemas.sweep import ModelCallLimits, SweepConfig
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.sim.judge import SIM_JUDGE, sim_judge_persona
from eval_pipelines.sim.platform import PLATFORM_PERSONAS, SIM_QUALITY_JUDGE, SIM_SAFETY_JUDGE
from eval_pipelines.warehouse.rows import RolloutContext
from eval_pipelines.warehouse.store import Warehouse
from tests.platform.conftest import SPACE

ANSWER_SECONDS = 1.0
JUDGE_TIMEOUT_SECONDS = 2.5
PLATFORM_DEFAULT_TIMEOUT_SECONDS = 0.5
TASKS = ("email_ops_001", "email_ops_002", "email_ops_003")
KEY_ENV = "EP_SLOW_JUDGE_KEY"
TOKEN = f"tok-slow-{uuid.uuid4().hex}"


class OneSlotServer:
    """An OpenAI-compatible endpoint that answers one chat completion at a time, each after ANSWER_SECONDS;
    the others queue at the server. Counts the calls and the most that were ever waiting at once."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls = 0
        self.waiting = 0
        self.most_waiting = 0
        self._slot: asyncio.Lock | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        self._slot = self._slot or asyncio.Lock()
        self.calls += 1
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        try:
            async with self._slot:
                await asyncio.sleep(ANSWER_SECONDS)
                await self.app(scope, receive, send)
        finally:
            self.waiting -= 1


def _sweep(agent_url: str, judge_url: str) -> SweepConfig:
    limits = {"request_timeout_seconds": JUDGE_TIMEOUT_SECONDS, "max_concurrency": 1}
    return SweepConfig.model_validate(
        {
            "name": "slow-judge",
            "scenarios": ["email_ops:1.0.0"],
            "task_ids": list(TASKS),
            "rollout_count": 1,
            "models": [{"name": "agent", "model": "sim-oracle", "base_url": agent_url, "api_key_env": KEY_ENV}],
            "rubric_judge": {
                "name": "slow-rubric",
                "model": SIM_JUDGE,
                "base_url": judge_url,
                "api_key_env": KEY_ENV,
                **limits,
            },
            "platform_judges": limits,
        }
    )


def test_the_sweeps_judge_settings_travel_only_when_set() -> None:
    ids = {"dataset_id": uuid.uuid4(), "space_id": uuid.uuid4(), "judge_ids": [uuid.uuid4()], "name": "n"}
    plain = AssessRunRequest.model_validate(ids).model_dump(mode="json")
    assert "judge_timeout_seconds" not in plain and "judge_max_concurrency" not in plain  # the spec's body
    set_ = AssessRunRequest(**ids, judge_timeout_seconds=2.5, judge_max_concurrency=1).model_dump(mode="json")
    assert (set_["judge_timeout_seconds"], set_["judge_max_concurrency"]) == (2.5, 1)


def test_the_pipeline_waits_for_every_wave_of_slow_verdicts() -> None:
    assert JudgeSetup().assess_timeout_seconds(rows=500) == DEFAULT_PIPELINE_TIMEOUT_SECONDS
    one_at_a_time = JudgeSetup(calls=ModelCallLimits(request_timeout_seconds=20, max_concurrency=1))
    # 500 rows x 2 judges, one call at a time, each up to 20 s and asked twice at most.
    assert one_at_a_time.assess_timeout_seconds(rows=500) >= 500 * 2 * 20 * 2


def test_a_models_max_concurrency_caps_the_runs_parallel_rollouts() -> None:
    sweep = SweepConfig.model_validate(
        {
            "name": "capped",
            "scenarios": ["team_chat:1.0.0"],
            "max_parallel": 8,
            "models": [
                {"name": "agent", "model": "sim-oracle", "base_url": "sim://local", "user_model": "npc"},
                {"name": "npc", "model": "sim-npc", "base_url": "sim://local", "max_concurrency": 2},
            ],
        }
    )
    scenario = ScenarioCatalog().get("team_chat:1.0.0")
    assert launch_request(sweep, sweep.models[0], scenario, "s").max_parallel == 2
    assert launch_request(sweep, sweep.models[1], scenario, "s").max_parallel == 2  # its own cap
    uncapped = sweep.model_copy(update={"models": [sweep.models[0].model_copy(update={"user_model": None})]})
    assert launch_request(uncapped, uncapped.models[0], scenario, "s").max_parallel == 8


@pytest.mark.slow
def test_rubric_and_platform_judges_on_a_one_slot_server_write_every_judgement(
    local_backend: Callable[..., EvaluationBackend], serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-local")
    catalog = ScenarioCatalog()
    book = ReferenceBook.from_catalog(catalog)
    agent = serve(create_sim_app(book))
    slow = OneSlotServer(create_sim_app(book, personas={SIM_JUDGE: sim_judge_persona, **PLATFORM_PERSONAS}))
    judge_url = f"{serve(slow).url}/v1"
    sweep = _sweep(f"{agent.url}/v1", judge_url)
    assert sweep.rubric_judge is not None and sweep.platform_judges is not None
    # The scenario the report describes: the queue outlasts the timeout, one answer does not.
    assert ANSWER_SECONDS < JUDGE_TIMEOUT_SECONDS < len(TASKS) * ANSWER_SECONDS

    scenario = catalog.get("email_ops:1.0.0")
    data = Path(tempfile.mkdtemp())
    warehouse = Warehouse(data / "warehouse")
    model = sweep.models[0]
    request = launch_request(sweep, model, scenario, "slow-sweep")
    ctx = RolloutContext("slow-sweep", request.run_name or "", model.name, scenario.key, model.name, True, None)
    backend = local_backend(data, catalog)
    run_and_collect(backend, request, ctx, scenario, warehouse, data / "traces", timeout_seconds=60)
    verify_partition(warehouse, scenario, model.name, scenario.key, sweep_id="slow-sweep")
    assert slow.calls == 0  # the rollouts did not touch the judges' server

    rubric = judge_partition_rubrics(
        warehouse,
        scenario,
        model.name,
        scenario.key,
        model_config_for(sweep.rubric_judge),
        max_concurrency=sweep.rubric_judge.max_concurrency,
        sweep_id="slow-sweep",
    )
    assert (rubric.judged, rubric.errors) == (len(TASKS), 0)
    assert (slow.calls, slow.most_waiting) == (len(TASKS), 1)  # one call per verdict, never a second in the queue

    endpoint = {"base_url": judge_url, "api_key_env": KEY_ENV}
    registry = ModelRegistry.defaults().with_models(
        {
            "veritas": RegisteredModel(model=SIM_QUALITY_JUDGE, **endpoint),
            "collinear_guard": RegisteredModel(model=SIM_SAFETY_JUDGE, **endpoint),
        }
    )
    settings = PlatformSettings(
        data_dir=data / "platform_server",
        tokens=TokenRegistry().with_token(TOKEN, SPACE),
        models=registry,
        model_timeout_seconds=PLATFORM_DEFAULT_TIMEOUT_SECONDS,
    )
    platform = serve(create_platform_app(settings))
    target = PlatformTarget(platform.url, TOKEN, SPACE, embedded=False)
    partition = AssessedPartition(data, warehouse, model.name, scenario.key, "slow-sweep")
    manifest = assessment_dataset_step(target, partition)
    assert manifest is not None and len(manifest.rows) == len(TASKS)
    summary = judgements_step(target, partition, sweep.platform_judges)
    assert summary is not None and summary.table.num_rows == 2 * len(TASKS)

    written = [row for f in warehouse.files("judgements") for row in pq.read_table(f).to_pylist()]
    assert len(written) == 2 * len(TASKS)
    assert {r["judge_kind"] for r in written} == {"quality", "safety"}
    assert (slow.calls, slow.most_waiting) == (3 * len(TASKS), 1)  # no call cancelled and sent again
