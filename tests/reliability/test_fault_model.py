"""Model-endpoint faults: 500 after the retries, garbage, a truncated body or stream, and no answer at all.

Three email_ops tasks run through the embedded backend and `run_and_collect` against the simulated models
behind a fault-injecting proxy. Only the middle task's requests (matched by its instruction) break, from its
`from_turn`-th model call on, so the calls before the fault show what a rollout keeps of its own work.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.schemas.artifacts import META_TIMEOUT
from eval_pipelines.schemas.runs import ErrorClass, RolloutStatus, TerminationReason
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.toolservers.host import ToolServerHost
from tests.reliability.support_faults import Fault, ModelFactory, ModelFaultRule, closed_port
from tests.reliability.support_runs import (
    ERROR_ATTEMPTS,
    SCENARIO_ID,
    TARGET_TASK,
    TASK_IDS,
    assert_only_target_failed,
    assert_target_errored,
    collect,
    engine_spec,
    execute,
    launch_request,
    model_config,
    target_task,
)

#: What the chat client does by default: this many attempts for a 5xx or a broken connection.
LLM_ATTEMPTS = RetryPolicy.for_llm().max_attempts
#: The rollout timeout of the hanging-model test: far above a healthy rollout (well under a second), so only
#: the hanging one reaches it, even on a busy machine.
HANG_BUDGET = 6.0
NOT_JSON = "with a body that is not JSON (garbage or truncated)"
INCOMPLETE = "got a malformed or incomplete response (RemoteProtocolError"


@pytest.mark.parametrize(
    ("fault", "from_turn", "message", "attempts"),
    [
        (Fault.HTTP_500, 1, "failed on the server (HTTP 500): injected internal error", LLM_ATTEMPTS),
        (Fault.GARBAGE, 2, NOT_JSON, 1),
        (Fault.TRUNCATED_JSON, 2, NOT_JSON, 1),
        (Fault.CUT_BODY, 1, INCOMPLETE, LLM_ATTEMPTS),
        (Fault.CUT_STREAM, 2, INCOMPLETE, LLM_ATTEMPTS),
    ],
    ids=["http_500_after_retries", "garbage", "truncated_json", "cut_body", "cut_stream"],
)
def test_model_fault_is_a_model_endpoint_error_retried_and_left_out_of_the_pass_rate(
    fault: Fault,
    from_turn: int,
    message: str,
    attempts: int,
    faulty_model: ModelFactory,
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
) -> None:
    instruction = target_task(catalog).description
    wrapper, server = faulty_model(ModelFaultRule(fault, instruction_contains=instruction, from_turn=from_turn))
    # One attempt, so the steps before the fault are this attempt's (test_model_endpoint_errors_are_retried
    # covers the retries).
    request = launch_request(model_config(f"{server.url}/v1"), error_retries=0)
    run = collect(backend, request, catalog.get(SCENARIO_ID), data_dir)

    assert_only_target_failed(
        run, status=RolloutStatus.FAILED, reason=TerminationReason.AGENT_ERROR, message_contains=message
    )
    assert wrapper.faulted[instruction] == attempts
    assert_target_errored(run, ErrorClass.MODEL_ENDPOINT, 1, data_dir / "eval.duckdb")
    target = run.rollouts[TARGET_TASK]
    assert target.result is not None and target.result.message.startswith("Agent execution failed: ")
    # The tool calls made before the fault are kept, in the trace and in the warehouse.
    assert target.result.steps_taken == from_turn - 1
    assert len(run.rows_by_task("tool_calls").get(TARGET_TASK, [])) == from_turn - 1
    assert [m["role"] for m in run.rows_by_task("messages")[TARGET_TASK]][:2] == ["system", "user"]


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (Fault.HTTP_500, "failed on the server (HTTP 500)"),
        (Fault.UNAUTHORIZED, "was refused (HTTP 401)"),
        (Fault.RATE_LIMITED, "is rate limited (HTTP 429)"),
    ],
    ids=["http_500", "http_401", "http_429_exhausted"],
)
def test_model_endpoint_errors_are_retried_then_kept_out_of_the_pass_rate(
    status: Fault,
    message: str,
    faulty_model: ModelFactory,
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
) -> None:
    """Every attempt of the target fails at the endpoint: the rollout is retried `ERROR_RETRIES` times, every
    attempt is recorded, and the final error is an error, not a 0 in the model's pass rate."""
    instruction = target_task(catalog).description
    wrapper, server = faulty_model(ModelFaultRule(status, instruction_contains=instruction))
    run = collect(backend, launch_request(model_config(f"{server.url}/v1")), catalog.get(SCENARIO_ID), data_dir)
    assert_only_target_failed(
        run, status=RolloutStatus.FAILED, reason=TerminationReason.AGENT_ERROR, message_contains=message
    )
    client_attempts = 1 if status is Fault.UNAUTHORIZED else LLM_ATTEMPTS  # a refused key is not retried
    assert wrapper.faulted[instruction] == client_attempts * ERROR_ATTEMPTS
    assert_target_errored(run, ErrorClass.MODEL_ENDPOINT, ERROR_ATTEMPTS, data_dir / "eval.duckdb")


def test_closed_port_is_a_model_endpoint_error(
    backend: EvaluationBackend, catalog: ScenarioCatalog, data_dir: Path
) -> None:
    """Nothing listens: every rollout errors after its retries; none is a failure, so the pass rate is NULL."""
    request = launch_request(model_config(f"http://127.0.0.1:{closed_port()}/v1"))
    run = collect(backend, request, catalog.get(SCENARIO_ID), data_dir)
    assert {r.result.error_class if r.result else None for r in run.rollouts.values()} == {ErrorClass.MODEL_ENDPOINT}
    assert {r.result.attempts if r.result else 0 for r in run.rollouts.values()} == {ERROR_ATTEMPTS}
    assert all("could not reach" in (r.result.message if r.result else "") for r in run.rollouts.values())
    _, rates = run.scores(data_dir / "eval.duckdb")
    assert (rates["n"], rates["passes"], rates["pass_rate"], rates["n_errors"]) == (0, 0, None, len(TASK_IDS))
    assert rates["error_share"] == 1.0


@pytest.mark.parametrize("fault", [Fault.HTTP_500, Fault.CUT_BODY], ids=["http_500", "cut_body"])
def test_transient_model_faults_are_retried_and_cost_nothing(
    fault: Fault,
    faulty_model: ModelFactory,
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
) -> None:
    instruction = target_task(catalog).description
    wrapper, server = faulty_model(ModelFaultRule(fault, instruction_contains=instruction, from_turn=2, times=2))
    run = collect(backend, launch_request(model_config(f"{server.url}/v1")), catalog.get(SCENARIO_ID), data_dir)
    assert wrapper.faulted[instruction] == 2
    assert {t: (r.status.value, r.result.success if r.result else None) for t, r in run.rollouts.items()} == {
        t: ("completed", True) for t in run.rollouts
    }
    assert run.summary.by_status == {"completed": 3}


@pytest.mark.slow
def test_model_that_never_answers_is_a_model_endpoint_error_and_retried(
    faulty_model: ModelFactory,
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
) -> None:
    """The rollout's time runs out while the endpoint holds the request: the endpoint's error, not the agent's
    timeout, so it is retried (tests/reliability/test_fault_slow_endpoint.py has the other ways an endpoint
    outlasts a rollout, tests/engine/test_engine.py the partial artifacts it keeps)."""
    instruction = target_task(catalog).description
    _, server = faulty_model(ModelFaultRule(Fault.HANG, instruction_contains=instruction, from_turn=2))
    run = collect(
        backend,
        # One retry: enough to show it is retried, as each attempt waits out the whole budget.
        launch_request(model_config(f"{server.url}/v1"), error_retries=1),
        catalog.get(SCENARIO_ID),
        data_dir,
        timeout_seconds=HANG_BUDGET,
    )
    assert_only_target_failed(
        run,
        status=RolloutStatus.FAILED,
        reason=TerminationReason.AGENT_ERROR,
        message_contains=f"was still unanswered when the rollout's time limit ({HANG_BUDGET:g}s) ran out",
    )
    assert_target_errored(run, ErrorClass.MODEL_ENDPOINT, 2, data_dir / "eval.duckdb")
    target = run.rollouts[TARGET_TASK]
    assert target.result is not None and "was still unanswered" in target.result.attempt_errors[0].message
    assert META_TIMEOUT not in backend.get_artifacts(target.rollout_id).metadata


@pytest.mark.slow
async def test_model_call_timeout_is_an_agent_error_naming_the_limit(
    faulty_model: ModelFactory, tool_host: ToolServerHost, catalog: ScenarioCatalog
) -> None:
    """A per-call timeout shorter than the rollout's: every attempt times out, then the rollout fails."""
    _, server = faulty_model(ModelFaultRule(Fault.HANG))
    spec = engine_spec(catalog, tool_host, model_config(f"{server.url}/v1"), timeout_seconds=30.0)
    outcome = await execute(RolloutEngine(ChatClientPool(timeout_seconds=0.3), ToolServerAdmin()), spec)
    assert (outcome.status, outcome.termination_reason) == (RolloutStatus.FAILED, TerminationReason.AGENT_ERROR)
    assert "got no response within 0.3s" in (outcome.artifacts.error or "")
    assert outcome.result.message == outcome.artifacts.error
