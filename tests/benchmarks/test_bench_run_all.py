"""run_all: one command runs the chosen benchmarks, each in its own process, and prints one side-by-side table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks._common import INSPECT_PYTHON
from benchmarks.run_all import BENCHMARKS, COLUMNS, main, side_by_side, side_by_side_markdown

HEADER = "| measure | ours | Inspect HTTP default | Inspect HTTP lean | Inspect mockllm lean |"


def _medians(rate: float, cpu_ms: float, written: int) -> dict[str, Any]:
    return {"rollouts_per_second": rate, "cpu_ms_per_rollout": cpu_ms, "bytes_per_rollout": written}


def _inspect_settings(model: str, eval_args: dict[str, Any], display: str) -> dict[str, Any]:
    resolved = {"display": display, "stdout_is_tty": False, "log_realtime": not eval_args, "log_format": "eval"}
    return {"model": model, "version": "0.3.285", "eval_args": eval_args, "resolved": resolved}


def test_bench_run_all_side_by_side_has_every_row_and_column() -> None:
    lean = {"log_realtime": False, "display": "none", "ctl_server": False, "score_display": False}
    overhead = {
        "max_parallel": 10,
        "skipped": {},
        "comparisons": [
            {
                "samples": 200,
                "epochs": 1,
                "medians": {
                    "ours": _medians(60.0, 20.0, 50_000),
                    "inspect-openai": _medians(7.5, 130.0, 15_000),
                    "inspect-openai-lean": _medians(10.0, 100.0, 15_000),
                    "inspect-mockllm-lean": _medians(20.0, 50.0, 14_000),
                },
                "ours_vs": {
                    "inspect-openai": {"throughput": 8.0, "cpu_per_rollout": 6.5},
                    "inspect-openai-lean": {"throughput": 6.0, "cpu_per_rollout": 5.0},
                    "inspect-mockllm-lean": {
                        "throughput": 3.0,
                        "cpu_per_rollout": 2.5,
                        "throughput_spread": {"min": 2.8, "median": 3.0, "max": 3.4},
                        "cpu_per_rollout_spread": {"min": 2.1, "median": 2.5, "max": 2.6},
                    },
                },
            }
        ],
        "settings": {
            "ours": {"model": "sim-oracle over HTTP", "max_parallel": 10},
            "inspect-openai": _inspect_settings("openai-api/bench/sim-oracle", {}, "full"),
            "inspect-openai-lean": _inspect_settings("openai-api/bench/sim-oracle", lean, "none"),
            "inspect-mockllm-lean": _inspect_settings("mockllm/model", lean, "none"),
        },
    }
    latency = {"latency_seconds": 0.2, "results": [{"concurrency": c, "fraction_of_ideal": 0.9} for c in (10, 50)]}
    memory = {"results": [{"rollouts": 1_000, "peak_rss_mib": 200.0}, {"rollouts": 10_000, "peak_rss_mib": 300.0}]}
    reverify = {"rollouts": 10_000, "results": {"isolated": {"rollouts_per_second": 900.0}}}

    table = side_by_side({"overhead": overhead, "latency_hiding": latency, "memory": memory, "reverify": reverify})
    text = side_by_side_markdown(table, quick=False)

    assert HEADER in text
    cells = {row["measure"]: row["cells"] for row in table["rows"]}
    assert cells["rollouts/s, 200 x 1"]["inspect-openai-lean"] == "10.0 (ours 6.0x)"
    assert cells["CPU-ms per rollout (process; endpoint apart), 200 x 1"]["inspect-openai"] == "130.0 (6.5x ours)"
    # With per-pair ratios in the report, their spread goes beside the median.
    assert cells["rollouts/s, 200 x 1"]["inspect-mockllm-lean"] == "20.0 (ours 3.0x [2.8-3.4])"
    cpu_cells = cells["CPU-ms per rollout (process; endpoint apart), 200 x 1"]
    assert cpu_cells["inspect-mockllm-lean"] == "50.0 (2.5x [2.1-2.6] ours)"
    assert cells["bytes written per rollout (ours: data folder; Inspect: its .eval log), 200 x 1"]["ours"] == "50,000"
    assert "eval() defaults" in cells["settings"]["inspect-openai"]
    assert "full (rich: stdout not a TTY)" in cells["settings"]["inspect-openai"]
    assert "set: log_realtime, display, ctl_server, score_display" in cells["settings"]["inspect-mockllm-lean"]
    assert cells["latency hiding: % of ideal at concurrency 10 / 50 (200 ms per model call)"]["ours"] == "90% / 90%"
    assert cells["peak RSS MiB at 1,000 / 10,000 rollouts"]["ours"] == "200.0 / 300.0"
    assert cells["re-verify rollouts/s (10,000 stored rollouts)"] == {
        "ours": "isolated 900.0",
        **{side: "not measured" for side in COLUMNS[1:]},
    }


def test_bench_run_all_writes_summary(tmp_path: Path) -> None:
    exit_code = main(["--quick", "--in-process", "--only", "memory", "--out", str(tmp_path)])

    assert exit_code == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "| memory | peak RSS" in summary and "## memory" in summary
    assert HEADER in summary and "| peak RSS MiB at 10 / 30 rollouts |" in summary
    assert "| rollouts/s vs Inspect | not run |" in summary  # overhead was not selected
    record = json.loads((tmp_path / "run_all.json").read_text())
    assert [(r["name"], r["exit_code"]) for r in record["runs"]] == [("memory", 0)]
    assert record["quick"] is True and record["side_by_side"]["rows"]


@pytest.mark.slow
def test_bench_run_all_quick_runs_every_benchmark_in_fresh_processes(tmp_path: Path) -> None:
    exit_code = main(["--quick", "--out", str(tmp_path)])

    record = json.loads((tmp_path / "run_all.json").read_text())
    runs = record["runs"]
    assert [r["name"] for r in runs] == list(BENCHMARKS)
    assert all(r["exit_code"] in (0, 1) for r in runs), runs  # 1 = a target missed at toy sizes, still reported
    assert exit_code in (0, 1)
    summary = (tmp_path / "summary.md").read_text()
    assert all(f"## {name}" in summary for name in BENCHMARKS)
    assert HEADER in summary
    cells = {row["measure"]: row["cells"] for row in record["side_by_side"]["rows"]}
    assert cells["rollouts/s, 10 x 1"]["ours"] != "not run"
    assert "latency hiding: % of ideal at concurrency 5 (50 ms per model call)" in cells
    assert "re-verify rollouts/s (100 stored rollouts)" in cells
    if INSPECT_PYTHON.is_file():  # CI installs it (.ci/run), so every Inspect column is measured there
        assert all("(ours " in cells["rollouts/s, 4 x 2"][side] for side in COLUMNS[1:])
