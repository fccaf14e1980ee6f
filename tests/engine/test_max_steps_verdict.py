"""A rollout that runs out of steps without a final answer fails, whatever the final state, unless its task says
it may pass at max_steps."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from eval_pipelines.schemas.runs import MSG_MAX_STEPS, RolloutStatus, TerminationReason
from tests.engine.test_engine import TASK, _execute, _reference_replies, _spec
from tests.support.scripted_llm import Script, create_scripted_app, tool_call_reply

MAX_STEPS = 4


def _spec_without_final_answer(model_url: str, email_url: str, task: Any = TASK) -> Any:
    spec = _spec(model_url, email_url, task=task)
    return replace(spec, model_config=spec.model_config.model_copy(update={"max_steps": MAX_STEPS}))


def _send_then_read() -> list[dict[str, Any]]:
    """The task's reference send (the state a verifier wants), then reads until the steps run out."""
    return [*_reference_replies()[:-1], tool_call_reply("email__list_emails", {})]


@pytest.mark.parametrize(
    "replies",
    [
        pytest.param(_reference_replies()[:1], id="the same send repeated"),
        pytest.param(_send_then_read(), id="the right state, then reads"),
    ],
)
async def test_a_rollout_ending_at_max_steps_fails(replies: list[dict[str, Any]], serve: Any, tool_host: Any) -> None:
    model = serve(create_scripted_app(Script(replies)))
    outcome = await _execute(_spec_without_final_answer(model.url, tool_host.base_url("email")))
    assert outcome.status == RolloutStatus.FAILED and outcome.termination_reason == TerminationReason.MAX_STEPS
    assert outcome.error_class is None  # the agent's failure, counted in the pass rate
    assert not outcome.result.success and outcome.result.reward == 0.0
    assert outcome.result.message.startswith(MSG_MAX_STEPS) and "pass_at_max_steps" in outcome.result.message
    assert outcome.artifacts.steps_taken == MAX_STEPS
    # The verdicts are still there for whoever asks why.
    assert [v.module for v in outcome.result.verifiers] == TASK.verifiers


async def test_a_task_may_pass_at_max_steps(serve: Any, tool_host: Any) -> None:
    model = serve(create_scripted_app(Script(_send_then_read())))
    task = TASK.model_copy(update={"pass_at_max_steps": True})
    outcome = await _execute(_spec_without_final_answer(model.url, tool_host.base_url("email"), task=task))
    assert outcome.termination_reason == TerminationReason.MAX_STEPS
    assert outcome.status == RolloutStatus.COMPLETED and outcome.result.success, outcome.result.message
