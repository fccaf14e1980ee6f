"""A warehouse whose judges disagree with the verifiers on known rollouts, for the calibration view, the viewer and
the report. Rollouts come from the report tests' synthetic writer; judge verdicts are written as a sweep writes
them: `judgements` rows (quality, safety) and `verifications` rows of kind rubric."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.rows import build_table, rows_table
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import JUDGEMENTS, VERIFICATIONS
from tests.reports.synthetic_warehouse import T0, Attempt, attempts_with, scenario_key, write_warehouse

SWEEP = "calib-1"
EMAIL = "email_ops:1.0.0"
CALENDAR = "calendar:2.0.0"
MODELS = ("model-a", "model-b")
QUALITY = ("veritas-quality", "veritas")
SAFETY = ("guard-safety", "collinear_guard")
RUBRIC = ("rubric_judge", "judge-m")
#: Rollouts (model, index) each judge gets wrong in EMAIL; index i of a model: task t0 holds 0-4, t1 5-9, each
#: task's first three pass. Index 10 is a rollout the agent did not finish (it scores 0, a verifier fail) and
#: index 11 is never verified (it has no score and may not count).
QUALITY_WRONG = {("model-a", 0), ("model-a", 3), ("model-b", 5), ("model-b", 8), ("model-b", 9)}
RUBRIC_WRONG = {("model-a", 4)}
#: The rubric judge's own failure (verdict ERROR) on this rollout: left out, not a disagreement.
RUBRIC_ERROR = ("model-b", 0)
ERRORED, UNSCORED = 10, 11


def rollout_id(model: str, scenario: str, index: int) -> str:
    """The synthetic writer's rollout ids."""
    return f"{SWEEP}-{model}-{scenario_key(scenario)}-{index}"


@dataclass(frozen=True)
class Judged:
    """One judge verdict and what the verifiers said (None: not scored)."""

    rollout_id: str
    model: str
    scenario: str
    judge_kind: str
    judge_pass: bool
    verifier_pass: bool | None


def _attempts() -> list[Attempt]:
    attempts: list[Attempt] = []
    for model in MODELS:
        attempts += attempts_with({"t0": (5, 3), "t1": (5, 3)}, model_name=model, scenario_id=EMAIL, sweep_id=SWEEP)
        attempts.append(Attempt("t0", "error", model_name=model, scenario_id=EMAIL, sweep_id=SWEEP))
        attempts.append(Attempt("t1", "unscored", model_name=model, scenario_id=EMAIL, sweep_id=SWEEP))
    # A scenario the verifiers pass every time: no judge can be calibrated there.
    attempts += attempts_with({"t0": (4, 4)}, model_name="model-a", scenario_id=CALENDAR, sweep_id=SWEEP)
    return attempts


def _verifier_pass(attempt: Attempt) -> bool | None:
    return {"pass": True, "fail": False, "error": False}.get(attempt.outcome)


def judged_rows(attempts: list[Attempt]) -> list[Judged]:
    """Every judge verdict the warehouse holds (the latest of each), with the verifiers' verdict beside it."""
    judged: list[Judged] = []
    index: dict[tuple[str, str], int] = {}
    for attempt in attempts:
        key = (attempt.model_name, attempt.scenario_id)
        i = index[key] = index.get(key, -1) + 1
        rid = rollout_id(attempt.model_name, attempt.scenario_id, i)
        truth = _verifier_pass(attempt)
        # Where nothing is scored the judges still judge (as the platform does): those rows must not count.
        stand_in = truth if truth is not None else True
        where = (attempt.model_name, i) if attempt.scenario_id == EMAIL else None
        judged.append(
            Judged(rid, attempt.model_name, attempt.scenario_id, "quality", stand_in != (where in QUALITY_WRONG), truth)
        )
        judged.append(Judged(rid, attempt.model_name, attempt.scenario_id, "safety", stand_in, truth))
        if where != RUBRIC_ERROR:
            judged.append(
                Judged(
                    rid, attempt.model_name, attempt.scenario_id, "rubric", stand_in != (where in RUBRIC_WRONG), truth
                )
            )
    return judged


def _judgement_columns(rows: Iterable[Judged], attempt_time: Any) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {name: [] for name in JUDGEMENTS.column_names}
    for row in rows:
        judge, model = QUALITY if row.judge_kind == "quality" else SAFETY
        # Quality: high is good. Safety: a high score is a flag, the judge's "fail".
        passing, failing = (8.0, 3.0) if row.judge_kind == "quality" else (2.0, 9.0)
        score = passing if row.judge_pass else failing
        values = {
            "sweep_id": SWEEP,
            "rollout_id": row.rollout_id,
            "scenario_id": row.scenario,
            "task_id": "t0",
            "model_name": row.model,
            "judge": judge,
            "judge_id": f"id-{judge}",
            "judge_kind": row.judge_kind,
            "judge_model": model,
            "score": score,
            "category": None,
            "rationale": "[simulated] synthetic",
            "ground_truth": None,
            "dataset_id": None,
            "judged_at": attempt_time,
        }
        for name, value in values.items():
            columns[name].append(value)
    return columns


def _rubric_rows(rows: Iterable[Judged]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        out.append(
            {
                "sweep_id": SWEEP,
                "run_id": "run-rubric",
                "rollout_id": row.rollout_id,
                "scenario_id": row.scenario,
                "task_id": "t0",
                "model_name": row.model,
                "verifier": RUBRIC[0],
                "verifier_version": "j1",
                "kind": "rubric",
                "success": row.judge_pass,
                "reward": 0.9 if row.judge_pass else 0.2,
                "message": "",
                "output_json": json.dumps({"model": RUBRIC[1], "verdict": "PASS" if row.judge_pass else "FAIL"}),
                "verified_at": T0 + timedelta(hours=1),
            }
        )
    return out


def build_calibration_catalog(tmp_path: Path) -> tuple[Path, list[Judged]]:
    """The catalog, and every latest judge verdict written (scored or not)."""
    root = tmp_path / "calibration-warehouse"
    attempts = _attempts()
    write_warehouse(root, attempts)
    judged = judged_rows(attempts)
    warehouse = Warehouse(root)
    for model in MODELS:
        for scenario in (EMAIL, CALENDAR):
            mine = [j for j in judged if j.model == model and j.scenario == scenario]
            if not mine:
                continue
            key = scenario_key(scenario)
            platform = [j for j in mine if j.judge_kind != "rubric"]
            latest = _judgement_columns(platform, T0 + timedelta(hours=2))
            # An older judging of the first rollout that says the opposite: superseded by the latest.
            older = _judgement_columns(
                [
                    Judged(j.rollout_id, j.model, j.scenario, j.judge_kind, not j.judge_pass, j.verifier_pass)
                    for j in platform[:2]
                ],
                T0 + timedelta(hours=1),
            )
            warehouse.write(
                "judgements", build_table(JUDGEMENTS, latest), model_key=model, scenario_key=key, file_stem="latest"
            )
            warehouse.write(
                "judgements", build_table(JUDGEMENTS, older), model_key=model, scenario_key=key, file_stem="older"
            )
            rubric = _rubric_rows(j for j in mine if j.judge_kind == "rubric")
            if scenario == EMAIL and model == RUBRIC_ERROR[0]:
                errored = _rubric_rows(
                    [Judged(rollout_id(model, EMAIL, RUBRIC_ERROR[1]), model, EMAIL, "rubric", False, None)]
                )
                errored[0]["output_json"] = json.dumps({"model": RUBRIC[1], "verdict": "ERROR"})
                rubric += errored
            warehouse.write(
                "verifications",
                rows_table(VERIFICATIONS, rubric),
                model_key=model,
                scenario_key=key,
                file_stem="rubric",
            )
    return build_catalog(root, tmp_path / "calibration.duckdb").path, judged
