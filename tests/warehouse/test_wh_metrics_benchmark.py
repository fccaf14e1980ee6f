"""The scale benchmark runs end to end on a tiny shape: its generator writes files the catalog accepts, its
numbers match the generated outcomes, and it writes its JSON and Markdown results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "warehouse_scale.py"


def test_benchmark_runs_on_a_tiny_warehouse(tmp_path: Path) -> None:
    out, work = tmp_path / "results", tmp_path / "work"
    args = ["--scenarios", "2", "--tasks", "3", "--models", "2", "--rollouts", "4", "--repeats", "1"]
    subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--out", str(out), "--workdir", str(work)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads((out / "warehouse_scale.json").read_text(encoding="utf-8"))
    assert report["rollouts"] == 2 * 3 * 2 * 4 and report["verifications"] == 2 * report["rollouts"]
    assert {q["name"] for q in report["queries"]} == {
        "pass_rates",
        "scenario_model_metrics",
        "pass_at_k (k=1..8)",
        "model_comparison",
    }
    rows = {q["name"]: q["rows"] for q in report["queries"]}
    # 2 scenarios x 2 models; k = 1..4 (four rollouts per task); one ordered pair each way per scenario.
    assert rows == {"pass_rates": 4, "scenario_model_metrics": 4, "pass_at_k (k=1..8)": 16, "model_comparison": 4}
    assert all(len(q["samples_s"]) == 1 and q["median_s"] > 0 and q["median_cpu_s"] > 0 for q in report["queries"])
    assert report["query_peak_rss_mib"] > 0
    assert "| query | median s |" in (out / "warehouse_scale.md").read_text(encoding="utf-8")

    # The generated rewards obey the scoring rule: a rollout passes iff both verifiers pass and it completed.
    con = duckdb.connect(str(work / "eval.duckdb"), read_only=True)
    try:
        mismatches = con.execute(
            "select count(*) from rollout_scores s join rollouts r using (rollout_id) where s.reward <> r.reward"
        ).fetchone()
        assert con.execute("select count(*) from rollout_scores where reward is null").fetchone() == (0,)
    finally:
        con.close()
    assert mismatches == (0,)
