"""Users of multi-turn tasks: the model-played user (against the simulated endpoint and a scripted fake one), its
endings, and a user model that fails, which is the user simulator's error, never the agent's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.engine.rollout import RolloutSpec
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.deadline import ROLE_USER, RolloutDeadline, request_role
from eval_pipelines.schemas.artifacts import META_TURN_STATES, META_USER_ENDING, USER_ENDING_MAX_TURNS
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import ErrorClass, RolloutStatus
from eval_pipelines.schemas.scenarios import SimulatedUserSpec, Task
from eval_pipelines.sim.endpoint import SIM_USER, ReferenceBook, create_sim_app
from eval_pipelines.users import LlmUser, UserSimulatorError
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.engine.test_engine import _execute
from tests.reliability.support_faults import closed_port
from tests.support.scripted_llm import Script, create_scripted_app, text_reply

STOP, TRANSFER = "###STOP###", "###TRANSFER###"
GREETING = "Hi! How can I help you today?"
OPENING = "Hello, I would like to know how many unread emails I have in my inbox, please."
ANSWER = "You have 3 unread emails"
USER_SPEC = SimulatedUserSpec(
    system_prompt="You are a customer of the mail service (users test persona).",
    stop_tokens=[STOP, TRANSFER],
    agent_greeting=GREETING,
    opening=OPENING,
)
TASK = Task.model_validate(
    {
        "task_id": "inbox_question",
        "name": "inbox question",
        "description": "Answer the customer's question about their inbox (users test).",
        "tool_servers": [{"name": "email"}],
        "verifiers": ["ending"],
        "user": USER_SPEC.model_dump(),
        "reference_turns": [[{"tool_server": "email", "tool_name": "list_emails", "parameters": {"folder": "inbox"}}]],
        "reference_answer": ANSWER,
    }
)
VERIFIER = f'''
def verify(run_artifacts):
    said = [m["content"] for m in run_artifacts.messages if m["role"] == "assistant"]
    ended = run_artifacts.metadata.get("user_ending") == "{STOP}"
    return ended and any("{ANSWER}" in (text or "") for text in said), "stop by the user, answer given"
'''


def _config(url: str, model: str) -> ModelConfig:
    return ModelConfig(model=model, api_key="k", base_url=url)


def _user(url: str, model: str = "fake-user", spec: SimulatedUserSpec = USER_SPEC) -> LlmUser:
    config = _config(url, model)
    return LlmUser(spec, ChatClient.from_model_config(config, timeout_seconds=5), config)


async def test_sim_user_says_the_opening_then_a_stop_token(serve: Any) -> None:
    book = ReferenceBook()
    book.add_task(TASK)
    endpoint = serve(create_sim_app(book))
    user = _user(f"{endpoint.url}/v1", SIM_USER)
    assert await user.opening() == OPENING and user.ending is None
    turn = await user.reply(ANSWER)
    assert turn is not None and turn.ending == STOP == user.ending and STOP in turn.text
    assert await user.reply("anything else?") is None


async def test_the_user_model_sees_the_conversation_with_roles_flipped_and_its_stop_token_ends_it(
    serve: Any,
) -> None:
    script = Script([text_reply("I need help with my inbox."), text_reply(f"Thanks, that is all. {TRANSFER}")])
    endpoint = serve(create_scripted_app(script))
    user = _user(f"{endpoint.url}/v1")
    assert await user.opening() == "I need help with my inbox."
    turn = await user.reply("Sure, you have 3 unread emails.")
    assert turn is not None and turn.ending == TRANSFER
    roles = [(m["role"], m["content"]) for m in script.requests[-1]["messages"]]
    assert roles == [
        ("system", USER_SPEC.system_prompt),
        ("user", GREETING),
        ("assistant", "I need help with my inbox."),
        ("user", "Sure, you have 3 unread emails."),
    ]


async def test_a_user_that_never_stops_ends_at_max_turns(serve: Any) -> None:
    endpoint = serve(create_scripted_app(Script([text_reply("And one more thing...")])))
    user = _user(f"{endpoint.url}/v1", spec=USER_SPEC.model_copy(update={"max_turns": 2}))
    await user.opening()
    assert await user.reply("ok") is not None
    assert await user.reply("ok") is None and user.ending == USER_ENDING_MAX_TURNS


async def test_a_user_model_that_answers_no_text_is_a_user_simulator_error(serve: Any) -> None:
    endpoint = serve(create_scripted_app(Script([text_reply("")])))
    with pytest.raises(UserSimulatorError, match="without any text"):
        await _user(f"{endpoint.url}/v1").opening()


def test_a_request_made_for_the_user_is_told_apart_by_the_deadline() -> None:
    deadline = RolloutDeadline(10)
    with deadline.pending("agent-model", "http://agent"):
        agent = deadline.unanswered_request()
    with request_role(ROLE_USER), deadline.pending("user-model", "http://user"):
        user = deadline.unanswered_request()
        assert "playing the user" in (deadline.unanswered() or "")
    assert agent is not None and agent.role != ROLE_USER
    assert user is not None and user.role == ROLE_USER


# --- through the engine ----------------------------------------------------------------------------------------


@pytest.fixture
def verifiers(tmp_path: Path) -> Any:
    package = tmp_path / "verifiers"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ending.py").write_text(VERIFIER)
    return load_verifier_package(package)


def _spec(agent_url: str, email_url: str, verifiers: Any, user_config: ModelConfig | None, timeout: float = 30) -> Any:
    return RolloutSpec(
        rollout_id="ro_users",
        run_id="run_users",
        scenario_id="users_test",
        task=TASK,
        model_config=ModelConfig(model="sim-oracle", api_key="k", base_url=f"{agent_url}/v1", max_steps=10),
        tool_server_urls={"email": email_url},
        verifiers=verifiers,
        timeout_seconds=timeout,
        user_model_config=user_config,
    )


@pytest.fixture
def sim(serve: Any) -> Any:
    book = ReferenceBook()
    book.add_task(TASK)
    return serve(create_sim_app(book))


async def test_the_oracle_and_the_simulated_user_complete_a_conversation(
    sim: Any, tool_host: Any, verifiers: Any
) -> None:
    user_config = _config(f"{sim.url}/v1", SIM_USER)
    outcome = await _execute(_spec(sim.url, tool_host.base_url("email"), verifiers, user_config))
    assert outcome.status == RolloutStatus.COMPLETED and outcome.result.success, outcome.result.message
    metadata = outcome.artifacts.metadata
    assert metadata[META_USER_ENDING] == STOP and len(metadata[META_TURN_STATES]) == 1
    said = [(m["role"], m["content"]) for m in outcome.artifacts.messages if m["role"] != "tool"]
    assert said[1:3] == [("assistant", GREETING), ("user", OPENING)]
    assert said[-1] == ("user", STOP)


@pytest.mark.parametrize("fault", ["down", "no text", "no user model"])
async def test_a_failing_user_model_is_a_user_simulator_error(
    fault: str, sim: Any, serve: Any, tool_host: Any, verifiers: Any
) -> None:
    if fault == "down":
        user_config: ModelConfig | None = _config(f"http://127.0.0.1:{closed_port()}/v1", "user-model")
    elif fault == "no text":
        user_config = _config(f"{serve(create_scripted_app(Script([text_reply('')]))).url}/v1", "user-model")
    else:
        user_config = None
    outcome = await _execute(_spec(sim.url, tool_host.base_url("email"), verifiers, user_config))
    assert outcome.status == RolloutStatus.FAILED and outcome.error_class == ErrorClass.USER_SIMULATOR
    assert outcome.error_class.is_retryable and not outcome.result.success


async def test_time_running_out_on_the_user_model_is_the_user_simulator_s_error(
    sim: Any, serve: Any, tool_host: Any, verifiers: Any
) -> None:
    hanging = serve(create_scripted_app(Script([text_reply("I have a question."), {"sleep": 5}])))
    spec = _spec(sim.url, tool_host.base_url("email"), verifiers, _config(f"{hanging.url}/v1", "user-model"), 1.5)
    outcome = await _execute(spec)
    assert outcome.error_class == ErrorClass.USER_SIMULATOR, outcome.artifacts.error
    assert "playing the user" in (outcome.artifacts.error or "")
