"""Tool-server faults: a server that answers 500, returns invalid JSON, never answers, or dies mid-rollout.

Run level: three email_ops tasks go through the embedded backend and `run_and_collect`; the run's model config
sets `tool_server_url`, so every workspace is provisioned on the faulty server (the executor has no other
seam for the tool-server URLs; the local runtime's own servers stay healthy). Only the middle task's
workspace breaks. Engine level: `RolloutEngine` with `RolloutSpec.tool_server_urls` pointing at the faulty
server, for the faults that only the engine's own timeouts or phases can reach.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutOutcome, RolloutSpec
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.artifacts import META_STATE
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import MSG_TIMEOUT, ErrorClass, RolloutStatus, TerminationReason
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.reliability.support_faults import Fault, ModelFactory, ToolFaultRule, ToolServerFactory, closed_port
from tests.reliability.support_runs import (
    ERROR_RETRIES,
    SCENARIO_ID,
    TARGET_TASK,
    TASK_IDS,
    CollectedRun,
    assert_only_target_failed,
    assert_target_errored,
    collect,
    launch_request,
    model_config,
    step_marker,
    target_task,
)


def _run_on_faulty_tool_server(
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
    tool_server_url: str,
    *,
    max_parallel: int = 3,
    timeout_seconds: float = 20.0,
    error_retries: int = 0,
) -> CollectedRun:
    """One attempt per rollout unless `error_retries` says otherwise, so a test sees the fault's own outcome."""
    request = launch_request(
        model_config("sim://local", tool_server_url=tool_server_url),
        max_parallel=max_parallel,
        error_retries=error_retries,
    )
    return collect(backend, request, catalog.get(SCENARIO_ID), data_dir, timeout_seconds=timeout_seconds)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Fault.HTTP_500, "tool server 'email' answered 500 on POST /step"),
        (Fault.INVALID_JSON, "tool server 'email' returned invalid JSON on POST /step"),
    ],
    ids=["http_500", "invalid_json"],
)
def test_step_fault_fails_only_its_rollout_as_infrastructure_error(
    fault: Fault,
    message: str,
    faulty_tool_server: ToolServerFactory,
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
) -> None:
    wrapper, server = faulty_tool_server(ToolFaultRule(fault, step_contains=step_marker(target_task(catalog))))
    run = _run_on_faulty_tool_server(backend, catalog, data_dir, server.url)
    assert len(wrapper.injected) == 1  # the broken answer ends the rollout: no blind retry of a mutating call
    assert_only_target_failed(
        run, status=RolloutStatus.FAILED, reason=TerminationReason.INFRASTRUCTURE_ERROR, message_contains=message
    )
    assert_target_errored(run, ErrorClass.TOOL_SERVER, 1, data_dir / "eval.duckdb")


def test_tool_server_error_is_retried_in_a_fresh_workspace_and_the_retry_counts(
    faulty_tool_server: ToolServerFactory,
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
) -> None:
    """The fault hits the target's first attempt only: the rollout runs again on a fresh workspace and passes;
    the errored attempt stays queryable, and the pass rate counts the rollout once, as passed."""
    rule = ToolFaultRule(Fault.HTTP_500, step_contains=step_marker(target_task(catalog)), times=1)
    wrapper, server = faulty_tool_server(rule)
    run = _run_on_faulty_tool_server(backend, catalog, data_dir, server.url, error_retries=2)
    assert len(wrapper.injected) == 1
    target = run.rollouts[TARGET_TASK]
    assert target.result is not None and target.result.success, target.result
    assert (target.result.error_class, target.result.attempts) == (None, 2)
    assert [e.error_class for e in target.result.attempt_errors] == [ErrorClass.TOOL_SERVER]
    attempts = sorted(
        (a["attempt"], a["is_final"], a["error_class"]) for a in run.rows_by_task("rollout_attempts")[TARGET_TASK]
    )
    assert attempts == [(1, False, "tool_server"), (2, True, None)]
    _, rates = run.scores(data_dir / "eval.duckdb")
    assert (rates["n"], rates["passes"], rates["n_errors"]) == (len(TASK_IDS), len(TASK_IDS), 0)


@pytest.mark.slow
def test_step_that_never_answers_times_the_rollout_out(
    faulty_tool_server: ToolServerFactory,
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
) -> None:
    _, server = faulty_tool_server(ToolFaultRule(Fault.HANG, step_contains=step_marker(target_task(catalog))))
    run = _run_on_faulty_tool_server(backend, catalog, data_dir, server.url, timeout_seconds=6.0)
    assert_only_target_failed(
        run, status=RolloutStatus.FAILED, reason=TerminationReason.TIMEOUT, message_contains=MSG_TIMEOUT
    )
    target = run.rollouts[TARGET_TASK]
    artifacts = backend.get_artifacts(target.rollout_id)
    assert artifacts.metadata.get("timeout") is True and META_STATE in artifacts.metadata


def test_tool_server_dying_mid_rollout_keeps_what_completed(
    faulty_tool_server: ToolServerFactory,
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
) -> None:
    # One rollout at a time, in task order: 001 finishes, the server dies at 002's second tool call (after its
    # first one succeeded), and 003 finds nothing there.
    rule = ToolFaultRule(Fault.DIE, step_contains=step_marker(target_task(catalog), call_index=1))
    wrapper, server = faulty_tool_server(rule)
    run = _run_on_faulty_tool_server(backend, catalog, data_dir, server.url, max_parallel=1)
    assert wrapper.control.died.is_set()
    first, dead, after = (run.rollouts[t] for t in TASK_IDS)
    assert first.status == RolloutStatus.COMPLETED and first.result is not None and first.result.success
    assert (dead.status, dead.termination_reason) == (RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR)
    assert dead.result is not None and "tool server 'email' unreachable" in dead.result.message
    assert dead.result.steps_taken == 1  # the call that succeeded before the crash is kept
    assert (after.status, after.termination_reason) == (
        RolloutStatus.WORKSPACE_ERROR,
        TerminationReason.WORKSPACE_ERROR,
    )
    assert after.result is not None and "Workspace provisioning failed" in after.result.message
    assert (dead.result.error_class, after.result.error_class) == (ErrorClass.TOOL_SERVER, ErrorClass.TOOL_SERVER)

    rows = {task: found[0] for task, found in run.rows_by_task("rollouts").items()}
    assert [rows[t]["status"] for t in TASK_IDS] == ["completed", "failed", "workspace_error"]
    assert [rows[t]["termination_reason"] for t in TASK_IDS] == [
        "final_response",
        "infrastructure_error",
        "workspace_error",
    ]
    assert rows[TASK_IDS[0]]["success"] and rows[TASK_IDS[0]]["steps_taken"] >= 1
    assert all(rows[t]["error"] for t in TASK_IDS[1:])
    tool_calls = run.rows_by_task("tool_calls")
    assert tool_calls.get(TASK_IDS[0]), "the completed rollout's tool calls were lost"
    assert [c["tool_name"] for c in tool_calls[TARGET_TASK]] == ["search_emails"]


def test_failed_workspace_creation_is_a_workspace_error_for_that_rollout_only(
    faulty_tool_server: ToolServerFactory,
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
) -> None:
    # One at a time, so the second workspace created is the target task's.
    _, server = faulty_tool_server(ToolFaultRule(Fault.HTTP_500, route="create", nth_workspace=2))
    run = _run_on_faulty_tool_server(backend, catalog, data_dir, server.url, max_parallel=1)
    assert_only_target_failed(
        run,
        status=RolloutStatus.WORKSPACE_ERROR,
        reason=TerminationReason.WORKSPACE_ERROR,
        message_contains="create workspace failed with HTTP 500",
    )
    assert_target_errored(run, ErrorClass.TOOL_SERVER, 1, data_dir / "eval.duckdb")


# -- engine level ---------------------------------------------------------------------------------------


async def _execute(spec: RolloutSpec, *, tool_timeout_seconds: float = 30.0) -> RolloutOutcome:
    engine = RolloutEngine(ChatClientPool(), ToolServerAdmin(), tool_timeout_seconds=tool_timeout_seconds)
    try:
        return await engine.execute(spec)
    finally:
        await engine.clients.aclose()
        await engine.admin.aclose()


def _spec(catalog: ScenarioCatalog, model_url: str, tool_server_url: str) -> RolloutSpec:
    scenario = catalog.get(SCENARIO_ID)
    task = scenario.task(TARGET_TASK)
    return RolloutSpec(
        rollout_id="ro_fault",
        run_id="run_fault",
        scenario_id=scenario.scenario_id,
        task=task,
        model_config=ModelConfig.model_validate(model_config(f"{model_url}/v1")),
        tool_server_urls={"email": tool_server_url},
        seed={"email": scenario.seed_payload(task, "email")},
        verifiers=load_verifier_package(scenario.verifiers_dir),
        timeout_seconds=20.0,
    )


async def test_tool_call_timeout_is_an_infrastructure_error(
    faulty_tool_server: ToolServerFactory, faulty_model: ModelFactory, catalog: ScenarioCatalog
) -> None:
    _, model = faulty_model(None)
    _, server = faulty_tool_server(ToolFaultRule(Fault.HANG))
    outcome = await _execute(_spec(catalog, model.url, server.url), tool_timeout_seconds=1.0)
    assert (outcome.status, outcome.termination_reason) == (
        RolloutStatus.FAILED,
        TerminationReason.INFRASTRUCTURE_ERROR,
    )
    assert "tool server 'email' timed out after 1.0s on POST /step" in (outcome.artifacts.error or "")
    assert outcome.result.termination_reason == TerminationReason.INFRASTRUCTURE_ERROR.value


async def test_lost_final_snapshot_is_an_infrastructure_error_not_a_verdict(
    faulty_tool_server: ToolServerFactory, faulty_model: ModelFactory, catalog: ScenarioCatalog
) -> None:
    # The workspace's snapshots break only after its first tool call, so seeding succeeds and the agent finishes.
    _, model = faulty_model(None)
    rule = ToolFaultRule(Fault.HTTP_500, route="snapshot", step_contains=step_marker(target_task(catalog)))
    wrapper, server = faulty_tool_server(rule)
    outcome = await _execute(_spec(catalog, model.url, server.url))
    assert wrapper.injected and wrapper.injected[0].startswith("snapshot:")
    assert (outcome.status, outcome.termination_reason) == (
        RolloutStatus.FAILED,
        TerminationReason.INFRASTRUCTURE_ERROR,
    )
    assert "final snapshot of tool server 'email' failed" in (outcome.artifacts.error or "")
    assert outcome.result.verifiers == []  # no verdict from a state that was never read
    assert outcome.artifacts.steps_taken >= 1  # the agent's work is still in the trace


@pytest.mark.parametrize(
    ("route", "fault", "status", "reason", "message"),
    [
        # The seed travels with the create, and the create's answer carries the initial state.
        ("create", Fault.HTTP_500, RolloutStatus.WORKSPACE_ERROR, TerminationReason.WORKSPACE_ERROR, "create"),
        ("create", Fault.INVALID_JSON, RolloutStatus.WORKSPACE_ERROR, TerminationReason.WORKSPACE_ERROR, "non-JSON"),
        ("tools", Fault.INVALID_JSON, RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR, "invalid JSON"),
        ("tools", Fault.HTTP_500, RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR, "answered 500"),
    ],
    ids=["create_500", "create_invalid_json", "tool_listing_invalid_json", "tool_listing_500"],
)
async def test_provisioning_and_listing_faults_are_labelled(
    route: str,
    fault: Fault,
    status: RolloutStatus,
    reason: TerminationReason,
    message: str,
    faulty_tool_server: ToolServerFactory,
    faulty_model: ModelFactory,
    catalog: ScenarioCatalog,
) -> None:
    _, model = faulty_model(None)
    _, server = faulty_tool_server(ToolFaultRule(fault, route=route))
    outcome = await _execute(_spec(catalog, model.url, server.url))
    assert (outcome.status, outcome.termination_reason) == (status, reason)
    assert message in (outcome.artifacts.error or ""), outcome.artifacts.error
    assert outcome.result.message and not outcome.result.success


def test_a_dead_tool_server_is_a_tool_server_error_retried_and_left_out_of_the_pass_rate(
    backend: EvaluationBackend, catalog: ScenarioCatalog, data_dir: Path
) -> None:
    """Nothing answers at the tool servers' address: every rollout is retried, then ends a tool_server error; the
    model gets no pass rate at all (NULL), never 0."""
    run = _run_on_faulty_tool_server(
        backend, catalog, data_dir, f"http://127.0.0.1:{closed_port()}", error_retries=ERROR_RETRIES
    )
    for rollout in run.rollouts.values():
        assert rollout.result is not None
        assert (rollout.result.error_class, rollout.result.attempts) == (ErrorClass.TOOL_SERVER, 1 + ERROR_RETRIES)
    _, rates = run.scores(data_dir / "eval.duckdb")
    assert (rates["n"], rates["pass_rate"], rates["n_errors"]) == (0, None, len(TASK_IDS))
