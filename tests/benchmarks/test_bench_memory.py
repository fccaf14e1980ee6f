"""The memory benchmark at a tiny size: each size runs in its own process and reports its RSS curve."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.memory import RssSampler, main

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_bench_memory_reports_peak_rss_per_size(tmp_path: Path) -> None:
    main(["--sizes", "30", "10", "--in-process", "--out", str(tmp_path)])

    report = json.loads((tmp_path / "memory.json").read_text())
    assert [r["rollouts"] for r in report["results"]] == [10, 30]  # sorted, and exactly the requested counts
    for result in report["results"]:
        assert result["passed"] == result["rollouts"]
        assert 0 < result["rss_before_mib"] <= result["peak_rss_mib"]
        assert result["data_mib"] > 0
        # The service's verifier worker outlives the run and is counted at every size, by its own peak.
        assert 0 < result["workers_peak_rss_mib"] < result["runner_peak_rss_mib"]
        parts = result["runner_peak_rss_mib"] + result["tool_host_peak_rss_mib"] + result["workers_peak_rss_mib"]
        assert abs(result["peak_rss_mib"] - parts) < 0.2
    small, large = (r["peak_rss_mib"] for r in report["results"])
    assert report["growth"] == round(large / small - 1, 3)
    assert report["meets_target"] == (large < 1024 and large <= 1.1 * small)
    assert "| 30 |" in (tmp_path / "memory.md").read_text()


def test_rss_sampler_counts_a_live_worker_by_its_own_peak_not_its_parents_pages() -> None:
    # Resident in this process when the workers fork off: a fork-then-exec'd child's RUSAGE_CHILDREN figure
    # would include these pages, its own VmHWM does not.
    ballast = b"\x01" * (128 * 2**20)
    worker, counted_apart = subprocess.Popen(SLEEPER), subprocess.Popen(SLEEPER)
    try:
        with RssSampler({counted_apart.pid}) as sampler:
            pass
    finally:
        for process in (worker, counted_apart):
            process.kill()
            process.wait()
    del ballast

    assert counted_apart.pid not in sampler.worker_peaks
    assert 0 < sampler.worker_peaks[worker.pid] < 64
    assert sampler.workers_peak_mib() == round(sum(sampler.worker_peaks.values()), 1)
