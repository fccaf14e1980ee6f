"""Hand-made rollout records, as the catalog reader hands them to the exporters: a row with its outcome and
verdicts, its messages and its `tool_calls` rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from eval_pipelines.reports.export import RolloutRecord


def assistant(index: int, content: str | None = None, *calls: tuple[str, str, Any]) -> dict[str, Any]:
    """An assistant message; each call is (id, function, arguments: a dict, or text sent as it is)."""
    wire = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for call_id, name, args in calls
    ]
    return message(index, "assistant", content, tool_calls_json=json.dumps(wire) if wire else None)


def tool(index: int, call_id: str | None, content: str) -> dict[str, Any]:
    return message(index, "tool", content, tool_call_id=call_id)


def message(index: int, role: str, content: str | None, **fields: Any) -> dict[str, Any]:
    return {
        "rollout_id": "ro_test",
        "message_index": index,
        "role": role,
        "content": content,
        "tool_call_id": None,
        "tool_calls_json": None,
        "timestamp": f"2026-11-27T08:00:{index:02d}+00:00",
        **fields,
    }


def call_row(index: int, server: str, name: str, parameters: dict[str, Any], observation: str, **fields: Any) -> dict:
    return {
        "rollout_id": "ro_test",
        "call_index": index,
        "tool_server": server,
        "tool_name": name,
        "parameters_json": json.dumps(parameters),
        "observation": observation,
        "is_error": False,
        "raw_arguments": None,
        "arguments_error": None,
        **fields,
    }


def record(
    messages: list[dict[str, Any]],
    calls: list[dict[str, Any]] | None = None,
    *,
    outcome: str | None = "passed",
    **row: Any,
) -> RolloutRecord:
    base: dict[str, Any] = {
        "sweep_id": "sweep-1",
        "run_id": "run_1",
        "rollout_id": "ro_test",
        "rollout_index": 0,
        "scenario_id": "email_ops:1.0.0",
        "task_id": "email_ops_001",
        "task_name": "A task",
        "instruction": "Do the task.",
        "model_name": "gpt-test",
        "model_identifier": "gpt-test-2026",
        "provider": "openai",
        "is_simulated": False,
        "temperature": 0.0,
        "max_steps": 30,
        "status": "completed",
        "termination_reason": "final_response",
        "attempts": 1,
        "steps_taken": len(calls or []),
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "cost_usd": 0.001,
        "duration_seconds": 2.5,
        "created_at": datetime(2026, 11, 27, 8, 0, 0, tzinfo=UTC),
        "started_at": datetime(2026, 11, 27, 8, 0, 1, tzinfo=UTC),
        "completed_at": datetime(2026, 11, 27, 8, 0, 9, tzinfo=UTC),
        "error": None,
        "outcome": outcome,
        "outcome_error_class": None,
        "score": {"passed": 1.0, "failed": 0.0}.get(outcome or ""),
        "partial_credit": 1.0 if outcome == "passed" else 0.0,
        "n_verifiers": 1,
        "passed_verifiers": 1 if outcome == "passed" else 0,
        "verdicts": [
            {
                "verifier": "sent_the_email",
                "verifier_version": "v1",
                "kind": "programmatic",
                "success": outcome == "passed",
                "is_error": False,
                "reward": 1.0 if outcome == "passed" else 0.0,
                "message": "checked the outbox",
            }
        ]
        if outcome in ("passed", "failed")
        else [],
        "final_answer_is_tool_call": False,
    }
    base.update(row)
    return RolloutRecord(base, messages, calls or [])
