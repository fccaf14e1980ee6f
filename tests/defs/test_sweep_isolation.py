"""A sweep touches only its own rows: a second sweep over the same model x scenario, judged and rubric-judged,
leaves the first sweep's judgements and rubric verdicts byte for byte as they were; re-running its assessment
uploads nothing new and creates no judge.

Both sweeps run the real assets in one ephemeral Dagster instance on one data dir, as two sweep ids would.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb

from eval_pipelines.definitions import assets_by_name
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from eval_pipelines.platform.config import platform_store_path
from eval_pipelines.warehouse.catalog import build_catalog

SWEEP = """
name: iso
scenarios: ["email_ops:1.0.0"]
task_ids: [email_ops_001, email_ops_002]
models:
  - {name: sim-noisy, model: sim-noisy, base_url: "sim://local"}
rollout_count: 2
rubric_judge: {name: sim-judge, model: sim-judge, base_url: "sim://local"}
"""
STEPS = ("eval_run", "rollouts", "verification", "rubric_verification", "assessment_dataset", "judgements")
PARTITION = partition_of("sim-noisy", "email_ops:1.0.0")
PART = Path("model=sim-noisy") / "scenario=email_ops_1.0.0"


def _hashes(folder: Path, marker: str) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob(f"*{marker}*.parquet")}


def _rows(db: Path, sql: str, sweep_id: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return sorted(con.execute(sql, [sweep_id]).fetchall())
    finally:
        con.close()


def _platform_counts(data: Path) -> tuple[int, int]:
    con = sqlite3.connect(platform_store_path(data))
    try:
        return (
            con.execute("select count(*) from datasets").fetchone()[0],
            con.execute("select count(*) from judges").fetchone()[0],
        )
    finally:
        con.close()


def test_a_second_sweep_leaves_the_first_sweeps_verdicts_as_they_were(tmp_path: Path) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "iso.yaml").write_text(SWEEP)
    data = tmp_path / "data"
    resources = {
        "paths": EvalPaths(data_dir=str(data), sweeps_dir=str(sweeps)),
        "eval_service": EvalService(data_dir=str(data)),
        "assessment_platform": AssessmentPlatform(data_dir=str(data)),
    }
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(MODELS.name or "", ["sim-noisy"])
    instance.add_dynamic_partitions(SCENARIOS.name or "", ["email_ops:1.0.0"])
    assets = assets_by_name()
    steps = [assets[k] for k in STEPS]

    def sweep(sweep_id: str) -> None:
        result = dg.materialize(
            steps,
            partition_key=PARTITION,
            instance=instance,
            resources=resources,
            tags={SWEEP_TAG: "iso", SWEEP_ID_TAG: sweep_id},
        )
        assert result.success

    sweep("iso-1")
    judgements, verifications = data / "warehouse" / "judgements" / PART, data / "warehouse" / "verifications" / PART
    first_judgements = _hashes(judgements, "iso-1")
    first_rubric = _hashes(verifications, "rubric")
    assert first_judgements and first_rubric
    db = build_catalog(data / "warehouse", tmp_path / "before.duckdb").path
    judged_sql = "select rollout_id, judge_kind, score, rationale, judged_at from judgements where sweep_id = ?"
    rubric_sql = (
        "select rollout_id, verifier_version, success, verified_at from verifications"
        " where kind = 'rubric' and sweep_id = ?"
    )
    before = (_rows(db, judged_sql, "iso-1"), _rows(db, rubric_sql, "iso-1"))
    datasets, judges = _platform_counts(data)
    assert (datasets, judges) == (1, 2)

    sweep("iso-2")
    assert _hashes(judgements, "iso-1") == first_judgements
    assert {k: v for k, v in _hashes(verifications, "rubric").items() if k in first_rubric} == first_rubric
    db = build_catalog(data / "warehouse", tmp_path / "after.duckdb").path
    assert (_rows(db, judged_sql, "iso-1"), _rows(db, rubric_sql, "iso-1")) == before
    second = _rows(db, "select distinct rollout_id from judgements where sweep_id = ?", "iso-2")
    assert len(second) == 4  # 2 tasks x rollout_count 2, judged once each per judge kind
    assert _rows(db, "select dataset_id from judgements where sweep_id = ? group by all", "iso-2") != _rows(
        db, "select dataset_id from judgements where sweep_id = ? group by all", "iso-1"
    )
    assert _platform_counts(data) == (2, 2)  # one dataset per sweep; the judges are reused

    # Re-running the second sweep's assessment is idempotent on the platform.
    again = dg.materialize(
        [assets["assessment_dataset"], assets["judgements"]],
        partition_key=PARTITION,
        instance=instance,
        resources=resources,
        tags={SWEEP_TAG: "iso", SWEEP_ID_TAG: "iso-2"},
    )
    assert again.success
    assert _platform_counts(data) == (2, 2)
    assert _hashes(judgements, "iso-1") == first_judgements
