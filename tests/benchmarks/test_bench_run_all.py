"""run_all: one command runs the chosen benchmarks, each in its own process, and writes the combined summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.run_all import BENCHMARKS, main


def test_bench_run_all_writes_summary(tmp_path: Path) -> None:
    exit_code = main(["--quick", "--in-process", "--only", "memory", "--out", str(tmp_path)])

    assert exit_code == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "| memory | peak RSS" in summary and "## memory" in summary
    runs = json.loads((tmp_path / "run_all.json").read_text())["runs"]
    assert [(r["name"], r["exit_code"]) for r in runs] == [("memory", 0)]


@pytest.mark.slow
def test_bench_run_all_quick_runs_every_benchmark_in_fresh_processes(tmp_path: Path) -> None:
    exit_code = main(["--quick", "--out", str(tmp_path)])

    runs = json.loads((tmp_path / "run_all.json").read_text())["runs"]
    assert [r["name"] for r in runs] == list(BENCHMARKS)
    assert all(r["exit_code"] in (0, 1) for r in runs), runs  # 1 = a target missed at toy sizes, still reported
    assert exit_code in (0, 1)
    summary = (tmp_path / "summary.md").read_text()
    assert all(f"## {name}" in summary for name in BENCHMARKS)
