"""Multi-turn tasks in the engine: a scripted user of three turns on the real email server, with a tool that only
its third turn unlocks. The scenario is written here, not taken from a benchmark."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.engine.rollout import RolloutSpec
from eval_pipelines.schemas.artifacts import META_TURN_STATES, META_USER_ENDING, USER_ENDING_SCRIPTED
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import RolloutStatus, TerminationReason
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.engine.test_engine import _execute
from tests.support.scripted_llm import Script, create_scripted_app, text_reply, tool_call_reply

ALICE, BOB = "alice@example.com", "bob@example.com"
#: The verifier judges each turn's state, as a per-turn benchmark grader does: Alice's email by the end of turn 0,
#: Bob's only from turn 1 on, and three ended turns.
VERIFIER = f'''
def _sent_to(state):
    return {{address for email in state["email"]["emails"].values() for address in email.get("to", [])}}

def verify(run_artifacts):
    turns = run_artifacts.metadata.get("turn_states") or []
    if len(turns) != 3:
        return False, f"{{len(turns)}} ended turns"
    if _sent_to(turns[0]) & {{"{ALICE}", "{BOB}"}} != {{"{ALICE}"}}:
        return False, "turn 0"
    if not {{"{ALICE}", "{BOB}"}} <= _sent_to(turns[1]):
        return False, "turn 1"
    return True, "every turn's state is right"
'''


def _send(to: str) -> dict[str, Any]:
    return {
        "tool_server": "email",
        "tool_name": "send_email",
        "parameters": {"to": to, "subject": "Hi", "body": "Hello"},
    }


LIST_CONTACTS = {"tool_server": "email", "tool_name": "list_contacts", "parameters": {}}
REFERENCE_TURNS = [[_send(ALICE)], [_send(BOB)], [LIST_CONTACTS]]
TASK = Task.model_validate(
    {
        "task_id": "three_turns",
        "name": "three turns",
        "description": f"Please send a short hello email to {ALICE} (multi-turn engine test).",
        "tool_servers": [{"name": "email"}],
        "verifiers": ["turns"],
        "user": {
            "kind": "scripted",
            "turns": [None, f"Now send the same hello to {BOB}.", "Finally, list my contacts."],
            "unlocks": {"2": ["list_contacts"]},
        },
        "reference_turns": REFERENCE_TURNS,
        "reference_actions": [call for turn in REFERENCE_TURNS for call in turn],
        "reference_answer": "Done.",
    }
)
TASK = TASK.model_copy(
    update={"user": TASK.user.model_copy(update={"turns": [TASK.description, *TASK.user.turns[1:]]})}
)


@pytest.fixture
def verifiers(tmp_path: Path) -> Any:
    package = tmp_path / "verifiers"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "turns.py").write_text(VERIFIER)
    return load_verifier_package(package)


def _spec(model_url: str, email_url: str, verifiers: Any, model: str = "scripted", task: Task = TASK) -> RolloutSpec:
    return RolloutSpec(
        rollout_id="ro_multi",
        run_id="run_multi",
        scenario_id="multi_turn_test",
        task=task,
        model_config=ModelConfig(model=model, api_key="k", base_url=f"{model_url}/v1", max_steps=20),
        tool_server_urls={"email": email_url},
        verifiers=verifiers,
        timeout_seconds=30,
    )


def _listed(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


@pytest.mark.parametrize("bare_tool_names", [False, True])
async def test_the_oracle_passes_a_three_turn_task_and_each_turn_s_state_is_kept(
    bare_tool_names: bool, serve: Any, tool_host: Any, verifiers: Any
) -> None:
    task = TASK.model_copy(update={"bare_tool_names": bare_tool_names})
    book = ReferenceBook()
    book.add_task(task)
    model = serve(create_sim_app(book))
    outcome = await _execute(_spec(model.url, tool_host.base_url("email"), verifiers, model="sim-oracle", task=task))
    assert outcome.status == RolloutStatus.COMPLETED and outcome.result.success, outcome.result.message
    metadata = outcome.artifacts.metadata
    assert len(metadata[META_TURN_STATES]) == 3 and set(metadata[META_TURN_STATES][0]) == {"email"}
    assert metadata[META_USER_ENDING] == USER_ENDING_SCRIPTED
    assert [c.tool_name for c in outcome.artifacts.tool_calls] == ["send_email", "send_email", "list_contacts"]
    users = [m["content"] for m in outcome.artifacts.messages if m["role"] == "user"]
    assert users == TASK.user.turns


async def test_a_hidden_tool_is_listed_only_from_its_turn_but_a_call_by_name_still_runs(
    serve: Any, tool_host: Any, verifiers: Any
) -> None:
    script = Script([tool_call_reply("email__list_contacts", {}), text_reply("one"), text_reply("two")])
    model = serve(create_scripted_app(script))
    outcome = await _execute(_spec(model.url, tool_host.base_url("email"), verifiers))
    assert outcome.status == RolloutStatus.COMPLETED
    # requests: turn 0 (the call, then its answer), turn 1, turn 2
    listed = [_listed(request) for request in script.requests]
    assert len(listed) == 4
    assert all("email__list_contacts" not in names for names in listed[:3])
    assert "email__list_contacts" in listed[3] and "email__send_email" in listed[0]
    [result] = outcome.artifacts.tool_results
    assert not result.is_error and "Unknown tool" not in str(result.observation)
    assert len(outcome.artifacts.metadata[META_TURN_STATES]) == 3


async def test_the_per_turn_step_cap_ends_the_rollout_as_max_steps(serve: Any, tool_host: Any, verifiers: Any) -> None:
    model = serve(create_scripted_app(Script([tool_call_reply("email__list_emails", {"folder": "inbox"})])))
    task = TASK.model_copy(update={"max_steps_per_turn": 3})
    outcome = await _execute(_spec(model.url, tool_host.base_url("email"), verifiers, task=task))
    assert outcome.termination_reason == TerminationReason.MAX_STEPS and not outcome.result.success
    assert outcome.artifacts.steps_taken == 3
    assert META_TURN_STATES not in outcome.artifacts.metadata


async def test_the_task_s_system_prompt_and_bare_tool_names_reach_the_model(
    serve: Any, tool_host: Any, verifiers: Any
) -> None:
    script = Script([tool_call_reply("send_email", {"to": ALICE, "subject": "Hi", "body": "Hello"}), text_reply("ok")])
    model = serve(create_scripted_app(script))
    task = TASK.model_copy(update={"system_prompt": "", "bare_tool_names": True})
    outcome = await _execute(_spec(model.url, tool_host.base_url("email"), verifiers, task=task))
    first = script.requests[0]
    assert [m["role"] for m in first["messages"]] == ["user"]
    assert "send_email" in _listed(first) and "email__send_email" not in _listed(first)
    assert outcome.artifacts.tool_calls[0].tool_server == "email"
    assert not outcome.artifacts.tool_results[0].is_error
    policy = replace(
        _spec(model.url, tool_host.base_url("email"), verifiers),
        task=TASK.model_copy(update={"system_prompt": "Follow the airline policy."}),
    )
    await _execute(policy)
    assert script.requests[-1]["messages"][0] == {"role": "system", "content": "Follow the airline policy."}


async def test_the_noisy_model_deviates_within_each_turn_and_still_answers_every_turn(
    serve: Any, tool_host: Any, verifiers: Any
) -> None:
    book = ReferenceBook()
    book.add_task(TASK)
    model = serve(create_sim_app(book, noise=1.0))
    outcome = await _execute(_spec(model.url, tool_host.base_url("email"), verifiers, model="sim-noisy"))
    assert outcome.status == RolloutStatus.COMPLETED and not outcome.result.success
    assert len(outcome.artifacts.metadata[META_TURN_STATES]) == 3
    sent = [c.parameters.get("to") for c in outcome.artifacts.tool_calls if c.tool_name == "send_email"]
    assert sent.count(ALICE) + sent.count(BOB) < 2  # every reference step deviated
