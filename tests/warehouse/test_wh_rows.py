from __future__ import annotations

import json
from datetime import UTC, datetime
from types import ModuleType

import pytest

from eval_pipelines.agents.text_tool_calls import flag_text_tool_call
from eval_pipelines.schemas.tools import ToolCall, ToolCallResult
from eval_pipelines.warehouse.rows import ROLLOUT_TABLE_NAMES, rollout_tables, tasks_table, verification_table
from eval_pipelines.warehouse.tables import TABLES


def test_rollout_tables_have_registered_schemas_and_values(f: ModuleType) -> None:
    ctx = f.make_ctx(base_url="https://user:pw@fallback.example/v1")
    items = [
        (
            f.make_rollout("r1", base_url="https://bob:hunter2@proxy.example:8443/v1?x=1"),
            f.make_artifacts(),
            "a/r1.json",
        ),
        (f.make_rollout("r2", index=1, status="failed", success=False), f.make_artifacts(), "a/r2.json"),
    ]
    tables = rollout_tables(ctx, items)
    assert tuple(tables) == ROLLOUT_TABLE_NAMES
    for name, table in tables.items():
        assert table.spec.columns == TABLES[name], name

    rollouts = tables["rollouts"].to_pylist()
    r1, r2 = rollouts
    assert r1["model_identifier"] == "gpt-x-2026"
    assert r1["provider"] == "custom"
    assert r1["base_url"] == "https://proxy.example:8443/v1"  # user-info and query (a ?key= may hide there) removed
    assert (r1["prompt_tokens"], r1["completion_tokens"], r1["total_tokens"]) == (1200, 300, 1500)
    assert r1["cost_usd"] == pytest.approx(0.0125)
    assert r1["temperature"] == pytest.approx(0.2)
    assert r1["success"] is True and r1["status"] == "completed"
    assert r1["run_name"] == ctx.run_name and r1["sweep_id"] == f.SWEEP
    assert r1["artifacts_path"] == "a/r1.json"
    assert r1["created_at"] == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    # "+01:00" and "Z" inputs normalise to UTC.
    assert r1["started_at"] == datetime(2026, 1, 1, 12, 0, 1, tzinfo=UTC)
    assert r1["completed_at"] == datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
    assert r1["error"] is None
    assert r2["status"] == "failed" and r2["success"] is False and r2["rollout_index"] == 1
    assert r2["error"] == "Agent execution failed: boom"

    messages = tables["messages"].to_pylist()
    assert [m["message_index"] for m in messages] == [0, 1, 2, 3, 4] * 2
    assert messages[0]["content"] == "You are an email assistant."
    assert messages[2]["content"] is None
    tool_calls = json.loads(messages[2]["tool_calls_json"])
    assert tool_calls[0]["function"]["arguments"] == {"to": "bob@example.com"}
    assert messages[3]["tool_call_id"] == "call_1"
    parts = json.loads(messages[4]["content"])
    assert parts == [{"type": "text", "text": f"I replied to Bob. {f.VISIBLE}"}]
    assert messages[0]["timestamp"]

    calls = tables["tool_calls"].to_pylist()
    assert [c["call_index"] for c in calls[:2]] == [0, 1]
    assert calls[1]["tool_name"] == "send_email"
    assert json.loads(calls[1]["parameters_json"]) == {"to": "bob@example.com", "body": f.VISIBLE, "auth": {}}
    assert json.loads(calls[1]["observation"]) == {"id": "m-42", "status": f.VISIBLE}
    assert calls[0]["observation"] == "1 email from bob@example.com"

    diffs = tables["state_diffs"].to_pylist()
    assert [(d["diff_index"], d["scope"], d["step_index"], d["tool_name"]) for d in diffs[:2]] == [
        (0, "tool_call", 1, "send_email"),
        (1, "full", None, None),
    ]
    assert json.loads(diffs[0]["after_json"]) == {"sent": {"m-42": {"to": "bob@example.com", "note": f.VISIBLE}}}


def test_rollout_without_result_or_artifacts(f: ModuleType) -> None:
    ctx = f.make_ctx("sim-oracle", simulated=True, base_url="sim://local")
    no_result = f.make_rollout("r1", status="workspace_error", with_result=False, base_url=None)
    tables = rollout_tables(ctx, [(no_result, f.make_artifacts(uneven=True), None), (f.make_rollout("r2"), None, None)])
    r1, r2 = tables["rollouts"].to_pylist()
    assert r1["success"] is None and r1["reward"] is None
    # Usage falls back to the artifacts' metadata when the service never produced a result.
    assert (r1["prompt_tokens"], r1["total_tokens"], r1["steps_taken"]) == (7, 10, 2)
    assert r1["base_url"] == "sim://local" and r1["is_simulated"] is True
    assert r2["artifacts_path"] is None
    calls = tables["tool_calls"].to_pylist()
    assert len(calls) == 3
    assert calls[2]["tool_name"] == "archive" and calls[2]["observation"] is None
    # r2 had no artifacts: it contributes a rollout row only.
    assert {m["rollout_id"] for m in tables["messages"].to_pylist()} == {"r1"}


def test_empty_input_gives_empty_typed_tables(f: ModuleType) -> None:
    tables = rollout_tables(f.make_ctx(), [])
    for name, table in tables.items():
        assert table.num_rows == 0 and table.spec.columns == TABLES[name]
    assert verification_table([]).spec.columns == TABLES["verifications"]


def test_verification_table(f: ModuleType) -> None:
    table = verification_table(
        [f.make_verification("r1", "reply_sent", "h1", True, output={"checked": 3, "api_key": f.CANARY})]
    )
    assert table.spec.columns == TABLES["verifications"]
    (row,) = table.to_pylist()
    assert (row["verifier"], row["verifier_version"], row["kind"], row["success"]) == (
        "reply_sent",
        "h1",
        "programmatic",
        True,
    )
    assert json.loads(row["output_json"]) == {"checked": 3}
    assert row["verified_at"] == f.T0


def test_verification_table_rejects_naive_timestamps(f: ModuleType) -> None:
    record = f.make_verification("r1", "reply_sent", "h1", True)
    naive = type(record)(**{**record.__dict__, "verified_at": datetime(2026, 1, 1)})
    with pytest.raises(ValueError, match="timezone-aware"):
        verification_table([naive])


def test_tasks_table(f: ModuleType) -> None:
    table = tasks_table(f.SCENARIO_ID, [f.make_task("t1"), f.make_task("t2")])
    assert table.spec.columns == TABLES["tasks"]
    rows = table.to_pylist()
    assert rows[0]["num_reference_actions"] == 2
    assert rows[1]["verifiers"] == ["reply_sent", "tone_ok"]
    assert rows[0]["scenario_id"] == f.SCENARIO_ID


def test_malformed_model_output_is_kept_and_flagged(f: ModuleType) -> None:
    """A call whose arguments were not JSON keeps its raw text and the reason; a final answer that is a tool call
    written as text is flagged on the rollout; a rollout without a trace has no flag (NULL), not False."""
    artifacts = f.make_artifacts()
    artifacts.record_tool_call(
        ToolCall(
            tool_server="email", tool_name="send_email", raw_arguments='{"to": ', arguments_error="not valid JSON"
        ),
        ToolCallResult(observation="Invalid arguments for email__send_email", is_error=True),
    )
    artifacts.set_final_observation('<tool_call>{"name": "email__archive", "arguments": {}}</tool_call>')
    flag_text_tool_call(artifacts)
    tables = rollout_tables(
        f.make_ctx(), [(f.make_rollout("r1"), artifacts, "a/r1.json"), (f.make_rollout("r2"), None, None)]
    )
    calls = tables["tool_calls"].to_pylist()
    assert (calls[-1]["raw_arguments"], calls[-1]["arguments_error"]) == ('{"to": ', "not valid JSON")
    assert all(c["raw_arguments"] is None for c in calls[:-1])
    assert tables["rollouts"].column("final_answer_is_tool_call") == [True, None]
