"""A SimLab-style agent in an interpreter of its own (`agent_environment`): tools through the engine, its model
through the rollout's proxy (metered, never our key), an agent that cannot start is an `agent_environment` error,
its own crash its failure, and a cancel or a timeout leaves no process behind.

These use this project's own Python as the agent's interpreter (started with `-I`, so nothing of ours is
importable there) and stand-in agents that need only the standard library; SimLab's own agents, in a venv with
mcp 1.x, are in test_simlab_agents_remote.py."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from eval_pipelines.agents.model_proxy import ModelProxy
from eval_pipelines.agents.remote import RemoteAgent
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutSpec, default_agent_factory
from eval_pipelines.inputs.paths import CACHE_DIR_ENV
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.agent_environment import AgentEnvironment
from eval_pipelines.schemas.artifacts import META_USAGE
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import ErrorClass, RolloutStatus, TerminationReason
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.agents.stand_in_agents import AGENTS_MODULE, SOURCE
from tests.support.scripted_llm import Script, create_scripted_app

CANARY = "sk-canary-agent-env-5d1e"
OUR_SECRET = "ours-secret-7a0c"
CATALOG = ScenarioCatalog()
SCENARIO = CATALOG.get("email_ops:1.0.0")
TASK = SCENARIO.task("email_ops_001")


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / f"{AGENTS_MODULE}.py").write_text(SOURCE)
    return folder


@pytest.fixture
def sim_url(serve: Any) -> str:
    return str(serve(create_sim_app(ReferenceBook.from_catalog(CATALOG))).url)


def _spec(
    sim_url: str, tool_host: Any, agent: str, environment: AgentEnvironment, timeout: float = 60.0
) -> RolloutSpec:
    return RolloutSpec(
        rollout_id="ro_remote",
        run_id="run_remote",
        scenario_id=SCENARIO.scenario_id,
        task=TASK,
        model_config=ModelConfig(model="sim-oracle", api_key=CANARY, base_url=f"{sim_url}/v1", max_steps=10),
        tool_server_urls={"email": tool_host.base_url("email")},
        seed={"email": SCENARIO.seed_payload(TASK, "email")},
        verifiers=load_verifier_package(SCENARIO.verifiers_dir),
        timeout_seconds=timeout,
        agent_path=agent,
        agent_environment=environment,
    )


def _own_python(agents_dir: Path) -> AgentEnvironment:
    return AgentEnvironment(python=sys.executable, paths=[str(agents_dir)])


class Captured:
    """An engine whose agent factory keeps the agents it made, so a test can reach their worker."""

    def __init__(self) -> None:
        self.agents: list[Any] = []
        self.engine = RolloutEngine(ChatClientPool(), ToolServerAdmin(), agent_factory=self._factory)

    def _factory(self, *args: Any, **kwargs: Any) -> Any:
        agent = default_agent_factory(*args, **kwargs)
        self.agents.append(agent)
        return agent

    async def execute(self, spec: RolloutSpec, cancel: asyncio.Event | None = None) -> Any:
        try:
            return await self.engine.execute(spec, None, cancel)
        finally:
            await self.engine.clients.aclose()
            await self.engine.admin.aclose()


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


async def test_an_agent_in_its_own_interpreter_passes_through_the_engine_and_never_sees_our_key(
    sim_url: str, tool_host: Any, agents_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EP_TEST_OUR_SECRET", OUR_SECRET)
    captured = Captured()
    spec = _spec(sim_url, tool_host, f"{AGENTS_MODULE}:ChatLoopAgent", _own_python(agents_dir))
    outcome = await captured.execute(spec)

    assert outcome.status == RolloutStatus.COMPLETED, outcome.artifacts.error
    assert outcome.result.success and outcome.result.reward == 1.0
    artifacts = outcome.artifacts
    # the engine recorded the call the agent made through it, as for any agent
    [call] = artifacts.tool_calls
    assert (call.tool_server, call.tool_name, call.parameters["to"]) == ("email", "send_email", TASK_RECIPIENT)
    assert artifacts.steps_taken == 1 and artifacts.final_observation
    assert [m["role"] for m in artifacts.messages][:2] == ["user", "assistant"]
    # every model call went through our client, and was metered
    usage = artifacts.metadata[META_USAGE]
    assert usage["llm_calls"] == 2 and usage["total_tokens"] > 0
    assert captured.agents[0].proxy.requests == 2
    # the worker's environment: the proxy's token and URL, HOME of its own, nothing of ours
    environ = artifacts.metadata["environ"]
    assert environ["OPENAI_API_KEY"] == environ["SIMLAB_AGENT_API_KEY"] == captured.agents[0].proxy.token
    assert environ["SIMLAB_AGENT_BASE_URL"].startswith("http://127.0.0.1:")
    assert environ["SIMLAB_AGENT_MODEL"] == "sim-oracle" and environ["SIMLAB_AGENT_PROVIDER"] == "openai"
    assert environ["HOME"] != os.environ.get("HOME") and "EP_TEST_OUR_SECRET" not in environ
    seen_by_agent = json.dumps(artifacts.metadata["environ"]) + json.dumps(artifacts.metadata["proxy_replies"])
    assert CANARY not in seen_by_agent and OUR_SECRET not in seen_by_agent and sim_url not in seen_by_agent


TASK_RECIPIENT = TASK.reference_actions[0].parameters["to"]


async def test_an_async_agent_lists_the_tools_with_their_input_schema(
    sim_url: str, tool_host: Any, agents_dir: Path
) -> None:
    spec = _spec(sim_url, tool_host, f"{AGENTS_MODULE}:AsyncLister", _own_python(agents_dir))
    outcome = await Captured().execute(spec)
    assert outcome.status == RolloutStatus.COMPLETED, outcome.artifacts.error
    assert "send_email" in outcome.artifacts.final_observation.split(",")


@pytest.mark.parametrize(
    ("agent", "environment", "expected"),
    [
        ("missing_agent_module:Agent", None, "ModuleNotFoundError: No module named 'missing_agent_module'"),
        (f"{AGENTS_MODULE}:NoSuchClass", None, "AttributeError"),
        (f"{AGENTS_MODULE}:Refuser", None, "ValueError: no settings for me"),
        (f"{AGENTS_MODULE}:Crasher", AgentEnvironment(python="/nonexistent/bin/python"), "/nonexistent/bin/python"),
        (f"{AGENTS_MODULE}:Crasher", AgentEnvironment(venv="/nonexistent-venv"), "/nonexistent-venv/bin/python"),
    ],
)
async def test_an_agent_that_cannot_start_is_an_agent_environment_error(
    sim_url: str, tool_host: Any, agents_dir: Path, agent: str, environment: AgentEnvironment | None, expected: str
) -> None:
    spec = _spec(sim_url, tool_host, agent, environment or _own_python(agents_dir))
    outcome = await Captured().execute(spec)
    assert outcome.status == RolloutStatus.FAILED
    assert outcome.error_class == ErrorClass.AGENT_ENVIRONMENT
    assert outcome.termination_reason == TerminationReason.INFRASTRUCTURE_ERROR
    assert expected in outcome.result.message and not outcome.result.success


async def test_the_agents_own_crash_is_its_failure_with_what_it_recorded(
    sim_url: str, tool_host: Any, agents_dir: Path
) -> None:
    spec = _spec(sim_url, tool_host, f"{AGENTS_MODULE}:Crasher", _own_python(agents_dir))
    outcome = await Captured().execute(spec)
    assert outcome.status == RolloutStatus.FAILED and outcome.error_class is None
    assert outcome.termination_reason == TerminationReason.AGENT_ERROR
    assert "Agent execution failed: RuntimeError: boom in the agent" in outcome.result.message
    assert outcome.artifacts.messages[-1]["content"] == "about to fail"


async def test_a_failing_venv_install_is_an_error_quoting_pip(
    sim_url: str, tool_host: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    missing = tmp_path / "missing_agent-1.0-py3-none-any.whl"
    environment = AgentEnvironment(requirements=[str(missing)], pip_flags=["--no-index"])
    started = time.monotonic()
    outcome = await Captured().execute(_spec(sim_url, tool_host, "missing_agent:Agent", environment))
    assert time.monotonic() - started < 60
    assert outcome.status == RolloutStatus.FAILED and outcome.error_class == ErrorClass.AGENT_ENVIRONMENT
    assert "cannot install the agent environment" in outcome.result.message
    assert "missing_agent-1.0-py3-none-any.whl" in outcome.result.message  # pip's own words


@pytest.mark.parametrize("ending", ["cancel", "timeout"])
async def test_a_cancelled_or_timed_out_agent_leaves_no_process_behind(
    sim_url: str, tool_host: Any, agents_dir: Path, ending: str
) -> None:
    captured = Captured()
    timeout = 600 if ending == "cancel" else 8
    spec = _spec(sim_url, tool_host, f"{AGENTS_MODULE}:Sleeper", _own_python(agents_dir), timeout=timeout)
    cancel = asyncio.Event()
    running = asyncio.create_task(captured.execute(spec, cancel))
    worker_pid = child_pid = None
    for _ in range(1200):
        await asyncio.sleep(0.05)
        agent = captured.agents[0] if captured.agents else None
        if isinstance(agent, RemoteAgent) and agent.worker is not None and agent.worker.pid is not None:
            worker_pid = agent.worker.pid
        if worker_pid is not None and Path(f"/proc/{worker_pid}").exists():
            children = Path(f"/proc/{worker_pid}/task/{worker_pid}/children").read_text().split()
            if children:
                child_pid = int(children[0])
                break
    assert worker_pid is not None and child_pid is not None, "the sleeper never started its child"
    if ending == "cancel":
        cancel.set()
    outcome = await asyncio.wait_for(running, 60)
    expected = TerminationReason.CANCELLED if ending == "cancel" else TerminationReason.TIMEOUT
    assert outcome.termination_reason == expected
    assert _gone(worker_pid) and _gone(child_pid)


async def test_the_proxy_answers_only_its_token_and_only_chat_completions(sim_url: str) -> None:
    client = ChatClientPool().for_model(ModelConfig(model="sim-oracle", api_key=CANARY, base_url=f"{sim_url}/v1"))
    config = ModelConfig(model="sim-oracle", api_key=CANARY, base_url=f"{sim_url}/v1")
    body = {"model": "anything", "messages": [{"role": "user", "content": TASK.description}]}
    try:
        async with ModelProxy(client, config, "ro_proxy") as proxy, httpx.AsyncClient(base_url=proxy.base_url) as http:
            assert (await http.post("/chat/completions", json=body)).status_code == 401
            wrong = await http.post("/chat/completions", json=body, headers={"Authorization": "Bearer " + CANARY})
            assert wrong.status_code == 401
            auth = {"Authorization": f"Bearer {proxy.token}"}
            streamed = await http.post("/chat/completions", json={**body, "stream": True}, headers=auth)
            assert streamed.status_code == 400 and "stream" in streamed.json()["error"]["message"]
            assert (await http.post("/embeddings", json=body, headers=auth)).status_code == 404
            models = await http.get("/models", headers=auth)
            assert [m["id"] for m in models.json()["data"]] == ["sim-oracle"]
            # both URL shapes: `<base>/chat/completions` (litellm, openai) and the bare path
            for url in ("/chat/completions", proxy.base_url.removesuffix("/v1") + "/chat/completions"):
                answer = await http.post(url, json=body, headers=auth)
                assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"]
            assert proxy.requests == 2 and CANARY not in answer.text
    finally:
        await client.aclose()


async def test_an_endpoint_failure_behind_the_proxy_is_an_endpoint_error_not_the_agents(
    serve: Any, tool_host: Any, agents_dir: Path
) -> None:
    refusing = serve(create_scripted_app(Script([{"status": 401}])))
    spec = _spec(refusing.url, tool_host, f"{AGENTS_MODULE}:ChatLoopAgent", _own_python(agents_dir))
    outcome = await Captured().execute(spec)
    # the agent crashed on the proxy's 502, but what failed was the endpoint behind it
    assert outcome.status == RolloutStatus.FAILED and outcome.error_class == ErrorClass.MODEL_ENDPOINT
    assert "401" in outcome.result.message and CANARY not in outcome.result.message


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"python": "/usr/bin/python3", "venv": "/v"},
        {"python": "/usr/bin/python3", "pip_flags": ["--no-deps"]},
        {"requirements": ["x"], "env": {"OPENAI_API_KEY": "k"}},
        {"requirements": ["x"], "env": {"SIMLAB_AGENT_BASE_URL": "http://elsewhere"}},
        {"requirements": ["x"], "env": {"not a name": "v"}},
        {"requirements": [""]},
    ],
)
def test_an_agent_environment_names_one_interpreter_and_no_variable_of_the_rollouts(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        AgentEnvironment.model_validate(fields)
