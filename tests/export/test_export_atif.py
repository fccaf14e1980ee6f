"""`eval-pipelines export --format atif`: the mapping of a transcript to ATIF steps (tool calls paired with their
results, several user turns, arguments that are not JSON, errors that are not a reward of 0, secrets), and the
exported sweep validated file by file with the `atif` package's models, in a venv of their own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.cli import main
from eval_pipelines.reports.export import ATIF_SCHEMA_VERSION, atif_file_name, atif_trajectory
from eval_pipelines.reports.export.output import dump
from tests.compat.conftest import client_venv
from tests.export.conftest import SweepCatalog
from tests.export.records import assistant, call_row, message, record, tool


def _trajectory(rec: Any, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return atif_trajectory(rec, tools)


def _ours(trajectory: dict[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = trajectory["extra"]["eval_pipelines"]
    return extra


def parallel_calls() -> Any:
    """Two calls in one turn, answered in the other order."""
    return record(
        [
            message(0, "system", "Be useful."),
            message(1, "user", "Find the email and reply."),
            assistant(2, "Looking.", ("c1", "email__search_emails", {"query": "Aisha"}), ("c2", "chat__list", {})),
            tool(3, "c2", "no channels"),
            tool(4, "c1", "found e1"),
            assistant(5, "Done."),
        ],
        [
            call_row(0, "email", "search_emails", {"query": "Aisha"}, "found e1"),
            call_row(1, "chat", "list", {}, "no channels", is_error=True),
        ],
    )


def multi_turn() -> Any:
    return record(
        [
            message(0, "user", "Send Aisha the agenda."),
            assistant(1, None, ("a", "email__send_email", {"to": "aisha@example.com"})),
            tool(2, "a", "sent m1"),
            assistant(3, "Sent."),
            message(4, "user", "Now tell the channel."),
            assistant(5, None, ("b", "chat__post", {"text": "agenda sent"})),
            tool(6, "b", "posted"),
            assistant(7, "Posted."),
        ],
        [
            call_row(0, "email", "send_email", {"to": "aisha@example.com"}, "sent m1"),
            call_row(1, "chat", "post", {"text": "agenda sent"}, "posted"),
        ],
    )


def bad_arguments() -> Any:
    return record(
        [
            message(0, "user", "Send it."),
            assistant(1, None, ("bad", "email__send_email", "{not json")),
            tool(2, "bad", "Invalid arguments for email__send_email: not valid JSON; the tool was not called"),
            assistant(3, "I could not."),
        ],
        [
            call_row(
                0,
                "email",
                "send_email",
                {},
                "Invalid arguments",
                is_error=True,
                raw_arguments="{not json",
                arguments_error="not valid JSON",
            )
        ],
        outcome="failed",
    )


def errored() -> Any:
    return record(
        [message(0, "system", "Be useful."), message(1, "user", "Send it.")],
        outcome="error",
        status="failed",
        termination_reason="agent_error",
        outcome_error_class="model_endpoint",
        error="Agent execution failed: the endpoint refused the connection",
    )


def orphan_result() -> Any:
    return record(
        [
            message(0, "user", "Go."),
            tool(1, "early", "a result before any call"),
            assistant(2, None, ("x", "email__get_email", {"email_id": "e1"})),
            tool(3, "x", "the email"),
            tool(4, "zzz", "answers no call"),
            assistant(5, "Done."),
        ],
        [call_row(0, "email", "get_email", {"email_id": "e1"}, "the email")],
    )


CASES = {
    "parallel_calls": parallel_calls,
    "multi_turn": multi_turn,
    "bad_arguments": bad_arguments,
    "errored": errored,
    "orphan_result": orphan_result,
}


def test_tool_calls_are_paired_with_their_results_by_call_id() -> None:
    steps = _trajectory(parallel_calls())["steps"]
    assert [s["source"] for s in steps] == ["system", "user", "agent", "agent"]
    assert [s["step_id"] for s in steps] == [1, 2, 3, 4]
    calling = steps[2]
    assert calling["message"] == "Looking."
    assert [(c["tool_call_id"], c["function_name"], c["arguments"]) for c in calling["tool_calls"]] == [
        ("c1", "email__search_emails", {"query": "Aisha"}),
        ("c2", "chat__list", {}),
    ]
    results = {r["source_call_id"]: r for r in calling["observation"]["results"]}
    assert results["c1"]["content"] == "found e1" and results["c2"]["content"] == "no channels"
    assert results["c1"]["extra"]["tool_server"] == "email" and results["c1"]["extra"]["tool_name"] == "search_emails"
    assert "observation" not in steps[3] and "tool_calls" not in steps[3]
    assert steps[0]["timestamp"] == "2026-11-27T08:00:00+00:00"


def test_tool_errors_come_from_the_recorded_calls() -> None:
    rec = record(
        [
            message(0, "user", "Read e9."),
            assistant(1, None, ("g", "email__get_email", {"email_id": "e9"})),
            tool(2, "g", "Email 'e9' not found"),
            assistant(3, "It does not exist."),
        ],
        [call_row(0, "email", "get_email", {"email_id": "e9"}, "Email 'e9' not found", is_error=True)],
        outcome="failed",
    )
    (result,) = _trajectory(rec)["steps"][1]["observation"]["results"]
    assert result["extra"] == {"tool_server": "email", "tool_name": "get_email", "is_error": True}


def test_every_user_turn_of_a_multi_turn_task_stays_in_order() -> None:
    steps = _trajectory(multi_turn())["steps"]
    assert [s["source"] for s in steps] == ["user", "agent", "agent", "user", "agent", "agent"]
    assert [s["message"] for s in steps if s["source"] == "user"] == ["Send Aisha the agenda.", "Now tell the channel."]
    assert [r["content"] for r in steps[1]["observation"]["results"]] == ["sent m1"]
    assert [r["content"] for r in steps[4]["observation"]["results"]] == ["posted"]
    assert steps[4]["tool_calls"][0]["extra"] == {"tool_server": "chat"}


def test_arguments_that_are_not_json_are_kept_beside_empty_arguments() -> None:
    (call,) = _trajectory(bad_arguments())["steps"][1]["tool_calls"]
    assert call["arguments"] == {}
    assert call["extra"] == {"tool_server": "email", "raw_arguments": "{not json", "arguments_error": "not valid JSON"}


def test_an_errored_rollout_has_no_reward_and_ends_saying_why() -> None:
    trajectory = _trajectory(errored())
    ours = _ours(trajectory)
    assert ours["outcome"] == "error" and ours["reward"] is None and ours["error_class"] == "model_endpoint"
    assert ours["error"] == "model_endpoint: Agent execution failed: the endpoint refused the connection"
    closing = trajectory["steps"][-1]
    assert closing["source"] == "system" and closing["message"] == ours["error"]
    assert closing["extra"]["kind"] == "run_status" and closing["extra"]["outcome"] == "error"
    failed = _trajectory(bad_arguments())
    assert _ours(failed)["reward"] == 0.0 and _ours(failed)["outcome"] == "failed"
    assert all(step["extra"]["kind"] != "run_status" for step in failed["steps"] if "extra" in step)
    assert _ours(_trajectory(parallel_calls()))["reward"] == 1.0


def test_an_agent_that_did_not_finish_is_a_failure_with_its_status() -> None:
    rec = record(
        [message(0, "user", "Go."), assistant(1, None, ("x", "email__list", {}))],
        outcome="failed",
        status="failed",
        termination_reason="max_steps",
    )
    trajectory = _trajectory(rec)
    assert _ours(trajectory)["reward"] == 0.0
    closing = trajectory["steps"][-1]
    assert closing["message"] == "rollout failed: max_steps" and closing["extra"]["outcome"] == "failed"


def test_a_result_of_no_call_keeps_its_id_out_of_source_call_id() -> None:
    steps = _trajectory(orphan_result())["steps"]
    assert [s["source"] for s in steps] == ["user", "system", "agent", "agent"]
    assert steps[1]["observation"]["results"] == [
        {"content": "a result before any call", "extra": {"tool_call_id": "early"}}
    ]
    results = steps[2]["observation"]["results"]
    assert results[0]["source_call_id"] == "x" and results[0]["content"] == "the email"
    assert results[1] == {"content": "answers no call", "extra": {"tool_call_id": "zzz"}}


def test_the_model_usage_and_agent_are_named() -> None:
    # A parameter named like a secret is part of the tool's definition, kept as the scenario declares it.
    parameters = {"type": "object", "properties": {"api_key": {"type": "string"}}}
    tools = [{"type": "function", "function": {"name": "vault__rotate", "parameters": parameters}}]
    trajectory = _trajectory(parallel_calls(), tools)
    assert list(trajectory["agent"]) == ["name", "version", "model_name", "tool_definitions", "extra"]
    assert trajectory["schema_version"] == ATIF_SCHEMA_VERSION
    assert trajectory["session_id"] == trajectory["trajectory_id"] == "ro_test"
    agent = trajectory["agent"]
    assert agent["name"] == "eval_pipelines" and agent["model_name"] == "gpt-test-2026"
    assert agent["tool_definitions"] == tools and agent["extra"]["provider"] == "openai"
    assert trajectory["final_metrics"] == {
        "total_prompt_tokens": 100,
        "total_completion_tokens": 20,
        "total_cost_usd": 0.001,
        "total_steps": 4,
        "extra": {"total_tokens": 120, "tool_calls": 2, "duration_seconds": 2.5},
    }
    simulated = _trajectory(record([message(0, "user", "Go.")], is_simulated=True, provider="custom"))
    assert simulated["agent"]["extra"]["provider"] == "simulated" and "tool_definitions" not in simulated["agent"]


def test_secrets_never_reach_the_trajectory() -> None:
    rec = record(
        [
            message(0, "user", "Fetch https://alice:hunter2@files.example.com/report?api_key=sk-live-123&page=2"),
            assistant(
                1, None, ("k", "http__get", {"url": "https://x.example/?token=tok-999", "api_key": "sk-live-456"})
            ),
            tool(2, "k", "fetched with authorization=fine from https://bob:pw-777@example.org/"),
            assistant(3, "Done."),
        ],
        [call_row(0, "http", "get", {"url": "https://x.example/"}, "fetched")],
    )
    text = dump(_trajectory(rec))
    for secret in ("hunter2", "sk-live-123", "tok-999", "sk-live-456", "pw-777"):
        assert secret not in text
    assert "files.example.com/report" in text


def test_file_names_are_per_rollout_and_stable() -> None:
    first, second = parallel_calls().row, dict(parallel_calls().row, rollout_id="ro_other")
    assert atif_file_name(first) == atif_file_name(dict(first)) != atif_file_name(second)
    assert atif_file_name(first).startswith("gpt-test_email_ops_001_20261127_080000_")


#: Runs in the atif venv: every trajectory file validated with `atif.Trajectory`, and what the tests compare.
_VALIDATE = r"""
import json, sys
from pathlib import Path
from atif import Trajectory

out = {}
for name in sys.argv[1:]:
    trajectory = Trajectory.model_validate(json.loads(Path(name).read_text(encoding="utf-8")))
    out[name] = {
        "schema_version": trajectory.schema_version,
        "sources": [step.source for step in trajectory.steps],
        "calls": [c.tool_call_id for step in trajectory.steps for c in step.tool_calls or []],
        "answered": [
            r.source_call_id for step in trajectory.steps if step.observation
            for r in step.observation.results if r.source_call_id
        ],
        "extra": trajectory.extra,
    }
print(json.dumps(out))
"""


def validate_with_atif(paths: list[Path]) -> dict[str, dict[str, Any]]:
    python = client_venv("atif") / "python"
    result = subprocess.run(
        [str(python), "-c", _VALIDATE, *map(str, paths)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    validated: dict[str, dict[str, Any]] = json.loads(result.stdout)
    return validated


@pytest.mark.slow
def test_every_mapping_case_validates_with_the_atif_models(tmp_path: Path) -> None:
    paths = []
    for name, case in CASES.items():
        path = tmp_path / f"{name}.json"
        path.write_text(dump(_trajectory(case())), encoding="utf-8")
        paths.append(path)
    validated = validate_with_atif(paths)
    assert len(validated) == len(CASES)
    multi = validated[str(tmp_path / "multi_turn.json")]
    assert multi["sources"] == ["user", "agent", "agent", "user", "agent", "agent"]
    assert multi["calls"] == multi["answered"] == ["a", "b"]


@pytest.mark.slow
def test_the_exported_sweep_validates_with_the_atif_models(sweep_catalog: SweepCatalog, tmp_path: Path) -> None:
    out = tmp_path / "atif"
    assert main(["export", "--format", "atif", "--db", str(sweep_catalog.db), "--out", str(out)]) == 0
    files = sorted(out.glob("*.json"))
    rows = sweep_catalog.rows(
        "select rollout_id, model_name, outcome, reward from rollout_scores where sweep_id = ?",
        [sweep_catalog.sweep_id],
    )
    assert len(files) == len(rows)
    validated = validate_with_atif(files)
    assert len(validated) == len(files)
    by_rollout = {v["extra"]["eval_pipelines"]["rollout_id"]: v for v in validated.values()}
    assert set(by_rollout) == {row["rollout_id"] for row in rows}
    for row in rows:
        ours = by_rollout[row["rollout_id"]]
        assert ours["schema_version"] == ATIF_SCHEMA_VERSION
        assert ours["extra"]["eval_pipelines"]["outcome"] == row["outcome"]
        assert ours["extra"]["eval_pipelines"]["reward"] == row["reward"]
        # Every call is answered in the step that made it.
        assert ours["calls"] == ours["answered"]
        if row["outcome"] == "error":
            assert row["reward"] is None and ours["sources"][-1] == "system"
    assert {row["outcome"] for row in rows} == {"passed", "failed", "error"}
    scripted = next(v for v in by_rollout.values() if v["extra"]["eval_pipelines"]["model_name"] == "scripted")
    assert scripted["calls"] == ["call_bad_args", "call_missing"]


def test_a_result_without_a_call_id_answers_the_first_waiting_call() -> None:
    rec = record(
        [
            message(0, "user", "Go."),
            assistant(1, None, ("p", "email__list", {}), ("q", "chat__list", {})),
            tool(2, None, "three emails"),
            tool(3, None, "two channels"),
        ],
        [call_row(0, "email", "list", {}, "three emails"), call_row(1, "chat", "list", {}, "two channels")],
    )
    results = _trajectory(rec)["steps"][1]["observation"]["results"]
    assert [(r["source_call_id"], r["content"]) for r in results] == [("p", "three emails"), ("q", "two channels")]


def test_a_call_the_engine_recorded_no_row_for_does_not_shift_the_later_ones() -> None:
    """Only the second call has a `tool_calls` row: the first keeps the server its name gives, the second gets
    its own row's error flag."""
    rec = record(
        [
            message(0, "user", "Go."),
            assistant(1, None, ("u", "email__unknown_tool", {})),
            tool(2, "u", "no such tool"),
            assistant(3, None, ("g", "email__get_email", {"email_id": "e1"})),
            tool(4, "g", "not found"),
        ],
        [call_row(0, "email", "get_email", {"email_id": "e1"}, "not found", is_error=True)],
    )
    steps = _trajectory(rec)["steps"]
    (unknown,) = steps[1]["observation"]["results"]
    (found,) = steps[2]["observation"]["results"]
    assert unknown["extra"] == {"tool_server": "email", "tool_name": "unknown_tool", "is_error": False}
    assert found["extra"] == {"tool_server": "email", "tool_name": "get_email", "is_error": True}
