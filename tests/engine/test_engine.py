"""The rollout engine against the real email tool server: success, failure paths and partial artifacts."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutSpec
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib.serving import BackgroundServer, free_port
from eval_pipelines.schemas.artifacts import META_STATE, META_STATE_DIFFS, META_TIMEOUT
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import MSG_CANCELLED, ErrorClass, RolloutPhase, RolloutStatus, TerminationReason
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.toolservers.app import create_app
from eval_pipelines.toolservers.email import EmailServer
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.support.scripted_llm import Script, create_scripted_app, text_reply, tool_call_reply

SCENARIO = ScenarioCatalog().get("email_ops:1.0.0")
TASK = SCENARIO.task("email_ops_001")
TWO_STEP_TASK = SCENARIO.task("email_ops_003")


class Phases:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def phase(self, phase: RolloutPhase, detail: str | None = None) -> None:
        self.seen.append(phase.value)

    def step(self, steps_taken: int) -> None:
        self.seen.append(f"step {steps_taken}")


def _spec(model_url: str, email_url: str, timeout: float = 30.0, task: Any = TASK) -> RolloutSpec:
    return RolloutSpec(
        rollout_id="ro_test",
        run_id="run_test",
        scenario_id=SCENARIO.scenario_id,
        task=task,
        model_config=ModelConfig(model="scripted", api_key="k", base_url=f"{model_url}/v1", max_steps=10),
        tool_server_urls={"email": email_url},
        seed={"email": SCENARIO.seed_payload(task, "email")},
        verifiers=load_verifier_package(SCENARIO.verifiers_dir),
        timeout_seconds=timeout,
    )


async def _execute(spec: RolloutSpec, cancel: asyncio.Event | None = None, observer: Phases | None = None) -> Any:
    engine = RolloutEngine(ChatClientPool(), ToolServerAdmin())
    try:
        return await engine.execute(spec, observer, cancel)
    finally:
        await engine.clients.aclose()
        await engine.admin.aclose()


def _reference_replies(task: Any = TASK) -> list[dict[str, Any]]:
    calls = [
        tool_call_reply(f"{a.tool_server}__{a.tool_name}", a.parameters, f"call_{i}")
        for i, a in enumerate(task.reference_actions)
    ]
    return [*calls, text_reply(task.reference_answer or "done")]


async def test_reference_run_is_verified_from_state(serve: Any, tool_host: Any) -> None:
    model = serve(create_scripted_app(Script(_reference_replies())))
    observer = Phases()
    outcome = await _execute(_spec(model.url, tool_host.base_url("email")), observer=observer)
    assert outcome.status == RolloutStatus.COMPLETED and outcome.result.success and outcome.result.reward == 1.0
    assert outcome.termination_reason == TerminationReason.FINAL_RESPONSE
    state = outcome.artifacts.metadata[META_STATE]["email"]
    assert state["initial"] != state["final"]
    diffs = outcome.artifacts.metadata[META_STATE_DIFFS]
    assert diffs[-1]["scope"] == "full" and diffs[-1]["tool_server"] == "email"
    assert observer.seen[:3] == ["building_environment", "seeding", "agent_running"]
    assert observer.seen[-1] == "verifying"
    assert outcome.result.verifiers and all(v.success for v in outcome.result.verifiers)


async def test_doing_nothing_fails_the_verifier(serve: Any, tool_host: Any) -> None:
    model = serve(create_scripted_app(Script([text_reply("I did it.")])))
    outcome = await _execute(_spec(model.url, tool_host.base_url("email")))
    assert outcome.status == RolloutStatus.COMPLETED and not outcome.result.success
    assert outcome.result.reward == 0.0


async def test_unreachable_tool_server_is_a_workspace_error(serve: Any) -> None:
    model = serve(create_scripted_app(Script([text_reply("x")])))
    outcome = await _execute(_spec(model.url, f"http://127.0.0.1:{free_port()}/email"))
    assert outcome.status == RolloutStatus.WORKSPACE_ERROR
    assert outcome.termination_reason == TerminationReason.WORKSPACE_ERROR
    assert "Workspace provisioning failed" in (outcome.artifacts.error or "")


async def test_time_running_out_on_the_model_keeps_partial_artifacts(serve: Any, tool_host: Any) -> None:
    first = _reference_replies()[0]
    model = serve(create_scripted_app(Script([first, {"sleep": 5}])))
    outcome = await _execute(_spec(model.url, tool_host.base_url("email"), timeout=1.5))
    # The model still owed its answer: the endpoint's error, not the agent's timeout.
    assert outcome.status == RolloutStatus.FAILED and outcome.termination_reason == TerminationReason.AGENT_ERROR
    assert outcome.error_class == ErrorClass.MODEL_ENDPOINT and META_TIMEOUT not in outcome.artifacts.metadata
    assert "when the rollout's time limit (1.5s) ran out" in (outcome.artifacts.error or "")
    assert outcome.artifacts.steps_taken == 1  # the call made before the time ran out is kept
    assert META_STATE in outcome.artifacts.metadata


async def test_cancel_stops_the_agent(serve: Any, tool_host: Any) -> None:
    model = serve(create_scripted_app(Script([{"sleep": 10}])))
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.5, cancel.set)
    outcome = await _execute(_spec(model.url, tool_host.base_url("email")), cancel=cancel)
    assert outcome.status == RolloutStatus.FAILED and outcome.termination_reason == TerminationReason.CANCELLED
    assert outcome.artifacts.error == MSG_CANCELLED


async def test_tool_server_dying_mid_rollout_is_an_infrastructure_failure(serve: Any) -> None:
    email = BackgroundServer(create_app(EmailServer())).start()
    replies = _reference_replies(TWO_STEP_TASK)
    # The second model turn waits long enough for the tool server to be gone before the next tool call.
    script = Script([replies[0], {"sleep": 1.5, "then": replies[1]}, *replies[2:]])
    model = serve(create_scripted_app(script))

    async def kill_after_first_model_turn() -> None:
        while len(script.requests) < 2:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(email.stop)

    killer = asyncio.ensure_future(kill_after_first_model_turn())
    outcome = await _execute(_spec(model.url, email.url, task=TWO_STEP_TASK))
    await killer
    assert outcome.status == RolloutStatus.FAILED
    assert outcome.termination_reason == TerminationReason.INFRASTRUCTURE_ERROR
    assert "tool server 'email' unreachable" in (outcome.artifacts.error or "")
    assert outcome.artifacts.steps_taken == 1  # the completed call before the crash is kept


async def test_lost_final_state_is_not_scored_as_a_failure(serve: Any) -> None:
    email = BackgroundServer(create_app(EmailServer())).start()
    replies = _reference_replies()
    script = Script([replies[0], {"sleep": 1.5, "then": replies[1]}])
    model = serve(create_scripted_app(script))

    async def kill_after_first_model_turn() -> None:
        while len(script.requests) < 2:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(email.stop)

    killer = asyncio.ensure_future(kill_after_first_model_turn())
    outcome = await _execute(_spec(model.url, email.url))
    await killer
    assert outcome.status == RolloutStatus.FAILED
    assert outcome.termination_reason == TerminationReason.INFRASTRUCTURE_ERROR
    assert "final snapshot" in (outcome.artifacts.error or "")


@pytest.mark.filterwarnings("ignore:call_tool\\(\\) is deprecated:DeprecationWarning")
async def test_custom_agents_are_loaded_and_constructed(serve: Any, tool_host: Any) -> None:
    model = serve(create_scripted_app(Script([text_reply("unused")])))
    base = _spec(model.url, tool_host.base_url("email"))

    sync = await _execute(replace(base, agent_path="tests.support.custom_agents:SyncMailerAgent"))
    assert sync.status == RolloutStatus.COMPLETED and sync.artifacts.final_observation == "sent"
    sent = sync.artifacts.metadata[META_STATE]["email"]["final"]["emails"]
    assert any(e["subject"] == "From ro_test" for e in sent.values())

    everything = await _execute(replace(base, agent_path="tests.support.custom_agents:NeedsEverything"))
    assert everything.artifacts.final_observation == "client,model_config,stop_event,user_tag"

    broken = await _execute(replace(base, agent_path="tests.support.custom_agents:NotAnAgent"))
    assert broken.status == RolloutStatus.FAILED and broken.termination_reason == TerminationReason.AGENT_ERROR
    assert "neither a subclass" in (broken.artifacts.error or "")


async def test_npc_secret_task_gets_its_npcs_from_the_task(serve: Any, tool_host: Any) -> None:
    """The engine seeds the chat server with the task's NPCs and secrets; the transcripts land in the artifacts."""
    from eval_pipelines.schemas.artifacts import META_NPC_TRANSCRIPTS

    scenario = ScenarioCatalog().get("team_chat:1.0.0")
    task = next(t for t in scenario.tasks().values() if t.npc_secrets)
    model = serve(create_scripted_app(Script(_reference_replies(task))))
    spec = RolloutSpec(
        rollout_id="ro_npc",
        run_id="run_npc",
        scenario_id=scenario.scenario_id,
        task=task,
        model_config=ModelConfig(model="scripted", api_key="k", base_url=f"{model.url}/v1", max_steps=10),
        tool_server_urls={name: tool_host.base_url(name) for name in ("chat", "email")},
        seed={ts.name: scenario.seed_payload(task, ts.name) for ts in task.tool_servers},
        verifiers=load_verifier_package(scenario.verifiers_dir),
    )
    outcome = await _execute(spec)
    assert outcome.status == RolloutStatus.COMPLETED and outcome.result.success, outcome.result.message
    transcripts = outcome.artifacts.metadata[META_NPC_TRANSCRIPTS]
    (profile_id,) = task.npc_secrets
    secret = str(task.npc_secrets[profile_id]["value"])
    assert any(m["role"] == "npc" and secret in m["content"] for m in transcripts[profile_id])


async def test_the_readme_custom_agent_example_runs(
    serve: Any, tool_host: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("# my_agents.py")
    source = readme[start : readme.index("```", start)]
    (tmp_path / "my_agents.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = serve(create_scripted_app(Script([text_reply("unused")])))
    outcome = await _execute(
        replace(_spec(model.url, tool_host.base_url("email")), agent_path="my_agents:FirstToolAgent")
    )
    assert outcome.status == RolloutStatus.COMPLETED and outcome.artifacts.final_observation == "done"
    assert outcome.artifacts.steps_taken == 1


async def test_log_prob_and_tool_server_url_knobs(serve: Any, tool_host: Any) -> None:
    from eval_pipelines.schemas.artifacts import META_LOGPROBS
    from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app

    sim = serve(create_sim_app(ReferenceBook.from_catalog(ScenarioCatalog())))
    dead = f"http://127.0.0.1:{free_port()}/email"
    base = _spec(sim.url, dead)
    config = base.model_config.model_copy(
        update={"model": "sim-oracle", "log_prob": True, "tool_server_url": tool_host.base_url("email")}
    )
    outcome = await _execute(replace(base, model_config=config))
    # The override replaced the (dead) task tool server; the oracle's run passed its state verifier.
    assert outcome.status == RolloutStatus.COMPLETED and outcome.result.success
    logprobs = outcome.artifacts.metadata[META_LOGPROBS]
    assert logprobs and any(entry for entry in logprobs)
