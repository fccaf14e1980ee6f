"""The memory benchmark at a tiny size: each size runs in its own process and reports its RSS curve."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.memory import main


def test_bench_memory_reports_peak_rss_per_size(tmp_path: Path) -> None:
    main(["--sizes", "30", "10", "--in-process", "--out", str(tmp_path)])

    report = json.loads((tmp_path / "memory.json").read_text())
    assert [r["rollouts"] for r in report["results"]] == [10, 30]  # sorted, and exactly the requested counts
    for result in report["results"]:
        assert result["passed"] == result["rollouts"]
        assert 0 < result["rss_before_mib"] <= result["peak_rss_mib"]
        assert result["data_mib"] > 0
    small, large = (r["peak_rss_mib"] for r in report["results"])
    assert report["growth"] == round(large / small - 1, 3)
    assert report["meets_target"] == (large < 1024 and large <= 1.1 * small)
    assert "| 30 |" in (tmp_path / "memory.md").read_text()
