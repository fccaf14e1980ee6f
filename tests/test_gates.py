"""The gates that hold the report (pipeline/gates.py) on synthetic warehouses whose answer is known: coverage
against planned and stored rollouts, parity on deterministic components, judge agreement; and
`eval-pipelines report`, which prints the failing gate and exits 3 without writing the report."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from eval_pipelines.cli import EXIT_ERRORS, main
from eval_pipelines.pipeline.gates import (
    COVERAGE,
    JUDGE_AGREEMENT,
    PARITY,
    Thresholds,
    evaluate_gates,
    sweep_config_for,
)
from eval_pipelines.schemas.sweep import DEFAULT_MIN_COVERAGE, SweepConfig
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.rows import ColumnTable, rows_table
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import JUDGEMENTS
from eval_pipelines.warehouse.tables import PARITY as PARITY_TABLE
from tests.reports.synthetic_warehouse import T0, Attempt, attempts_with, scenario_key, write_warehouse

SCN = "scn:1.0.0"
KEY = scenario_key(SCN)


def _catalog(tmp_path: Path, attempts: list[Attempt]) -> tuple[Path, Path]:
    root = tmp_path / "warehouse"
    write_warehouse(root, attempts)
    return root, build_catalog(root, tmp_path / "eval.duckdb").path


def _rebuild(root: Path, tmp_path: Path) -> Path:
    return build_catalog(root, tmp_path / "eval.duckdb").path


def test_coverage_counts_scored_rollouts_against_the_planned_ones(tmp_path: Path) -> None:
    # model-a: 4 scored of 4; model-b: 3 scored and 1 never verified.
    attempts = attempts_with({"t1": (2, 1), "t2": (2, 2)}, model_name="model-a", scenario_id=SCN)
    attempts += attempts_with({"t1": (2, 0), "t2": (1, 1)}, model_name="model-b", scenario_id=SCN)
    attempts.append(Attempt("t2", "unscored", model_name="model-b", scenario_id=SCN))
    _, db = _catalog(tmp_path, attempts)

    stored = evaluate_gates(db, "sweep-1", Thresholds()).result(COVERAGE)
    assert stored.checked == 2 and not stored.passed
    [line] = stored.failures
    assert "model-b" in line and "3/4 planned rollouts scored (75% < 80%)" in line

    assert evaluate_gates(db, "sweep-1", Thresholds(min_coverage=0.75)).result(COVERAGE).passed

    # A planned pair with no rollout at all (its run never happened) has coverage 0; a pair planned larger than
    # what was stored counts against the plan.
    planned = {("model-a", KEY): 8, ("model-b", KEY): 4, ("model-c", KEY): 4}
    verdict = evaluate_gates(db, "sweep-1", Thresholds(min_coverage=0.5), planned)
    assert [f.split(":")[0] for f in verdict.result(COVERAGE).failures] == [f"model-c \u00d7 {KEY}"]
    strict = evaluate_gates(db, "sweep-1", Thresholds(min_coverage=0.6), planned)
    assert len(strict.result(COVERAGE).failures) == 2
    assert strict.result(COVERAGE).failures[0].startswith("model-a") and "4/8" in strict.result(COVERAGE).failures[0]
    assert strict.lines()[0].startswith("gate coverage failed for sweep sweep-1: model-a")


def _parity_rows(sweep: str, model: str, disagreements: list[bool]) -> ColumnTable:
    rows = [
        {
            "sweep_id": sweep,
            "rollout_id": f"{sweep}-{model}-{KEY}-{i}",
            "benchmark": "bfcl",
            "scenario_id": SCN,
            "task_id": "t1",
            "model_name": model,
            "ours_success": True,
            "ours_reward": 1.0,
            "upstream_success": not bad,
            "upstream_reward": 0.0 if bad else 1.0,
            "agree": not bad,
            "flips": ["success"] if bad else [],
            "deterministic_disagreement": bad,
            "ours_components_json": "{}",
            "upstream_components_json": "{}",
            "upstream_message": "",
            "upstream_version": "1",
            "grading_id": f"g{i}",
            "graded_at": T0,
        }
        for i, bad in enumerate(disagreements)
    ]
    return rows_table(PARITY_TABLE, rows)


def test_parity_passes_without_gradings_and_fails_on_a_deterministic_disagreement(tmp_path: Path) -> None:
    root, db = _catalog(tmp_path, attempts_with({"t1": (3, 3)}, scenario_id=SCN))
    nothing = evaluate_gates(db, "sweep-1", Thresholds()).result(PARITY)
    assert nothing.passed and nothing.checked == 0

    warehouse = Warehouse(root)
    warehouse.write("parity_gradings", _parity_rows("sweep-1", "model-a", [False] * 3), **_at("model-a"))
    db = _rebuild(root, tmp_path)
    assert evaluate_gates(db, "sweep-1", Thresholds()).result(PARITY).passed

    warehouse.write("parity_gradings", _parity_rows("sweep-1", "model-a", [False, True, False]), **_at("model-a"))
    failed = evaluate_gates(_rebuild(root, tmp_path), "sweep-1", Thresholds()).result(PARITY)
    assert not failed.passed and "1/3 graded rollouts differ" in failed.failures[0]
    # Another sweep's gradings say nothing about this one.
    assert evaluate_gates(db, "sweep-2", Thresholds()).result(PARITY).checked == 0


def _at(model: str) -> dict[str, str]:
    return {"model_key": model, "scenario_key": KEY, "file_stem": "s"}


def _judgements(scores: list[float], minutes: int = 5) -> ColumnTable:
    rows = [
        {
            "sweep_id": "sweep-1",
            "rollout_id": f"sweep-1-model-a-{KEY}-{i}",
            "scenario_id": SCN,
            "task_id": "t1",
            "model_name": "model-a",
            "judge": "veritas-q",
            "judge_id": "j1",
            "judge_kind": "quality",
            "judge_model": "veritas",
            "score": score,
            "category": None,
            "rationale": "",
            "ground_truth": None,
            "dataset_id": None,
            "judged_at": T0 + timedelta(minutes=minutes),
        }
        for i, score in enumerate(scores)
    ]
    return rows_table(JUDGEMENTS, rows)


def test_judge_agreement_gates_only_a_sweep_with_judge_scores(tmp_path: Path) -> None:
    # Rollouts 0-1 pass the verifiers, 2-3 fail them.
    root, db = _catalog(tmp_path, attempts_with({"t1": (4, 2)}, scenario_id=SCN))
    unjudged = evaluate_gates(db, "sweep-1", Thresholds()).result(JUDGE_AGREEMENT)
    assert unjudged.passed and unjudged.checked == 0

    # The judge passes 0, fails 1, passes 2, fails 3: it agrees on half, no better than chance (kappa 0).
    Warehouse(root).write("judgements", _judgements([9.0, 2.0, 8.0, 1.0]), **_at("model-a"))
    db = _rebuild(root, tmp_path)
    failed = evaluate_gates(db, "sweep-1", Thresholds()).result(JUDGE_AGREEMENT)
    assert failed.checked == 1 and not failed.passed
    assert (
        "veritas-q (veritas) on scn:1.0.0: kappa 0.00 against the verifiers over 4 rollouts (< 0.60)"
        in (failed.failures[0])
    )
    assert evaluate_gates(db, "sweep-1", Thresholds(min_judge_kappa=0.0)).result(JUDGE_AGREEMENT).passed
    # A catalog built before judge_calibration existed: judge_verifier_agreement's quality judges say the same.
    older = tmp_path / "older.duckdb"
    shutil.copy(db, older)
    con = duckdb.connect(str(older))
    con.execute("drop view judge_calibration")
    con.close()
    [line] = evaluate_gates(older, "sweep-1", Thresholds()).result(JUDGE_AGREEMENT).failures
    assert line.startswith(f"quality judge veritas on model-a \u00d7 {SCN}: kappa 0.00"), line

    # The judge agrees on 3 of 4 (fails rollout 1 the verifiers pass): kappa 0.5.
    Warehouse(root).write("judgements", _judgements([9.0, 2.0, 1.0, 1.0], minutes=10), **_at("model-a"))
    db = _rebuild(root, tmp_path)
    assert evaluate_gates(db, "sweep-1", Thresholds(min_judge_kappa=0.5)).result(JUDGE_AGREEMENT).passed
    assert not evaluate_gates(db, "sweep-1", Thresholds(min_judge_kappa=0.51)).result(JUDGE_AGREEMENT).passed


def test_a_sweep_id_finds_its_config() -> None:
    sweep = SweepConfig.model_validate(
        {"name": "nightly", "scenarios": ["*"], "models": [{"name": "m", "model": "m", "base_url": "sim://local"}]}
    )
    sweeps = {"nightly": sweep}
    assert sweep_config_for("nightly-20260101", sweeps) is sweep
    assert sweep_config_for("nightly", sweeps) is sweep
    assert sweep_config_for("other-20260101", sweeps) is None
    assert Thresholds.of(None).min_coverage == DEFAULT_MIN_COVERAGE == sweep.min_coverage


def test_report_cli_names_the_failing_gate_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVAL_PIPELINES_PROJECT_DIR", str(tmp_path))  # no sweep config: the default thresholds
    attempts = attempts_with({"t1": (2, 1)}, scenario_id=SCN) + [Attempt("t1", "unscored", scenario_id=SCN)] * 2
    _, db = _catalog(tmp_path, attempts)
    out = tmp_path / "report.html"

    assert main(["report", "--db", str(db), "--out", str(out)]) == EXIT_ERRORS
    err = capsys.readouterr().err
    assert "gate coverage failed for sweep sweep-1: model-a" in err and "2/4 planned rollouts scored" in err
    assert not out.exists()

    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "lenient.yaml").write_text(
        "name: sweep-1\nscenarios: ['scn:1.0.0']\nmin_coverage: 0.5\n"
        "models: [{name: model-a, model: m, base_url: 'sim://local'}]\n"
    )
    # The config named as the sweep id: its min_coverage of 50% lets the report through (its scenario is not in
    # this project, so the planned rollouts are the stored ones).
    assert main(["report", "--db", str(db), "--out", str(out)]) == 0
    assert out.is_file()
