"""Canary secrets, one per credential, configured everywhere the project takes one; then a search for them.

One module-scoped run does, with DAGSTER_HOME and EVAL_PIPELINES_DATA_DIR in tmp:

1. a full sweep through the CLI (`eval_pipelines.cli.main`, assessment included, so the embedded platform's
   `assessment_dataset` and `judgements` assets run too) of two models over two scenarios. The agent model's key
   is a canary, and so is the key of the model named as the agents' NPC `user_model`; the platform's quality and
   safety judges are re-pointed (`PLATFORM_MODELS_FILE`) at an endpoint whose key is a canary;
2. the `synthetic_rows` platform asset in hosted mode (`PLATFORM_URL`/`PLATFORM_TOKEN`/`PLATFORM_SPACE_ID`),
   against the local platform app served on loopback with a canary bearer token and a canary generator key;
3. the HTML report (`eval_pipelines.reports.build_report`) over the sweep's catalog;
4. a run through the local evaluation service's HTTP API with a canary `API-Key` and a canary model key.

Every model call lands on one recording OpenAI-compatible endpoint (the simulated models and personas), which
proves that each canary was really used. Then every file under the data directories, the Dagster home
(storage, event logs, compute logs) and the service stores is searched, raw and decoded, as are the log
records and the console output of the whole run.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from eval_pipelines.cli import main
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.platform.app import create_platform_app
from eval_pipelines.platform.auth import TokenRegistry
from eval_pipelines.platform.config import PlatformSettings
from eval_pipelines.platform.models import SIM_SYNTH_MODEL_ID, ModelRegistry
from eval_pipelines.schemas.artifacts import STORED_ARTIFACTS_SUFFIX
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.sim.npc import SIM_NPC, sim_npc_persona
from eval_pipelines.sim.platform import PLATFORM_PERSONAS, SIM_QUALITY_JUDGE, SIM_SAFETY_JUDGE, SIM_SYNTH
from tests.reliability.support_canary import files_under, find_secrets
from tests.reliability.support_faults import FaultyModel
from tests.reliability.support_runs import BUILTIN_SCENARIOS, make_dagster_home

pytestmark = pytest.mark.slow


def _canary(role: str) -> str:
    return f"sk-canary-{role}-{uuid.uuid4().hex}"


CANARIES = {
    role: _canary(role)
    for role in ("agent", "npc", "judge", "synth", "platform-token", "service-api-key", "service-model")
}
KEY_VARIABLES = {"agent": "EP_CANARY_AGENT_KEY", "npc": "EP_CANARY_NPC_KEY", "judge": "EP_CANARY_JUDGE_KEY"}
KEY_VARIABLES["synth"] = "EP_CANARY_SYNTH_KEY"
PLATFORM_SPACE = str(uuid.uuid4())
SWEEP_ID = "canary-sweep"


@dataclass
class CanaryRun:
    roots: dict[str, Path]
    model_calls: list[dict[str, Any]]
    console: str
    log_lines: list[str]
    sweep_exit: int
    notes: dict[str, str] = field(default_factory=dict)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)
        if record.exc_info and not record.exc_text:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.lines.append(text)


def _sweep_yaml(model_url: str) -> str:
    return (
        "name: canary\n"
        'scenarios: ["team_chat:1.0.0", "email_ops:1.0.0"]\n'
        "task_ids: [team_chat_004, email_ops_001]\n"  # team_chat_004 messages an NPC
        "rollout_count: 1\n"
        "models:\n"
        f"  - {{name: canary-agent, model: sim-oracle, provider: custom, base_url: '{model_url}', "
        f"api_key_env: {KEY_VARIABLES['agent']}, user_model: canary-npc}}\n"
        f"  - {{name: canary-npc, model: {SIM_NPC}, provider: custom, base_url: '{model_url}', "
        f"api_key_env: {KEY_VARIABLES['npc']}}}\n"
    )


def _models_file(path: Path, model_url: str) -> Path:
    path.write_text(
        "models:\n"
        f"  veritas: {{model: {SIM_QUALITY_JUDGE}, base_url: '{model_url}', api_key_env: {KEY_VARIABLES['judge']}}}\n"
        f"  collinear_guard: {{model: {SIM_SAFETY_JUDGE}, base_url: '{model_url}', "
        f"api_key_env: {KEY_VARIABLES['judge']}}}\n"
        f"  {SIM_SYNTH_MODEL_ID}: {{model: {SIM_SYNTH}, base_url: '{model_url}', "
        f"api_key_env: {KEY_VARIABLES['synth']}}}\n",
        encoding="utf-8",
    )
    return path


def _hosted_synthetic_rows(root: Path, models_file: Path, mp: pytest.MonkeyPatch) -> Path:
    """`synthetic_rows` against the platform app on loopback, reached as a hosted platform with a canary token."""
    from eval_pipelines.definitions import assets_by_name
    from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths

    platform_dir = root / "platform_server"
    settings = PlatformSettings(
        data_dir=platform_dir,
        tokens=TokenRegistry().with_token(CANARIES["platform-token"], PLATFORM_SPACE),
        models=ModelRegistry.from_file(models_file),
    )
    with BackgroundServer(create_platform_app(settings)) as platform, mp.context() as hosted:
        hosted.setenv("PLATFORM_URL", platform.url)
        hosted.setenv("PLATFORM_TOKEN", CANARIES["platform-token"])
        hosted.setenv("PLATFORM_SPACE_ID", PLATFORM_SPACE)
        result = dg.materialize(
            [assets_by_name()["synthetic_rows"]],
            partition_key="team_chat:1.0.0",
            instance=dg.DagsterInstance.get(),
            resources={"paths": EvalPaths(), "assessment_platform": AssessmentPlatform()},
            raise_on_error=False,
        )
    assert result.success, "synthetic_rows failed against the hosted-mode platform"
    return platform_dir


def _report(data_dir: Path) -> Path | None:
    try:
        from eval_pipelines.reports import build_report
    except ImportError:
        return None
    return build_report(data_dir / "eval.duckdb", data_dir / "reports" / "report.html", SWEEP_ID).html


def _service_run(root: Path, model_url: str) -> Path:
    """A run through the evaluation service's HTTP API: canary API-Key, canary model key."""
    from eval_pipelines.clients.evaluation import EvaluationClient
    from eval_pipelines.lib.retry import RetryPolicy
    from eval_pipelines.schemas.model_config import ModelConfig
    from eval_pipelines.schemas.runs import RunLaunchRequest
    from eval_pipelines.service.api import create_app
    from eval_pipelines.service.auth import ApiKeyRegistry, Permission
    from eval_pipelines.service.settings import ServiceSettings

    service_dir = root / "eval_service"
    settings = ServiceSettings(
        data_dir=service_dir,
        api_keys=ApiKeyRegistry({CANARIES["service-api-key"]: Permission.WRITE}),
        scenarios_dir=BUILTIN_SCENARIOS,
    )
    config = {"model": "sim-oracle", "base_url": model_url, "api_key": CANARIES["service-model"]}
    request = RunLaunchRequest.model_validate(
        {"scenario_id": "email_ops:1.0.0", "task_ids": ["email_ops_001", "email_ops_003"], "model_config": config}
    )

    async def go(url: str) -> None:
        policy = RetryPolicy(max_attempts=2, base_delay=0.05, max_delay=0.5)
        async with EvaluationClient(url, CANARIES["service-api-key"], timeout_seconds=30, retry=policy) as client:
            tested = await client.test_model_config(ModelConfig.model_validate(config))
            assert tested.success, tested
            launched = await client.launch_run(request)
            run = await client.wait_for_run(launched.run_id, deadline_seconds=60, poll_interval=0.2)
            assert run.completed == 2, run
            for item in launched.rollouts:
                await client.get_artifacts(item.rollout_id)

    with BackgroundServer(create_app(settings)) as server:
        asyncio.run(go(server.url))
    return service_dir


@pytest.fixture(scope="module")
def canary_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CanaryRun]:
    root = tmp_path_factory.mktemp("canary")
    home = make_dagster_home(root / "dagster_home")
    data_dir = root / "data"
    book = ReferenceBook.from_catalog(ScenarioCatalog(BUILTIN_SCENARIOS))
    recorder = FaultyModel(create_sim_app(book, personas={SIM_NPC: sim_npc_persona, **PLATFORM_PERSONAS}))
    handler = _Collect()
    root_logger = logging.getLogger()
    previous_level = root_logger.level
    console = io.StringIO()
    notes: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as mp, BackgroundServer(recorder) as model_server:
        model_url = f"{model_server.url}/v1"
        mp.setenv("DAGSTER_HOME", str(home))
        mp.setenv("EVAL_PIPELINES_DATA_DIR", str(data_dir))
        for role, variable in KEY_VARIABLES.items():
            mp.setenv(variable, CANARIES[role])
        models_file = _models_file(root / "platform_models.yaml", model_url)
        mp.setenv("PLATFORM_MODELS_FILE", str(models_file))
        config = root / "sweeps" / "canary.yaml"
        config.parent.mkdir()
        config.write_text(_sweep_yaml(model_url), encoding="utf-8")
        root_logger.addHandler(handler)
        root_logger.setLevel(logging.DEBUG)
        try:
            with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):
                code = main(["sweep", "--config", str(config), "--sweep-id", SWEEP_ID])
                platform_dir = _hosted_synthetic_rows(root, models_file, mp)
                report = _report(data_dir)
                if report is None:
                    notes["report"] = "eval_pipelines.reports is not importable; no report was built"
                service_dir = _service_run(root, model_url)
        finally:
            root_logger.removeHandler(handler)
            root_logger.setLevel(previous_level)
    yield CanaryRun(
        roots={
            "data": data_dir,
            "dagster_home": home,
            "platform_server": platform_dir,
            "eval_service": service_dir,
        },
        model_calls=recorder.requests,
        console=console.getvalue(),
        log_lines=handler.lines,
        sweep_exit=code,
        notes=notes,
    )


def _calls(run: CanaryRun, **match: Any) -> list[dict[str, Any]]:
    return [c for c in run.model_calls if all(c.get(k) == v for k, v in match.items())]


def test_the_run_really_used_every_canary(canary_run: CanaryRun) -> None:
    """Without this the search below could pass by never having used a key."""
    assert canary_run.sweep_exit == 0, canary_run.console[-3000:]
    agent = {c["authorization"] for c in _calls(canary_run, model="sim-oracle", has_tools=True)}
    assert f"Bearer {CANARIES['agent']}" in agent
    assert f"Bearer {CANARIES['service-model']}" in agent
    assert {c["authorization"] for c in _calls(canary_run, model=SIM_QUALITY_JUDGE)} == {f"Bearer {CANARIES['judge']}"}
    assert {c["authorization"] for c in _calls(canary_run, model=SIM_SAFETY_JUDGE)} == {f"Bearer {CANARIES['judge']}"}
    assert {c["authorization"] for c in _calls(canary_run, model=SIM_SYNTH)} == {f"Bearer {CANARIES['synth']}"}
    # The NPC model is a model of the sweep too, so it also runs as an agent (with tools).
    assert {c["authorization"] for c in _calls(canary_run, model=SIM_NPC, has_tools=True)} == {
        f"Bearer {CANARIES['npc']}"
    }


def test_the_npc_user_model_key_reaches_the_npc_model(canary_run: CanaryRun) -> None:
    """The chat tool server calls the sweep's `user_model` for NPC replies (no tools in those requests)."""
    npc_turns = _calls(canary_run, model=SIM_NPC, has_tools=False)
    assert npc_turns, "no NPC reply was asked of the sweep's user_model"
    assert {c["authorization"] for c in npc_turns} == {f"Bearer {CANARIES['npc']}"}


def test_no_canary_in_any_file(canary_run: CanaryRun) -> None:
    files = files_under(canary_run.roots.values())
    names = {p.name for p in files}
    # The search covers what it claims to: warehouse tables, traces, stores, Dagster storage, the report.
    assert any(p.suffix == ".parquet" and "judgements" in p.parts for p in files)
    assert any(p.suffix == ".parquet" and "synthetic_rows" in p.parts for p in files)
    assert {"runs.sqlite3", "platform.sqlite3", "eval.duckdb"} <= names
    assert any(p.name.endswith(STORED_ARTIFACTS_SUFFIX) and "artifacts" in p.parts for p in files)
    assert any("storage" in p.parts for p in files), "the Dagster storage is empty"
    assert find_secrets(canary_run.roots.values(), CANARIES.values()) == []


def test_no_canary_in_the_report(canary_run: CanaryRun) -> None:
    if "report" in canary_run.notes:
        pytest.skip(canary_run.notes["report"])
    html = canary_run.roots["data"] / "reports" / "report.html"
    assert html.is_file() and html.stat().st_size > 0
    assert find_secrets([html.parent], CANARIES.values()) == []


def test_no_canary_in_logs_or_console(canary_run: CanaryRun) -> None:
    assert canary_run.log_lines, "nothing was logged; the handler saw nothing"
    assert canary_run.console
    leaked = [
        line[:200]
        for line in [*canary_run.log_lines, canary_run.console]
        if any(secret in line for secret in CANARIES.values())
    ]
    assert leaked == []
