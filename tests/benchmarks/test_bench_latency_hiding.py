"""The latency-hiding benchmark at a tiny size: the sleeping endpoint bounds throughput by the ideal."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.latency_hiding import main


def test_bench_latency_hiding_stays_under_the_ideal(tmp_path: Path) -> None:
    main(["--concurrency", "4", "--waves", "1", "--latency", "0.05", "--in-process", "--out", str(tmp_path)])

    report = json.loads((tmp_path / "latency_hiding.json").read_text())
    (result,) = report["results"]
    assert result["rollouts"] == 20 and result["passed"] == 20
    assert result["ideal_rollouts_per_second"] == round(4 / (6 * 0.05), 2)
    # Every rollout makes 6 calls that each sleep 50 ms, so no run can beat the ideal.
    assert 0 < result["fraction_of_ideal"] <= 1.0
    assert result["end_to_end_fraction_of_ideal"] <= result["fraction_of_ideal"]
    assert report["meets_target"] is None  # concurrency 50 was not measured
    assert "| 4 | 20 |" in (tmp_path / "latency_hiding.md").read_text()
