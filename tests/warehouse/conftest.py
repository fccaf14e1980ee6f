"""Realistic domain objects for the warehouse tests, built from the real schemas (no mocks)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

from eval_pipelines.schemas.artifacts import META_CLIENT_CONTEXT, META_STATE_DIFFS, META_USAGE, RunArtifacts
from eval_pipelines.schemas.runs import Rollout
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.schemas.tools import DiffScope, StateDiff, ToolCall, ToolCallResult
from eval_pipelines.schemas.verifiers import VerifierKind, VerifierOutcome
from eval_pipelines.warehouse.rows import RolloutContext, VerificationRecord

#: Must never appear in any Parquet file.
CANARY = "sk-CANARY-7f3e9a1b2c"
#: Sits next to the canary in the same structures: proves the check can see what was written.
VISIBLE = "visible-marker-5d2c"

SWEEP = "sweep-nightly"
SCENARIO_ID = "email:v1"
SCENARIO_KEY = "email_v1"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def make_ctx(model_name: str = "gpt-x", *, simulated: bool = False, base_url: str | None = None) -> RolloutContext:
    return RolloutContext(
        sweep_id=SWEEP,
        run_name=f"sweep-{SCENARIO_KEY}-{model_name}-2026-01-01",
        model_key=model_name,
        scenario_key=SCENARIO_KEY,
        model_name=model_name,
        is_simulated=simulated,
        base_url=base_url,
    )


def make_rollout(
    rollout_id: str,
    task_id: str = "t1",
    *,
    index: int = 0,
    status: str = "completed",
    success: bool = True,
    with_result: bool = True,
    model: str = "gpt-x-2026",
    base_url: str | None = "https://proxy.example/v1",
) -> Rollout:
    payload: dict[str, Any] = {
        "rollout_id": rollout_id,
        "scenario_id": SCENARIO_ID,
        "task_id": task_id,
        "run_id": "run-1",
        "rollout_index": index,
        "status": status,
        "max_steps": 12,
        "created_at": "2026-01-01T12:00:00+00:00",
        "started_at": "2026-01-01T13:00:01+01:00",
        "completed_at": "2026-01-01T12:00:30Z",
        "termination_reason": "final_response" if status == "completed" else "agent_error",
        # The hosted product echoes extra fields; a leaked key must be ignored, never stored.
        "model_config": {
            "model": model,
            "provider": "custom",
            "base_url": base_url,
            "temperature": 0.2,
            "max_steps": 12,
            "api_key": CANARY,
        },
        "status_events": [{"status": "completed", "timestamp": "2026-01-01T12:00:30+00:00"}],
    }
    if with_result:
        payload["result"] = {
            "success": success,
            "message": "done" if success else "Agent execution failed: boom",
            "reward": 1.0 if success else 0.0,
            "partial_credit": 1.0 if success else 0.5,
            "steps_taken": 2,
            "duration_seconds": 29.5,
            "estimated_cost_usd": 0.0125,
            "prompt_tokens": 1200,
            "completion_tokens": 300,
            "total_tokens": 1500,
            "termination_reason": "final_response",
        }
    return Rollout.model_validate(payload)


def make_artifacts(task_id: str = "t1", *, uneven: bool = False) -> RunArtifacts:
    artifacts = RunArtifacts(task_id=task_id, task="Reply to Bob", model="gpt-x-2026", provider="custom")
    artifacts.record_message("system", "You are an email assistant.")
    artifacts.record_message("user", "Reply to Bob's last email.")
    artifacts.record_message(
        "assistant",
        None,
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "send_email", "arguments": {"to": "bob@example.com", "api_key": CANARY}},
            }
        ],
    )
    artifacts.record_message("tool", "Sent message m-42", tool_call_id="call_1", api_key=CANARY)
    artifacts.record_message(
        "assistant",
        [{"type": "text", "text": f"I replied to Bob. {VISIBLE}", "api_key": CANARY}],
    )
    artifacts.record_tool_call(
        ToolCall(tool_server="email", tool_name="list_emails", parameters={"folder": "inbox"}),
        ToolCallResult(observation="1 email from bob@example.com"),
    )
    artifacts.record_tool_call(
        ToolCall(
            tool_server="email",
            tool_name="send_email",
            parameters={"to": "bob@example.com", "body": VISIBLE, "auth": {"api_key": CANARY}},
        ),
        ToolCallResult(observation={"id": "m-42", "api_key": CANARY, "status": VISIBLE}, is_error=False),
    )
    if uneven:
        # The agent crashed after issuing a call and before its result was recorded.
        artifacts.tool_calls.append(ToolCall(tool_server="email", tool_name="archive", parameters={}))
    diffs = [
        StateDiff(
            tool_server="email",
            scope=DiffScope.TOOL_CALL,
            summary="[STATE DIFF] sent m-42",
            after={"sent": {"m-42": {"to": "bob@example.com", "api_key": CANARY, "note": VISIBLE}}},
            step_index=1,
            tool_name="send_email",
        ),
        StateDiff(
            tool_server="email",
            scope=DiffScope.FULL,
            summary="1 email sent",
            before={"sent": {}},
            after={"sent": {"m-42": {"to": "bob@example.com"}}},
        ),
    ]
    artifacts.metadata[META_STATE_DIFFS] = [d.model_dump(mode="json") for d in diffs]
    artifacts.metadata[META_CLIENT_CONTEXT] = {"user": "alice", "credentials": {"api_key": CANARY}}
    artifacts.metadata[META_USAGE] = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10, "cost_usd": 0.1}
    return artifacts


def make_outcome(module: str, version: str, success: bool, *, output: Any = "") -> VerifierOutcome:
    return VerifierOutcome(
        module=module,
        verifier_version=version,
        kind=VerifierKind.PROGRAMMATIC,
        success=success,
        reward=1.0 if success else 0.0,
        message="ok" if success else "mismatch",
        output=output,
    )


def make_verification(
    rollout_id: str,
    module: str,
    version: str,
    success: bool,
    *,
    minutes: int = 0,
    task_id: str = "t1",
    model_name: str = "gpt-x",
    output: Any = "",
) -> VerificationRecord:
    return VerificationRecord(
        sweep_id=SWEEP,
        run_id="run-1",
        rollout_id=rollout_id,
        scenario_id=SCENARIO_ID,
        task_id=task_id,
        model_name=model_name,
        outcome=make_outcome(module, version, success, output=output),
        verified_at=T0 + timedelta(minutes=minutes),
    )


def make_task(task_id: str) -> Task:
    return Task.model_validate(
        {
            "task_id": task_id,
            "name": f"Task {task_id}",
            "description": "Reply to Bob's last email.",
            "verifiers": ["reply_sent", "tone_ok"],
            "reference_actions": [
                {"tool_server": "email", "tool_name": "list_emails", "parameters": {}},
                {"tool_server": "email", "tool_name": "send_email", "parameters": {"to": "bob@example.com"}},
            ],
            "npc_secrets": {"bob": {"api_key": CANARY}},
        }
    )


@pytest.fixture
def f() -> ModuleType:
    """This module, so tests reach the builders and constants without importing a conftest by name."""
    return sys.modules[__name__]
