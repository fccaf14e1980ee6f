"""The re-verification benchmark, at a small size: stored rollouts in, scores per partition out, both paths agree."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from benchmarks.reverify import main


def test_reverify_benchmark_scores_stored_rollouts(email_ops_root: Path, tmp_path: Path) -> None:
    work, out = tmp_path / "work", tmp_path / "results"
    main(["--rollouts", "90", "--scenarios-dir", str(email_ops_root), "--workdir", str(work), "--out", str(out)])

    report = json.loads((out / "reverify.json").read_text())
    assert report["rollouts"] == 90 and report["scenarios"] == ["email_ops:1.0.0"]
    assert sum(p["rollouts"] for p in report["partitions"]) == 90
    in_process, isolated = report["results"]["in_process"], report["results"]["isolated"]
    for result in (in_process, isolated):
        assert result["rollouts_verified"] == 90 and result["rollouts_per_second"] > 0 and result["peak_rss_mib"] > 0
    assert in_process["passed"] == isolated["passed"]
    assert "rollouts/s" in (out / "reverify.md").read_text()

    # The stored scores: the oracle-like partition passes everything, the no-op one nothing, from traces alone.
    rows = pq.read_table(work / "warehouse" / "verifications").to_pylist()
    by_model: dict[str, set[bool]] = {}
    for row in rows:
        by_model.setdefault(str(row["model"]), set()).add(row["success"])
    assert by_model == {"sim-oracle": {True}, "sim-noop": {False}, "sim-noisy": {True, False}}
    stored = {row["rollout_id"] for row in pq.read_table(work / "warehouse" / "rollouts").to_pylist()}
    assert len(stored) == 90 and sorted(row["rollout_id"] for row in rows) == sorted(stored)  # one verifier per task
