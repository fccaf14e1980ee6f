"""Our record of a τ² conversation as upstream's orchestrator would have recorded it: the termination reason its
step and error caps give, and the `SimulationRun` messages parity hands upstream. No upstream environment needed."""

from __future__ import annotations

from typing import Any

from eval_pipelines.benchmarks.tau2 import adapter, parity, verifier_template
from eval_pipelines.schemas.scenarios import SimulatedUserSpec, Task, TaskToolServer

GREETING = adapter.AGENT_GREETING
STOPS = list(adapter.STOP_TOKENS)


def _exchanges(count: int, last: str = "bye ###STOP###") -> list[dict[str, Any]]:
    """The greeting, then `count` user messages each answered by the agent, then the user's last message."""
    said: list[dict[str, Any]] = [{"role": "system", "content": "policy"}, {"role": "assistant", "content": GREETING}]
    for index in range(count):
        said += [{"role": "user", "content": f"question {index}"}, {"role": "assistant", "content": f"answer {index}"}]
    return [*said, {"role": "user", "content": last}]


def _reason(messages: list[dict[str, Any]]) -> str:
    return verifier_template.termination_reason(verifier_template.conversation(messages, GREETING), STOPS)


def test_a_stop_within_upstreams_step_cap_is_a_user_stop_and_past_it_max_steps() -> None:
    # 49 exchanges and the stop are 99 steps; one exchange more puts the stop at step 101, after the cap at 100
    assert _reason(_exchanges(49)) == "user_stop"
    assert _reason(_exchanges(50)) == "max_steps"


def test_every_stop_token_ends_as_a_user_stop_and_anything_else_scores_nothing() -> None:
    for token in STOPS:
        assert _reason(_exchanges(1, f"thanks {token}")) == "user_stop"
    assert _reason(_exchanges(1, "one more thing")) == "agent_error"
    assert _reason(_exchanges(1)[:-1]) == "agent_error"


def _call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _task(bare: bool) -> Task:
    return Task(
        task_id="tau2_airline_7",
        name="t",
        category="airline",
        description="d",
        tool_servers=[TaskToolServer(name="tau2_airline")],
        user=SimulatedUserSpec(system_prompt="u", stop_tokens=STOPS, agent_greeting=GREETING),
        bare_tool_names=bare,
        benchmark="tau2",
    )


def test_the_simulation_run_holds_the_greeting_calls_and_results_as_upstream_records_them() -> None:
    messages = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "cancel my trip"},
        {"role": "assistant", "content": "", "tool_calls": [_call("c1", "tau2_airline__get_user_details", '{"a": 1}')]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: User x not found", "is_error": True},
        {"role": "assistant", "content": "Done, refund 1,628.", "tool_calls": []},
        {"role": "user", "content": "ok ###STOP###"},
    ]
    run = parity.simulation_run("r1", "7", messages, _task(bare=False))
    assert run["task_id"] == "7" and run["termination_reason"] == "user_stop"
    got = run["messages"]
    assert got[0] == {"role": "assistant", "content": GREETING}  # the greeting our record lacked comes first
    assert got[2]["tool_calls"] == [
        {"id": "c1", "name": "get_user_details", "arguments": {"a": 1}, "requestor": "assistant"}
    ]
    assert got[3] == {
        "role": "tool",
        "id": "c1",
        "content": "Error: User x not found",
        "requestor": "assistant",
        "error": True,
    }
    # an empty call list is no tool call for upstream (`tool_calls is not None` would make it one)
    assert "tool_calls" not in got[4]
    assert len(got) == 6


def test_bare_names_are_kept_and_unreadable_arguments_become_empty() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [_call("c1", "tau2_airline__x", "{not json")]},
        {"role": "tool", "tool_call_id": "c1", "content": "refused", "is_error": True},
    ]
    call = parity.simulation_run("r", "7", messages, _task(bare=True))["messages"][2]["tool_calls"][0]
    assert call["name"] == "tau2_airline__x" and call["arguments"] == {}


def test_communicate_removes_commas_from_the_message_only() -> None:
    said = [{"role": "assistant", "content": "Your refund is 1,628 dollars"}, {"role": "user", "content": "1,000"}]
    assert verifier_template.communicate_checks(said, ["1628", "1,628", "1000"]) == {
        "1628": True,
        "1,628": False,
        "1000": False,
    }
