"""The overhead benchmark at a tiny size: both sides complete and pass every rollout, and the report adds up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks._common import INSPECT_PYTHON
from benchmarks.overhead import main


def test_bench_overhead_ours_runs_and_reports(tmp_path: Path) -> None:
    main(["--sizes", "4x1", "2x2", "--sides", "ours", "--in-process", "--out", str(tmp_path)])

    report = json.loads((tmp_path / "overhead.json").read_text())
    assert [(c["samples"], c["epochs"]) for c in report["comparisons"]] == [(4, 1), (2, 2)]
    for comparison in report["comparisons"]:
        ours = comparison["medians"]["ours"]
        assert ours["rollouts"] == 4 and ours["passed"] == 4  # sim-oracle replays the reference: all pass
        assert ours["rollouts_per_second"] > 0 and ours["cpu_ms_per_rollout"] > 0
        assert ours["endpoint_cpu_ms_per_rollout"] >= 0
    (measurement,) = [m for m in report["measurements"] if (m["samples"], m["epochs"]) == (2, 2)]
    assert measurement["status"] == {"completed": 4}
    assert measurement["artifact_bytes"] > 0  # artifacts, traces and Parquet were written
    assert report["meets_target"] is False  # no Inspect side ran, so there is no ratio to meet
    assert "| 4 x 1 | ours |" in (tmp_path / "overhead.md").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not INSPECT_PYTHON.is_file(), reason="benchmarks/.venv-inspect (inspect-ai) is not installed")
def test_bench_overhead_inspect_sides_score_the_same_task(tmp_path: Path) -> None:
    main(["--sizes", "3x1", "--out", str(tmp_path)])

    report = json.loads((tmp_path / "overhead.json").read_text())
    (comparison,) = report["comparisons"]
    assert set(comparison["medians"]) == {"ours", "inspect-openai", "inspect-mockllm"}
    for side in comparison["medians"].values():
        assert side["rollouts"] == 3 and side["passed"] == 3  # the same verifier passes the same replayed actions
    assert set(comparison["ours_vs"]) == {"inspect-openai", "inspect-mockllm"}
    calls = {m["side"]: m["endpoint_chat_completions"] for m in report["measurements"]}
    # Both HTTP sides called the shared endpoint 6 times per rollout (5 tool calls + the answer), warm-up of 2
    # included; Inspect's mockllm side never did.
    assert calls == {"ours": 6 * (3 + 2), "inspect-openai": 6 * (3 + 2), "inspect-mockllm": 0}
