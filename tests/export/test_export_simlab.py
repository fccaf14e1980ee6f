"""`eval-pipelines export --format simlab`: one SimLab run folder per rollout, in the shape SimLab 0.2.0 writes
(its sdist's own example output is the reference), with names that are safe, unique and stable; and SimLab's own
`simlab eval`, from its venv, reading an exported sweep and reporting what the warehouse holds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipelines.cli import main
from eval_pipelines.reports.export import export_results, run_folder_name, simlab_artifacts, simlab_reward
from eval_pipelines.reports.export.output import dump
from eval_pipelines.reports.export.simlab_runs import write_run_folder
from tests.compat.conftest import client_venv, describe, run_client
from tests.export.conftest import SweepCatalog
from tests.export.records import assistant, call_row, message, record, tool
from tests.support.simlab_sources import simlab_source_tree

EXAMPLE_RUN = "output/agent_run_generated-task_20260401_191233"
SAFE_FOLDER = re.compile(r"^agent_run_[A-Za-z0-9][A-Za-z0-9._-]*_\d{8}_\d{6}_[0-9a-f]{12}$")


def _example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((simlab_source_tree() / EXAMPLE_RUN / name).read_text())
    return loaded


def _calling() -> Any:
    return record(
        [
            message(0, "system", "Be useful."),
            message(1, "user", "Ask Aisha about the projector."),
            assistant(2, "Sending.", ("c1", "email__send_email", {"to": "aisha@example.com"})),
            tool(3, "c1", "sent m1"),
            assistant(4, "Sent the email."),
        ],
        [call_row(0, "email", "send_email", {"to": "aisha@example.com"}, "sent m1")],
    )


def _errored() -> Any:
    return record(
        [message(0, "user", "Ask Aisha.")],
        outcome="error",
        status="failed",
        termination_reason="agent_error",
        outcome_error_class="model_endpoint",
        error="Agent execution failed: connection refused",
    )


def test_artifacts_have_the_fields_simlab_writes_in_its_order() -> None:
    artifacts = simlab_artifacts(_calling())
    assert list(artifacts) == list(_example("artifacts.json"))
    assert artifacts["task_id"] == "email_ops_001" and artifacts["task"] == "Do the task."
    assert (artifacts["model"], artifacts["provider"]) == ("gpt-test", "openai")
    assert artifacts["tool_calls"] == [
        {"tool_server": "email", "tool_name": "send_email", "parameters": {"to": "aisha@example.com"}}
    ]
    assert artifacts["tool_results"] == [{"observation": {"text": "sent m1"}, "is_error": False}]
    # SimLab's reference agent's transcript: the calls in an assistant object, tool messages as its payload.
    messages = artifacts["messages"]
    assert messages[2] == {
        "role": "assistant",
        "content": {
            "content": "Sending.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "email__send_email", "arguments": '{"to": "aisha@example.com"}'},
                }
            ],
        },
    }
    assert messages[3] == {
        "role": "tool",
        "content": {
            "tool_call_id": "c1",
            "tool_server": "email",
            "tool_name": "send_email",
            "is_error": False,
            "summary": "sent m1",
        },
    }
    assert artifacts["final_observation"] == "Sent the email." and artifacts["error"] is None
    assert (artifacts["steps_taken"], artifacts["max_steps"]) == (1, 30)
    assert artifacts["created_at"] == "2026-11-27T08:00:00+00:00"
    assert artifacts["metadata"]["rollout_metrics"] == {
        "token_usage": {"prompt_tokens_total": 100, "completion_tokens_total": 20, "total_tokens_total": 120},
        "timing": {"duration_seconds": 2.5},
        "cost": {"estimated_cost_usd": 0.001},
    }


def test_reward_files_are_simlabs() -> None:
    example = _example("verifier/reward.json")
    reward = simlab_reward(_calling())
    assert reward is not None and list(reward) == list(example)
    assert reward["reward"] == 1.0
    assert [list(v) for v in reward["verifier_results"]] == [list(example["verifier_results"][0])]
    assert reward["verifier_results"][0]["module"] == "sent_the_email"
    failed = simlab_reward(record([message(0, "user", "Go.")], outcome="failed"))
    assert failed is not None and failed["reward"] == 0.0 and failed["verifier_results"][0]["success"] is False
    assert simlab_reward(_errored()) is None
    assert simlab_reward(record([message(0, "user", "Go.")], outcome=None)) is None


def test_an_errored_rollout_is_a_simlab_error_without_reward_files(tmp_path: Path) -> None:
    artifacts = simlab_artifacts(_errored())
    assert artifacts["error"] == "model_endpoint: Agent execution failed: connection refused"
    assert artifacts["metadata"]["eval_pipelines"]["outcome"] == "error"
    folder = tmp_path / run_folder_name(_errored().row)
    write_run_folder(folder, _calling(), None)
    assert (folder / "verifier" / "reward.txt").read_text() == "1"
    # The same rollout exported again after its verdict became an error: no stale reward stays behind.
    write_run_folder(folder, _errored(), None)
    assert not (folder / "verifier" / "reward.json").exists() and not (folder / "verifier" / "reward.txt").exists()
    assert json.loads((folder / "artifacts.json").read_text())["error"] == artifacts["error"]
    assert json.loads((folder / "agent" / "trajectory.json").read_text())["schema_version"].startswith("ATIF-v")


def test_an_agent_failure_is_no_simlab_error() -> None:
    crashed = record(
        [message(0, "user", "Go.")], outcome="failed", status="failed", termination_reason="agent_error", error="boom"
    )
    artifacts = simlab_artifacts(crashed)
    assert artifacts["error"] is None and artifacts["metadata"]["eval_pipelines"]["agent_error"] == "boom"
    assert artifacts["final_observation"] is None


@pytest.mark.parametrize(
    "task_id",
    ["../../etc/passwd", "a/b\\c", "", ".hidden", "ünï cødé ✓", "x" * 500, "CON", "task:1 * ? < > |", "-"],
)
def test_folder_names_are_safe_for_any_task_id(task_id: str) -> None:
    row = dict(_calling().row, task_id=task_id)
    name = run_folder_name(row)
    assert SAFE_FOLDER.match(name), name
    assert len(name) <= 110 and name == run_folder_name(dict(row))


def test_folder_names_are_unique_per_rollout() -> None:
    rows = [dict(_calling().row, rollout_id=f"ro_{i}", task_id=task) for i, task in enumerate(["a/b", "a:b", "a b"])]
    rows += [dict(_calling().row, rollout_id="ro_9", task_id="A-B"), dict(_calling().row, rollout_id="ro_10")]
    names = [run_folder_name(row) for row in rows]
    assert len(set(names)) == len(names) and len({n.lower() for n in names}) == len(names)


def test_secrets_never_reach_the_run_folder() -> None:
    rec = record(
        [
            message(0, "user", "Fetch https://alice:hunter2@files.example.com/?api_key=sk-live-123"),
            assistant(1, None, ("k", "http__get", {"api_key": "sk-live-456"})),
            tool(2, "k", "token at https://x.example/?token=tok-999"),
        ],
        [call_row(0, "http", "get", {"api_key": "sk-live-456"}, "token at https://x.example/?token=tok-999")],
    )
    text = dump(simlab_artifacts(rec)) + dump(simlab_reward(rec))
    for secret in ("hunter2", "sk-live-123", "sk-live-456", "tok-999"):
        assert secret not in text


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_exporting_again_writes_the_same_folders_and_bytes(sweep_catalog: SweepCatalog, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    argv = ["export", "--format", "simlab", "--db", str(sweep_catalog.db), "--out", str(out)]
    assert main(argv) == 0
    first = _tree(out)
    assert main(argv) == 0
    assert _tree(out) == first
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert all(SAFE_FOLDER.match(p.name) for p in folders)
    count = sweep_catalog.rows("select count(*) as n from rollouts where sweep_id = ?", [sweep_catalog.sweep_id])
    assert len(folders) == count[0]["n"]


def _simlab_eval(path: Path, cwd: Path, *extra: str) -> Any:
    simlab = client_venv("simlab") / "simlab"
    # `simlab eval` reads local files only, but SimLab's CLI refuses every command but auth without a key.
    env = {"SIMLAB_COLLINEAR_API_KEY": "unused-by-simlab-eval", "SIMLAB_DISABLE_TELEMETRY": "1"}
    result = run_client([str(simlab), "eval", str(path), *extra], env, cwd)
    assert result.returncode == 0, describe(result)
    return result


@pytest.fixture(scope="module")
def exported_runs(sweep_catalog: SweepCatalog, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("simlab-runs") / "runs"
    assert main(["export", "--format", "simlab", "--db", str(sweep_catalog.db), "--out", str(out)]) == 0
    return out


def _scores(sweep_catalog: SweepCatalog) -> list[dict[str, Any]]:
    return sweep_catalog.rows(
        "select rollout_id, model_name, task_id, outcome, reward, error_class from rollout_scores where sweep_id = ?",
        [sweep_catalog.sweep_id],
    )


@pytest.mark.slow
def test_simlab_eval_json_agrees_with_the_warehouse(
    exported_runs: Path, sweep_catalog: SweepCatalog, tmp_path: Path
) -> None:
    report = json.loads(_simlab_eval(exported_runs, tmp_path, "--json").stdout)
    assert report["mode"] == "multi_rollout" and report["warnings"] == []
    scores = _scores(sweep_catalog)
    passes = sum(row["outcome"] == "passed" for row in scores)
    fails = sum(row["outcome"] == "failed" for row in scores)
    errors = [row for row in scores if row["outcome"] == "error"]
    assert passes and fails and errors
    summary = report["summary"]
    assert summary["rollout_count"] == len(scores)
    assert summary["task_count"] == len({row["task_id"] for row in scores})
    assert summary["models"] == sorted({row["model_name"] for row in scores})
    assert summary["passed_count"] == passes
    # SimLab's reward-earned rate counts the rollouts with a reward: ours, errors left out.
    assert summary["score_summary"]["reward_earned_rate"] == pytest.approx(passes / (passes + fails))
    by_model = {row["model"]: row for row in summary["model_comparison"]}
    for model in {row["model_name"] for row in scores}:
        ours = [row for row in scores if row["model_name"] == model]
        assert by_model[model]["rollout_count"] == len(ours)
        assert by_model[model]["passed_count"] == sum(row["outcome"] == "passed" for row in ours)
    reasons = {row["reason"]: row["count"] for row in summary["overview"]["termination_reasons"]}
    assert reasons["error"] == len(errors)
    outcome_of = {row["rollout_id"]: row for row in scores}
    for rollout in report["rollouts"]:
        artifacts = json.loads((Path(rollout["path"]) / "artifacts.json").read_text())
        ours = outcome_of[artifacts["metadata"]["eval_pipelines"]["rollout_id"]]
        if ours["outcome"] == "error":
            # An error, not a failure: SimLab shows its error and no reward.
            assert rollout["error"].startswith(f"{ours['error_class']}: ") and rollout["reward"] is None
            assert rollout["termination_reason"] == "error"
        else:
            assert rollout["error"] is None and rollout["reward"] == ours["reward"]
            assert rollout["passed"] is (ours["outcome"] == "passed")


@pytest.mark.slow
def test_simlab_eval_prints_the_sweeps_results(
    exported_runs: Path, sweep_catalog: SweepCatalog, tmp_path: Path
) -> None:
    scores = _scores(sweep_catalog)
    passes = sum(row["outcome"] == "passed" for row in scores)
    scored = sum(row["outcome"] in ("passed", "failed") for row in scores)
    errors = sum(row["outcome"] == "error" for row in scores)
    models = len({row["model_name"] for row in scores})
    tasks = len({row["task_id"] for row in scores})
    text = _simlab_eval(exported_runs, tmp_path).stdout
    assert f"{len(scores)} rollouts | {tasks} tasks | {models} models" in text
    earned = re.search(r"Reward earned rate\s+([\d.]+)%", text)
    assert earned is not None and float(earned.group(1)) == pytest.approx(100 * passes / scored, abs=0.05), text
    assert re.search(rf"Termination reasons\s+.*error {errors} ", text), text
    # The "Model Comparison" table: each model's rollouts and its passes over them (errors counted as rollouts).
    table = text.split("\nModel Comparison\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    printed = {cells[0]: (int(cells[1]), float(cells[2].rstrip("%"))) for cells in (line.split() for line in table)}
    assert set(printed) == {row["model_name"] for row in scores}
    for model, (n, rate) in printed.items():
        ours = [row for row in scores if row["model_name"] == model]
        assert n == len(ours)
        assert rate == pytest.approx(100 * sum(row["outcome"] == "passed" for row in ours) / len(ours), abs=0.05)


@pytest.mark.slow
def test_simlab_eval_of_one_errored_rollout_shows_the_error(
    exported_runs: Path, sweep_catalog: SweepCatalog, tmp_path: Path
) -> None:
    errored = next(row for row in _scores(sweep_catalog) if row["outcome"] == "error")
    folder = next(
        p
        for p in exported_runs.iterdir()
        if json.loads((p / "artifacts.json").read_text())["metadata"]["eval_pipelines"]["rollout_id"]
        == errored["rollout_id"]
    )
    text = _simlab_eval(folder, tmp_path).stdout
    assert f"Status: Error - {errored['error_class']}: " in text and "Termination" in text
    assert re.search(r"Reward\s+n/a", text), text


def test_a_filtered_sweep_gets_one_folder_per_rollout_with_its_verdict(report_catalog: Path, tmp_path: Path) -> None:
    """The reports suite's synthetic catalog (no transcripts), read three rollouts at a time."""
    out = tmp_path / "runs"
    summary = export_results(
        report_catalog, out, "simlab", model_name="gpt-real", scenario_id="calendar:2.0.0", batch_size=3
    )
    scores = dict(
        duckdb.connect(str(report_catalog), read_only=True)
        .execute(
            "select rollout_id, outcome from rollout_scores where sweep_id = ? and model_name = ? and scenario_id = ?",
            [summary.sweep_id, "gpt-real", "calendar:2.0.0"],
        )
        .fetchall()
    )
    folders = sorted(out.iterdir())
    assert summary.format == "simlab" and summary.rollouts == len(folders) == len(scores) and summary.batches > 1
    for folder in folders:
        artifacts = json.loads((folder / "artifacts.json").read_text())
        outcome = scores[artifacts["metadata"]["eval_pipelines"]["rollout_id"]]
        reward_txt = folder / "verifier" / "reward.txt"
        if outcome in ("passed", "failed"):
            assert reward_txt.read_text() == ("1" if outcome == "passed" else "0")
        else:
            assert not reward_txt.exists() and (artifacts["error"] is not None) == (outcome == "error")


def test_out_must_be_a_directory(report_catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for fmt in ("simlab", "atif"):
        assert main(["export", "--format", fmt, "--db", str(report_catalog), "--out", str(a_file)]) == 2
        assert f"--out {a_file} is a file; {fmt} writes one" in capsys.readouterr().err
