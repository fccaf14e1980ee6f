"""The inspect export, read back by the real Inspect AI (`read_eval_log`, `list_eval_logs`, `read_eval_log_sample`)
in its own venv and compared with the catalog it came from: one log per model x scenario, a sample per task with
its rollouts as epochs, Inspect's status and counts, scores from the verifier verdicts, errors kept apart from
failures, the transcript with its tool calls and tool results."""

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
    needs_inspect,
    read_inspect_logs,
)

pytestmark = [pytest.mark.slow, needs_inspect]


@pytest.fixture(scope="module")
def exported(sweep_catalog: SweepCatalog, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("inspect") / "logs"
    summary = export_results(sweep_catalog.db, out, "inspect", batch_size=3)
    assert summary.sweep_id == sweep_catalog.sweep_id
    assert sorted(summary.files) == sorted(out.iterdir())
    logs = read_inspect_logs(out)
    assert sorted(log["name"] for log in logs) == sorted(str(p) for p in summary.files)
    return logs


def _by_group(logs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(log["metadata"]["model_name"], log["task"]): log for log in logs}


def test_a_sample_per_task_with_its_rollouts_as_epochs(
    exported: list[dict[str, Any]], sweep_catalog: SweepCatalog
) -> None:
    """Inspect's layout of an eval with epochs: the sample id is the task id and each rollout an epoch of it, so
    Inspect fetches a rollout by (task, epoch), and `inspect view`'s count (dataset samples x epochs) is the number
    of samples in the log, the results' total."""
    rollouts = sweep_catalog.rows("select * from rollouts where sweep_id = ?", [sweep_catalog.sweep_id])
    expected: dict[tuple[str, str], dict[tuple[str, int], str]] = {}
    for r in rollouts:
        expected.setdefault((r["model_name"], r["scenario_id"]), {})[(r["task_id"], r["rollout_index"] + 1)] = r[
            "rollout_id"
        ]
    logs = _by_group(exported)
    assert set(logs) == set(expected)
    grouped = 0
    for group, log in logs.items():
        assert log["version"] == 2
        by_key = {(s["id"], s["epoch"]): s["uuid"] for s in log["samples"]}
        assert by_key == expected[group]
        # Inspect's own look-up by (id, epoch) hands back the same rollout.
        assert all(s["uuid_by_id_and_epoch"] == s["uuid"] for s in log["samples"])
        assert all(s["metadata"]["rollout_id"] == s["uuid"] for s in log["samples"])
        tasks = sorted({task for task, _ in expected[group]})
        assert log["sample_ids"] == tasks and log["dataset_samples"] == len(tasks)
        assert log["epochs"] == max(epoch for _, epoch in expected[group])
        assert log["dataset_samples"] * log["epochs"] == len(log["samples"]) == log["total_samples"]
        assert sorted((x["id"], x["epoch"]) for x in log["summaries"]) == sorted(by_key)
        grouped += sum(1 for task in tasks if sum(1 for t, _ in by_key if t == task) > 1)
    assert grouped > 0  # tasks with more than one rollout, grouped under one sample id


def test_status_and_counts_follow_inspects_rule_for_errored_samples(
    exported: list[dict[str, Any]], sweep_catalog: SweepCatalog
) -> None:
    """`error` when a sample errored, as Inspect marks an eval run with `fail_on_error` and `continue_on_fail`;
    completed_samples counts the samples without an error, as Inspect does."""
    outcomes: dict[tuple[str, str], list[str | None]] = {}
    for r in sweep_catalog.rows("select * from rollout_scores where sweep_id = ?", [sweep_catalog.sweep_id]):
        outcomes.setdefault((r["model_name"], r["scenario_id"]), []).append(r["outcome"])
    statuses = set()
    for group, log in _by_group(exported).items():
        errors = outcomes[group].count("error")
        assert log["status"] == ("error" if errors else "success"), group
        assert log["error"] is None  # nothing halted the eval: every sample ran
        assert (log["fail_on_error"], log["continue_on_fail"]) == (True, True)
        assert log["completed_samples"] == len(outcomes[group]) - errors
        assert log["completed_samples"] == sum(1 for s in log["samples"] if s["error"] is None)
        assert sum(1 for x in log["summaries"] if x["error"]) == errors
        statuses.add(log["status"])
    assert statuses == {"error", "success"}


def test_scores_come_from_the_verifier_verdicts(exported: list[dict[str, Any]], sweep_catalog: SweepCatalog) -> None:
    scores = {
        r["rollout_id"]: r
        for r in sweep_catalog.rows("select * from rollout_scores where sweep_id = ?", [sweep_catalog.sweep_id])
    }
    verdicts: dict[str, list[dict[str, Any]]] = {}
    for v in sweep_catalog.rows("select * from verifications_latest where kind = 'programmatic'"):
        verdicts.setdefault(v["rollout_id"], []).append(v)
    seen = set()
    for log in exported:
        for sample in log["samples"]:
            outcome = scores[sample["uuid"]]["outcome"]
            if outcome == "error":
                continue
            assert outcome in ("passed", "failed"), sample["id"]
            score = sample["scores"]["verifiers"]
            assert score["value"] == ("C" if outcome == "passed" else "I")
            assert score["metadata"]["reward"] == scores[sample["uuid"]]["reward"]
            for verdict in verdicts[sample["uuid"]]:
                assert verdict["verifier"] in score["explanation"]
                assert verdict["message"] in score["explanation"]
            assert sample["error"] is None
            seen.add(outcome)
    assert seen == {"passed", "failed"}
    metrics = {
        (m["model_name"], m["scenario_id"]): m
        for m in sweep_catalog.rows("select * from scenario_model_metrics where sweep_id = ?", [sweep_catalog.sweep_id])
    }
    for group, log in _by_group(exported).items():
        (score,) = log["scores"]
        if metrics[group]["pass_rate"] is None:
            assert score["metrics"] == {} and score["scored"] == 0
            continue
        assert score["metrics"]["accuracy"] == pytest.approx(metrics[group]["pass_rate"])
        # One task gives no clustered standard error (it needs two clusters), and then no stderr metric.
        if metrics[group]["clustered_se"] is None:
            assert "stderr" not in score["metrics"]
        else:
            assert score["metrics"]["stderr"] == pytest.approx(metrics[group]["clustered_se"])
        assert score["scored"] == metrics[group]["n"]


def test_errored_rollouts_are_samples_with_an_error_not_failed_scores(
    exported: list[dict[str, Any]], sweep_catalog: SweepCatalog
) -> None:
    broken = [log for log in exported if log["metadata"]["model_name"] == BROKEN]
    assert len(broken) == 2
    for log in broken:
        assert log["completed_samples"] == 0 and log["status"] == "error"
        assert log["scores"][0]["scored"] == 0 and log["scores"][0]["metrics"] == {}
        for sample in log["samples"]:
            assert sample["scores"] is None
            assert sample["error"].startswith("model_endpoint: ")
            assert "could not reach" in sample["error"]
            assert sample["summary_error"] == sample["error"]
            # error_retries: 1 in the run, so one earlier attempt ended in the same error and was retried.
            assert len(sample["error_retries"]) == 1 and "attempt 1: model_endpoint" in sample["error_retries"][0]
            assert sample["metadata"]["error_class"] == "model_endpoint"


def test_messages_carry_tool_calls_and_results_as_inspect_chat_messages(
    exported: list[dict[str, Any]], sweep_catalog: SweepCatalog
) -> None:
    stored: dict[str, list[dict[str, Any]]] = {}
    for m in sweep_catalog.rows("select * from messages order by rollout_id, message_index"):
        stored.setdefault(m["rollout_id"], []).append(m)
    tasks = {t["task_id"]: t["description"] for t in sweep_catalog.rows("select * from tasks")}
    rollouts = {r["rollout_id"]: r for r in sweep_catalog.rows("select * from rollouts")}
    calls_seen = 0
    for log in exported:
        for sample in log["samples"]:
            rollout = rollouts[sample["uuid"]]
            assert sample["id"] == rollout["task_id"]
            assert sample["input"] == tasks[rollout["task_id"]]
            messages = sample["messages"]
            assert [m["role"] for m in messages] == [m["role"] for m in stored[sample["uuid"]]]
            assert messages[1] == {"role": "user", "text": sample["input"]}
            for message, row in zip(messages, stored[sample["uuid"]], strict=True):
                if row["tool_calls_json"]:
                    wire = json.loads(row["tool_calls_json"])
                    assert [c["function"] for c in message["tool_calls"]] == [c["function"]["name"] for c in wire]
                    assert [c["id"] for c in message["tool_calls"]] == [c["id"] for c in wire]
                    calls_seen += len(wire)
                if row["role"] == "tool":
                    assert message["tool_call_id"] == row["tool_call_id"]
                    assert message["text"] == row["content"]
            answered = {c["id"]: c["function"] for m in messages for c in m.get("tool_calls") or []}
            for message in messages:
                if message["role"] == "tool":
                    assert message["function"] == answered[message["tool_call_id"]]
            if rollout["total_tokens"] is not None:
                (usage,) = sample["model_usage"].values()
                assert usage["total_tokens"] == rollout["total_tokens"]
                assert usage["input_tokens"] == rollout["prompt_tokens"]
            final = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
            if final is not None and not final["tool_calls"]:
                assert sample["completion"] == final["text"]
    assert calls_seen > 0


def test_bad_arguments_and_failing_tools_keep_their_errors(exported: list[dict[str, Any]]) -> None:
    (log,) = [log for log in exported if log["metadata"]["model_name"] == SCRIPTED]
    assert not log["metadata"]["is_simulated"] and log["model"] == "custom/scripted"
    (sample,) = log["samples"]
    calls = {c["id"]: c for m in sample["messages"] for c in m.get("tool_calls") or []}
    assert calls["call_bad_args"]["arguments"] == {} and "{not json" in calls["call_bad_args"]["parse_error"]
    assert calls["call_missing"]["arguments"] == {"email_id": "no-such-email"}
    assert calls["call_missing"]["parse_error"] is None
    results = {m["tool_call_id"]: m for m in sample["messages"] if m["role"] == "tool"}
    assert results["call_bad_args"]["error"]["type"] == "parsing"
    assert results["call_missing"]["error"]["type"] == "unknown"
    assert results["call_missing"]["function"] == "email__get_email"
    assert sample["completion"] == "I could not send it."
    assert sample["scores"]["verifiers"]["value"] == "I"


def test_simulated_models_stay_labelled_simulated(exported: list[dict[str, Any]]) -> None:
    for log in exported:
        simulated = log["metadata"]["model_name"] in SIMULATED
        assert log["metadata"]["is_simulated"] is simulated
        assert log["model"].startswith("simulated/") is simulated
        assert ("simulated" in log["tags"]) is simulated
        assert log["metadata"]["model_label"].endswith("(simulated)") is simulated
        assert all(s["metadata"]["is_simulated"] is simulated for s in log["samples"])


def test_filters_narrow_the_logs(sweep_catalog: SweepCatalog, tmp_path: Path) -> None:
    summary = export_results(
        sweep_catalog.db, tmp_path / "one", "inspect", model_name="sim-oracle", scenario_id="team_chat:1.0.0"
    )
    (log,) = read_inspect_logs(tmp_path / "one")
    assert (log["metadata"]["model_name"], log["task"]) == ("sim-oracle", "team_chat:1.0.0")
    assert summary.rollouts == log["total_samples"] == len(log["samples"])
    by_model = export_results(sweep_catalog.db, tmp_path / "model", "inspect", model_name=SCRIPTED)
    assert [p.parent for p in by_model.files] == [tmp_path / "model"] and by_model.rollouts == 1
