"""A model endpoint that uses up a rollout's time is the endpoint's error, never the agent's timeout.

Three ways an endpoint outlasts a rollout without failing a request outright: it accepts the request and never
answers, it trickles its reply a byte at a time (no single read waits long), or it answers 429 with a
Retry-After longer than the rollout. The per-call timeout is far above the rollout's, as with a sweep's
defaults, so only the rollout's time can end them. The control: an endpoint that answers at once, behind an
agent that then takes too long itself, is still the agent's timeout.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipelines.agents.base import BaseAgent
from eval_pipelines.cli import EXIT_ERRORS
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutSpec
from eval_pipelines.environments.base import BaseEnvironment
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.deadline import RolloutDeadline, rollout_deadline
from eval_pipelines.llm.errors import LLMTimeoutError
from eval_pipelines.llm.types import ChatMessage, ChatRequest
from eval_pipelines.schemas.artifacts import META_TIMEOUT, RunArtifacts
from eval_pipelines.schemas.runs import MSG_TIMEOUT, ErrorClass, RolloutStatus, TerminationReason
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.toolservers.host import ToolServerHost
from tests.reliability.support_faults import HANG_SECONDS, Fault, ModelFactory, ModelFaultRule
from tests.reliability.support_runs import (
    SCENARIO_ID,
    TARGET_TASK,
    engine_spec,
    execute,
    make_dagster_home,
    model_config,
)

#: The rollout's time: a healthy rollout of the target task takes well under a second.
ROLLOUT_SECONDS = 2.0
#: A sweep's kind of per-call timeout, far above the rollout's.
REQUEST_SECONDS = 120.0
#: Long enough to be found if it leaked into a message or an artifact.
KEY = "sk-slow-endpoint-canary-0123456789"
#: A bound on tests whose client must give up by itself: without the cap it would wait out `HANG_SECONDS`.
GUARD_SECONDS = HANG_SECONDS / 2


def _config(server_url: str) -> dict[str, Any]:
    return model_config(f"{server_url}/v1", api_key=KEY, request_timeout_seconds=REQUEST_SECONDS)


def _unanswered(server_url: str, last: str) -> str:
    return (
        f"chat completion for model 'sim-oracle' at {server_url}/v1/chat/completions was still unanswered when "
        f"the rollout's time limit ({ROLLOUT_SECONDS:g}s) ran out ({last})"
    )


@pytest.mark.parametrize(
    ("fault", "last"),
    [
        (Fault.HANG, "no attempt was answered"),
        (Fault.TRICKLE, "no attempt was answered"),
        (Fault.RATE_LIMITED_LONG, "the last attempt got HTTP 429"),
    ],
    ids=["never_answers", "trickles", "http_429_forever"],
)
async def test_endpoint_that_outlasts_the_rollout_is_a_model_endpoint_error(
    fault: Fault,
    last: str,
    faulty_model: ModelFactory,
    tool_host: ToolServerHost,
    catalog: ScenarioCatalog,
) -> None:
    wrapper, server = faulty_model(ModelFaultRule(fault))
    spec = engine_spec(catalog, tool_host, _config(server.url), timeout_seconds=ROLLOUT_SECONDS)
    outcome = await execute(RolloutEngine(ChatClientPool(), ToolServerAdmin()), spec)

    assert (outcome.status, outcome.termination_reason, outcome.error_class) == (
        RolloutStatus.FAILED,
        TerminationReason.AGENT_ERROR,
        ErrorClass.MODEL_ENDPOINT,
    ), outcome.result.message
    assert _unanswered(server.url, last) in outcome.result.message
    assert outcome.result.message.startswith("Agent execution failed: ")
    assert META_TIMEOUT not in outcome.artifacts.metadata
    assert KEY not in outcome.artifacts.model_dump_json()
    assert wrapper.requests and all(r["faulted"] for r in wrapper.requests)


async def test_a_request_is_bounded_by_what_remains_of_the_rollout(faulty_model: ModelFactory) -> None:
    """The client gives up on its own at the deadline (a sync agent's thread cannot be cancelled), and the
    deadline remembers it: an agent that swallows the error and then runs out of time is still the endpoint's."""
    _, server = faulty_model(ModelFaultRule(Fault.TRICKLE))
    deadline = RolloutDeadline(ROLLOUT_SECONDS)
    request = ChatRequest(model="sim-oracle", messages=[ChatMessage.user("Say hello.")])
    async with ChatClient(f"{server.url}/v1", KEY, timeout_seconds=REQUEST_SECONDS) as client:
        with rollout_deadline(deadline), pytest.raises(LLMTimeoutError) as raised:
            async with asyncio.timeout(GUARD_SECONDS):
                await client.complete(request)
    assert str(raised.value) == _unanswered(server.url, "no attempt was answered")
    assert deadline.unanswered() == str(raised.value)


async def test_requests_answered_in_time_leave_the_rollout_time_to_the_agent(faulty_model: ModelFactory) -> None:
    _, server = faulty_model(None)
    deadline = RolloutDeadline(ROLLOUT_SECONDS)
    request = ChatRequest(model="sim-oracle", messages=[ChatMessage.user("Say hello.")])
    async with ChatClient(f"{server.url}/v1", KEY) as client:
        with rollout_deadline(deadline):
            await client.complete(request)
    assert deadline.unanswered() is None


class _SlowThinker(BaseAgent):
    """Asks the model once (it answers at once), then thinks for longer than the rollout may take."""

    def __init__(self, client: ChatClient, model: str) -> None:
        self.client = client
        self.model = model
        self.answered = False

    @staticmethod
    def name() -> str:
        return "slow-thinker"

    async def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        await self.client.complete(ChatRequest(model=self.model, messages=[ChatMessage.user(instruction)]))
        self.answered = True
        await asyncio.sleep(HANG_SECONDS)


async def test_agent_that_runs_past_the_rollout_between_answered_requests_is_the_agents_timeout(
    faulty_model: ModelFactory, tool_host: ToolServerHost, catalog: ScenarioCatalog
) -> None:
    wrapper, server = faulty_model(None)
    agents: list[_SlowThinker] = []

    def slow_thinker(spec: RolloutSpec, clients: ChatClientPool, stop: asyncio.Event) -> BaseAgent:
        agents.append(_SlowThinker(clients.for_model(spec.model_config), spec.model_config.model))
        return agents[-1]

    spec = engine_spec(catalog, tool_host, _config(server.url), timeout_seconds=ROLLOUT_SECONDS)
    outcome = await execute(RolloutEngine(ChatClientPool(), ToolServerAdmin(), agent_factory=slow_thinker), spec)

    assert [a.answered for a in agents] == [True] and len(wrapper.requests) == 1
    assert (outcome.status, outcome.termination_reason) == (RolloutStatus.FAILED, TerminationReason.TIMEOUT)
    assert outcome.error_class is None
    assert outcome.artifacts.error == MSG_TIMEOUT and outcome.artifacts.metadata[META_TIMEOUT] is True


@pytest.mark.slow
def test_a_sweep_whose_only_model_never_answers_exits_with_errors_and_no_pass_rate(
    faulty_model: ModelFactory, tmp_path: Path
) -> None:
    _, server = faulty_model(ModelFaultRule(Fault.HANG))
    config = tmp_path / "sweeps" / "silent.yaml"
    config.parent.mkdir()
    config.write_text(
        "name: silent\n"
        f'scenarios: ["{SCENARIO_ID}"]\n'
        f"task_ids: [{TARGET_TASK}]\n"
        "rollout_count: 1\n"
        "error_retries: 0\n"
        f"rollout_timeout_seconds: {ROLLOUT_SECONDS}\n"
        "models:\n"
        f"  - {{name: silent-model, model: sim-oracle, base_url: '{server.url}/v1', api_key_env: SILENT_KEY,\n"
        f"     request_timeout_seconds: {REQUEST_SECONDS}}}\n",
        encoding="utf-8",
    )
    data = tmp_path / "data"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(make_dagster_home(tmp_path / "dagster_home")),
        "EVAL_PIPELINES_DATA_DIR": str(data),
        "SILENT_KEY": KEY,
    }
    command = [sys.executable, "-m", "eval_pipelines.cli", "sweep", "--config", str(config), "--skip-assessment"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    assert done.returncode == EXIT_ERRORS, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and KEY not in done.stderr + done.stdout
    assert f"silent-model \u00d7 {SCENARIO_ID}: 1/1 errors (model_endpoint: " in done.stderr, done.stderr[-2000:]
    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    try:
        [(n, n_errors, pass_rate)] = con.execute("select n, n_errors, pass_rate from pass_rates").fetchall()
    finally:
        con.close()
    assert (n, n_errors, pass_rate) == (0, 1, None)
