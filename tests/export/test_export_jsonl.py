"""The jsonl export: one rollout per line in OpenAI chat-messages form, checked against openai's own parameter
types (in the Inspect venv, which has the `openai` package) and by explicit structure, with the reward and ids
each line needs for SFT and RL loaders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.reports.export import export_results
from tests.export.conftest import (
    BROKEN,
    SCRIPTED,
    SIMULATED,
    SweepCatalog,
    check_with_openai_types,
    needs_inspect,
)

pytestmark = pytest.mark.slow

IDS = ("sweep_id", "run_id", "rollout_id", "model_name", "scenario_id", "task_id", "is_simulated")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _check_message_structure(messages: list[dict[str, Any]]) -> None:
    """What a chat-template loader relies on, beyond the types: every tool result answers a call made before it."""
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    open_calls: set[str] = set()
    for message in messages:
        role = message["role"]
        assert role in ("system", "user", "assistant", "tool"), message
        if role == "assistant":
            assert set(message) <= {"role", "content", "tool_calls"}
            calls = message.get("tool_calls")
            assert isinstance(message["content"], str) or (message["content"] is None and calls)
            for call in calls or []:
                assert set(call) == {"id", "type", "function"} and call["type"] == "function"
                assert set(call["function"]) == {"name", "arguments"}
                assert isinstance(call["function"]["name"], str) and call["function"]["name"]
                assert isinstance(call["function"]["arguments"], str)
                open_calls.add(call["id"])
        elif role == "tool":
            assert set(message) == {"role", "tool_call_id", "content"}
            assert isinstance(message["content"], str)
            assert message["tool_call_id"] in open_calls
        else:
            assert set(message) == {"role", "content"} and isinstance(message["content"], str)


@pytest.fixture(scope="module")
def jsonl(sweep_catalog: SweepCatalog, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("jsonl") / "rollouts.jsonl"
    export_results(sweep_catalog.db, out, "jsonl")
    return out


def test_lines_are_openai_chat_messages_with_reward_and_ids(jsonl: Path, sweep_catalog: SweepCatalog) -> None:
    scores = {
        r["rollout_id"]: r
        for r in sweep_catalog.rows("select * from rollout_scores where sweep_id = ?", [sweep_catalog.sweep_id])
    }
    rollouts = {r["rollout_id"]: r for r in sweep_catalog.rows("select * from rollouts")}
    lines = _lines(jsonl)
    # Errored rollouts are left out by default: their reward would say nothing about the model.
    assert sorted(line["rollout_id"] for line in lines) == sorted(
        rid for rid, s in scores.items() if s["outcome"] in ("passed", "failed")
    )
    assert {line["model_name"] for line in lines} == {*SIMULATED, SCRIPTED}
    for line in lines:
        score, rollout = scores[line["rollout_id"]], rollouts[line["rollout_id"]]
        assert {k: line[k] for k in IDS} == {k: rollout[k] for k in IDS}
        assert line["reward"] == score["reward"] and line["reward"] in (0.0, 1.0)
        assert line["outcome"] == score["outcome"]
        assert line["is_simulated"] is (line["model_name"] in SIMULATED)
        _check_message_structure(line["messages"])
        assert line["verifier_results"], line["rollout_id"]
        for verdict in line["verifier_results"]:
            assert {"verifier", "verifier_version", "kind", "success", "reward", "message"} <= set(verdict)
        # The tools are the task's built-in tool servers' definitions, named as the agent called them.
        offered = {tool["function"]["name"] for tool in line["tools"]}
        called = {c["function"]["name"] for m in line["messages"] for c in m.get("tool_calls") or []}
        assert called <= offered, called - offered
    assert any(line["reward"] == 1.0 for line in lines) and any(line["reward"] == 0.0 for line in lines)


@needs_inspect
def test_lines_validate_against_the_openai_types(jsonl: Path) -> None:
    assert check_with_openai_types(jsonl) == len(_lines(jsonl))


def test_arguments_stay_the_models_text(jsonl: Path) -> None:
    (line,) = [line for line in _lines(jsonl) if line["model_name"] == SCRIPTED]
    calls = {c["id"]: c["function"] for m in line["messages"] for c in m.get("tool_calls") or []}
    assert calls["call_bad_args"] == {"name": "email__send_email", "arguments": "{not json"}
    assert json.loads(calls["call_missing"]["arguments"]) == {"email_id": "no-such-email"}


def test_include_errors_marks_them_with_a_null_reward(sweep_catalog: SweepCatalog, tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"
    summary = export_results(sweep_catalog.db, out, "jsonl", include_errors=True, model_name=BROKEN)
    lines = _lines(out)
    assert summary.rollouts == len(lines) == 6 and summary.left_out == 0
    for line in lines:
        assert (line["outcome"], line["reward"], line["error_class"]) == ("error", None, "model_endpoint")
        _check_message_structure(line["messages"])
    without = export_results(sweep_catalog.db, tmp_path / "none.jsonl", "jsonl", model_name=BROKEN)
    assert (without.rollouts, without.left_out) == (0, 6)
    assert (tmp_path / "none.jsonl").read_text() == ""


def test_scenario_filter_narrows_the_lines(sweep_catalog: SweepCatalog, tmp_path: Path) -> None:
    out = tmp_path / "team.jsonl"
    export_results(sweep_catalog.db, out, "jsonl", scenario_id="team_chat:1.0.0")
    lines = _lines(out)
    assert lines and {line["scenario_id"] for line in lines} == {"team_chat:1.0.0"}
    assert {line["model_name"] for line in lines} == set(SIMULATED)
