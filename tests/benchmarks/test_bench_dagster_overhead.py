"""The Dagster-overhead benchmark at a tiny size: both paths run every partition of the same sweep."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.dagster_overhead import main


def test_bench_dagster_overhead_runs_both_paths(tmp_path: Path) -> None:
    exit_code = main(["--partitions", "1", "--sides", "direct", "dagster", "--in-process", "--out", str(tmp_path)])

    report = json.loads((tmp_path / "dagster_overhead.json").read_text())
    assert exit_code == 0
    for side in ("direct", "dagster"):
        assert report["results"][side]["partitions_succeeded"] == 1
        assert report["results"][side]["catalog_succeeded"] is True
    overhead = report["dagster_overhead"]
    assert overhead["wall_seconds"] == round(
        report["results"]["dagster"]["wall_seconds"] - report["results"]["direct"]["wall_seconds"], 3
    )
    assert "Dagster adds" in (tmp_path / "dagster_overhead.md").read_text()
