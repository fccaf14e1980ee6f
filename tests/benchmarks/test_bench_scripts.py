"""The benchmark scripts of the real benchmarks at their smallest size, so they cannot rot: the rollout-cost
comparison and the side-by-side with the upstream τ² harness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import benchmark_rollout_cost


@pytest.mark.slow
def test_rollout_cost_measures_every_side_the_same_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_PIPELINES_DATA_DIR", str(tmp_path / "data"))

    benchmark_rollout_cost.main(["--rollouts", "1", "--in-process", "--out", str(tmp_path / "out")])

    report = json.loads((tmp_path / "out" / "benchmark_rollout_cost.json").read_text())
    by_side = {r["side"]: r for r in report["results"]}
    assert set(by_side) == {"builtin", "bfcl", "tau2"}
    assert by_side["bfcl"]["scenario_id"].startswith("bfcl_multi_turn_base:")
    assert by_side["tau2"]["scenario_id"].startswith("tau2_airline:")
    for side in by_side.values():
        assert (side["rollouts"], side["passed"]) == (1, 1)  # the oracle passes each side's task
        assert side["cpu_ms_per_rollout"] > 0 and side["bytes_per_rollout"] > 0
    # The upstream worker is found and named apart for the benchmarks; the built-in task has none.
    assert by_side["builtin"]["upstream_worker_cpu_ms_per_rollout"] == 0
    assert by_side["tau2"]["upstream_worker_cpu_ms_per_rollout"] > 0
    for side in ("bfcl", "tau2"):
        ours = by_side[side]
        assert ours["upstream_worker_cpu_ms_per_rollout"] <= ours["cpu_ms_per_rollout"]
        assert ours["cpu_vs_builtin"] == round(ours["cpu_ms_per_rollout"] / by_side["builtin"]["cpu_ms_per_rollout"], 2)
    assert "| tau2 | tau2_airline:" in (tmp_path / "out" / "benchmark_rollout_cost.md").read_text()
