"""`verifier_version_pass_rates`: one row per verification pass, scored by `rollout_scores`' rule applied to that
pass's verdicts (errors out of n, an unfinished agent failing in every pass, a rollout the pass skipped unscored)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from eval_pipelines.warehouse.catalog import build_catalog, connect_read_only
from eval_pipelines.warehouse.rows import rows_table
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import ROLLOUTS, VERIFICATIONS

SWEEP, SCENARIO, SCENARIO_KEY, MODEL = "s1", "scn:1.0.0", "scn_1.0.0", "m"
PASS_1 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PASS_2 = PASS_1 + timedelta(days=1)
RUBRIC_AT = PASS_1 + timedelta(hours=1)


def _rollout(rollout_id: str, status: str = "completed", error_class: str | None = None) -> dict[str, Any]:
    return {
        "sweep_id": SWEEP,
        "run_id": "run-1",
        "run_name": "run-1",
        "rollout_id": rollout_id,
        "rollout_index": 0,
        "scenario_id": SCENARIO,
        "task_id": f"task-{rollout_id}",
        "model_name": MODEL,
        "is_simulated": True,
        "max_steps": 10,
        "status": status,
        "termination_reason": "final_response" if status == "completed" else None,
        "error_class": error_class,
    }


def _verdict(
    rollout_id: str, at: datetime, verifier: str, version: str, *, ok: bool = True, error: bool = False
) -> dict[str, Any]:
    return {
        "sweep_id": SWEEP,
        "run_id": "run-1",
        "rollout_id": rollout_id,
        "scenario_id": SCENARIO,
        "task_id": f"task-{rollout_id}",
        "model_name": MODEL,
        "verifier": verifier,
        "verifier_version": version,
        "kind": "rubric" if verifier == "judge" else "programmatic",
        "success": ok and not error,
        "is_error": error,
        "reward": 1.0 if ok and not error else 0.0,
        "message": "",
        "output_json": '""',
        "verified_at": at,
    }


def _both(
    rollout_id: str, at: datetime, b_version: str, *, a_ok: bool = True, b_ok: bool = True
) -> list[dict[str, Any]]:
    return [_verdict(rollout_id, at, "a", "h1", ok=a_ok), _verdict(rollout_id, at, "b", b_version, ok=b_ok)]


def test_each_pass_is_scored_on_its_own_verdicts(tmp_path: Path) -> None:
    rollouts = [
        _rollout("passes-then-fails"),
        _rollout("verifier-error-then-passes"),
        _rollout("agent-did-not-finish", status="failed"),
        _rollout("model-endpoint-error", error_class="model_endpoint"),
        _rollout("still-running", status="running"),
        _rollout("only-in-pass-1"),
        _rollout("judged-only"),
    ]
    verdicts = [
        *_both("passes-then-fails", PASS_1, "h1"),
        *_both("passes-then-fails", PASS_2, "h2", b_ok=False),
        _verdict("verifier-error-then-passes", PASS_1, "a", "h1"),
        _verdict("verifier-error-then-passes", PASS_1, "b", "h1", error=True),
        *_both("verifier-error-then-passes", PASS_2, "h2"),
        *_both("agent-did-not-finish", PASS_1, "h1"),
        *_both("agent-did-not-finish", PASS_2, "h2"),
        *_both("only-in-pass-1", PASS_1, "h1"),
        _verdict("judged-only", RUBRIC_AT, "judge", "j1"),
    ]
    warehouse = Warehouse(tmp_path / "warehouse")
    for table, rows, spec in (
        ("rollouts", rollouts, ROLLOUTS),
        ("verifications", verdicts, VERIFICATIONS),
    ):
        warehouse.write(table, rows_table(spec, rows), model_key=MODEL, scenario_key=SCENARIO_KEY, file_stem="x")
    db = build_catalog(warehouse.root, tmp_path / "eval.duckdb").path

    con = connect_read_only(db)
    try:
        passes = con.execute(
            "select verified_at, verifier_versions, n, passes, pass_rate, n_errors, n_unscored "
            "from verifier_version_pass_rates order by verified_at"
        ).fetchall()
    finally:
        con.close()
    assert [(at.astimezone(UTC), *rest) for at, *rest in passes] == [
        # passes: passes-then-fails, only-in-pass-1; fails: agent-did-not-finish; errors: the verifier error and
        # the model endpoint; unscored: still-running, judged-only
        (PASS_1, ["a=h1", "b=h1"], 3, 2, 2 / 3, 2, 2),
        # passes: verifier-error-then-passes; fails: passes-then-fails, agent-did-not-finish; unscored: the pass
        # skipped only-in-pass-1
        (PASS_2, ["a=h1", "b=h2"], 3, 1, 1 / 3, 1, 3),
    ]
