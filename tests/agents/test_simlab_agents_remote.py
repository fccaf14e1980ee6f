"""SimLab's own agents, unchanged, in a venv of their own with mcp 1.x (this project keeps mcp 2.x): the built-in
`ReferenceAgent` from `simulationlab==0.2.0` on PyPI, and the cookbook's `ConfigurableAgent`, run against the
simulated endpoint and pass like the in-process reference agent; the engine records their tool calls, every model
call is metered, and neither the worker nor anything the proxy hands it holds the sweep's key.

The venv is made from a requirements list on first use (inside the first test that needs it, about a minute, then
cached under the cache dir: the same list, the same venv)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from eval_pipelines.agents.model_proxy import ModelProxy
from eval_pipelines.agents.remote import AgentWorker, RemoteAgent, resolve_interpreter
from eval_pipelines.cli import main
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutSpec
from eval_pipelines.inputs.paths import cache_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.agent_environment import AGENT_VENV_PREFIX, AgentEnvironment
from eval_pipelines.schemas.artifacts import META_USAGE
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import RolloutStatus
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.reliability.support_runs import make_dagster_home
from tests.support.simlab_sources import cookbook_dir
from tests.support.stored_files import plain_bytes

pytestmark = pytest.mark.slow

CANARY = "sk-canary-simlab-agent-3b9f"
REFERENCE_AGENT = "simlab.agents.reference_agent:ReferenceAgent"
CONFIGURABLE_AGENT = "simlab_auto_research.configurable_agent:ConfigurableAgent"
SIMLAB_ENVIRONMENT = AgentEnvironment(
    requirements=["simulationlab==0.2.0", "mcp>=1,<2"],
    # simulationlab declares Python >= 3.13; its agents run on this interpreter's version as they are.
    pip_flags=["--ignore-requires-python"],
)
CATALOG = ScenarioCatalog()
SCENARIO = CATALOG.get("email_ops:1.0.0")
TASK_IDS = ["email_ops_001", "email_ops_003"]


@pytest.fixture(scope="module")
def simlab_python() -> Path:
    """The venv's interpreter, installed here on first use (then cached for every later run)."""
    return resolve_interpreter(SIMLAB_ENVIRONMENT)


def test_the_agent_venv_holds_mcp_1_while_the_project_keeps_mcp_2(simlab_python: Path) -> None:
    theirs = subprocess.run(
        [simlab_python, "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert theirs.startswith("1.") and importlib.metadata.version("mcp").startswith("2.")
    assert simlab_python.is_relative_to(cache_dir() / "venvs")
    assert simlab_python.parents[1].name.startswith(AGENT_VENV_PREFIX)
    assert resolve_interpreter(SIMLAB_ENVIRONMENT) == simlab_python  # the same list: the same venv


class Watched:
    """What crosses into the worker: every line sent to it, every proxy answer, and its environment as the kernel
    holds it (read while it runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[str] = []
        self.replies: list[str] = []
        self.environ: list[bytes] = []
        watched = self
        send, complete, answer = AgentWorker.send, ModelProxy._complete, RemoteAgent._answer

        async def recording_send(worker: AgentWorker, message: dict[str, Any]) -> None:
            watched.sent.append(json.dumps(message, default=str))
            await send(worker, message)

        async def recording_complete(proxy: ModelProxy, request: Any) -> tuple[int, Any]:
            status, payload = await complete(proxy, request)
            watched.replies.append(json.dumps(payload))
            return status, payload

        async def reading_answer(agent: RemoteAgent, worker: AgentWorker, *args: Any) -> None:
            watched.environ.append(Path(f"/proc/{worker.pid}/environ").read_bytes())
            await answer(agent, worker, *args)

        monkeypatch.setattr(AgentWorker, "send", recording_send)
        monkeypatch.setattr(ModelProxy, "_complete", recording_complete)
        monkeypatch.setattr(RemoteAgent, "_answer", reading_answer)


async def _rollout(model_url: str, tool_host: Any, task_id: str, **agent: Any) -> Any:
    task = SCENARIO.task(task_id)
    spec = RolloutSpec(
        rollout_id=f"ro_{task_id}",
        run_id="run_simlab_remote",
        scenario_id=SCENARIO.scenario_id,
        task=task,
        model_config=ModelConfig(model="sim-oracle", api_key=CANARY, base_url=f"{model_url}/v1"),
        tool_server_urls={ts.name: tool_host.base_url(ts.name) for ts in task.tool_servers},
        seed={ts.name: SCENARIO.seed_payload(task, ts.name) for ts in task.tool_servers},
        verifiers=load_verifier_package(SCENARIO.verifiers_dir),
        timeout_seconds=180,
        **agent,
    )
    engine = RolloutEngine(ChatClientPool(), ToolServerAdmin())
    try:
        return await engine.execute(spec)
    finally:
        await engine.clients.aclose()
        await engine.admin.aclose()


@pytest.mark.parametrize("task_id", TASK_IDS)
async def test_simlabs_reference_agent_scores_like_ours_and_never_sees_the_key(
    simlab_python: Path, serve: Any, tool_host: Any, monkeypatch: pytest.MonkeyPatch, task_id: str
) -> None:
    model_url = serve(create_sim_app(ReferenceBook.from_catalog(CATALOG))).url
    ours = await _rollout(model_url, tool_host, task_id)
    watched = Watched(monkeypatch)
    theirs = await _rollout(
        model_url, tool_host, task_id, agent_path=REFERENCE_AGENT, agent_environment=SIMLAB_ENVIRONMENT
    )
    assert theirs.status == RolloutStatus.COMPLETED, theirs.artifacts.error
    assert (theirs.result.success, theirs.result.reward) == (ours.result.success, ours.result.reward) == (True, 1.0)
    # the engine recorded SimLab's calls as ours: same calls, same order
    assert [(c.tool_server, c.tool_name) for c in theirs.artifacts.tool_calls] == [
        (c.tool_server, c.tool_name) for c in ours.artifacts.tool_calls
    ]
    assert theirs.artifacts.metadata["reference_agent"] is True  # SimLab's agent wrote it, in its own process
    usage = theirs.artifacts.metadata[META_USAGE]
    assert usage["llm_calls"] == ours.artifacts.metadata[META_USAGE]["llm_calls"] and usage["total_tokens"] > 0
    assert watched.environ and watched.sent and watched.replies
    for seen in [*watched.sent, *watched.replies, *(e.decode("utf-8", "replace") for e in watched.environ)]:
        assert CANARY not in seen and model_url not in seen


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("DAGSTER_HOME", str(make_dagster_home(tmp_path / "dagster_home")))
    monkeypatch.setenv("EVAL_PIPELINES_DATA_DIR", str(tmp_path / "data"))
    yield tmp_path


def _table(data: Path, name: str) -> list[dict[str, Any]]:
    return [
        row
        for path in sorted((data / "warehouse" / name).rglob("*.parquet"))
        for row in pq.read_table(path).to_pylist()
    ]


def test_a_sweep_runs_simlabs_reference_agent_and_a_cookbook_agent_unchanged(
    simlab_python: Path, isolated: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_url = serve(create_sim_app(ReferenceBook.from_catalog(CATALOG))).url
    monkeypatch.setenv("EP_AGENT_ENV_CANARY", CANARY)
    research = cookbook_dir() / "simlab-auto-research"
    common = {
        "model": "sim-oracle",
        "provider": "custom",
        "base_url": f"{model_url}/v1",
        "api_key_env": "EP_AGENT_ENV_CANARY",
    }
    environment = SIMLAB_ENVIRONMENT.model_dump(exclude_none=True)
    config = {
        "name": "simlab-agents",
        "scenarios": [SCENARIO.scenario_id],
        "task_ids": TASK_IDS,
        "rollout_count": 1,
        "models": [
            {"name": "in-process", **common},
            {"name": "simlab-reference", **common, "agent": REFERENCE_AGENT, "agent_environment": environment},
            {
                "name": "cookbook-configurable",
                **common,
                "agent": CONFIGURABLE_AGENT,
                "agent_environment": {
                    **environment,
                    "paths": [str(research / "src")],
                    "env": {"SYSTEM_PROMPT_PATH": str(research / "system-prompt.md")},
                },
            },
        ],
    }
    path = isolated / "simlab-agents.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML

    assert main(["sweep", "--config", str(path)]) == 0

    data = isolated / "data"
    rollouts = _table(data, "rollouts")
    by_model: dict[str, list[dict[str, Any]]] = {}
    for row in rollouts:
        by_model.setdefault(row["model_name"], []).append(row)
    assert sorted(by_model) == ["cookbook-configurable", "in-process", "simlab-reference"]
    for name, rows in by_model.items():
        assert sorted(r["task_id"] for r in rows) == TASK_IDS, name
        assert all(r["success"] and r["error_class"] is None for r in rows), (name, rows)
        assert all(r["total_tokens"] > 0 for r in rows), name  # metered through the proxy
    calls = _table(data, "tool_calls")
    per_model = {
        name: sorted((c["task_id"], c["tool_name"]) for c in calls if c["model_name"] == name) for name in by_model
    }
    assert per_model["simlab-reference"] == per_model["cookbook-configurable"] == per_model["in-process"] != []
    leaks = [str(p) for p in data.rglob("*") if p.is_file() and CANARY.encode() in plain_bytes(p)]
    assert leaks == []
