"""The benchmark scripts of the real benchmarks at their smallest size, so they cannot rot: the rollout-cost
comparison and the side-by-side with the upstream τ² harness (its `tau2 run`, against the simulated endpoint)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import benchmark_rollout_cost, upstream_side_by_side
from eval_pipelines.inputs.paths import DATA_DIR_ENV


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One data folder for the module: the benchmarks are materialised once, as a sweep's data folder keeps them."""
    folder = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DATA_DIR_ENV, str(folder))
        yield folder


@pytest.mark.slow
def test_rollout_cost_measures_every_side_the_same_way(data_dir: Path, tmp_path: Path) -> None:
    benchmark_rollout_cost.main(["--rollouts", "1", "--in-process", "--out", str(tmp_path)])

    report = json.loads((tmp_path / "benchmark_rollout_cost.json").read_text())
    by_side = {r["side"]: r for r in report["results"]}
    assert set(by_side) == {"builtin", "bfcl", "tau2"}
    assert by_side["bfcl"]["scenario_id"].startswith("bfcl_multi_turn_base:")
    assert by_side["tau2"]["scenario_id"].startswith("tau2_airline:")
    for side in by_side.values():
        assert (side["rollouts"], side["passed"]) == (1, 1)  # the oracle passes each side's first task
        assert side["cpu_ms_per_rollout"] > 0 and side["bytes_per_rollout"] > 0
    # The upstream worker is found and named apart for the benchmarks; the built-in task has none.
    assert by_side["builtin"]["upstream_worker_cpu_ms_per_rollout"] == 0
    assert by_side["tau2"]["upstream_worker_cpu_ms_per_rollout"] > 0
    for side in ("bfcl", "tau2"):
        ours = by_side[side]
        assert ours["upstream_worker_cpu_ms_per_rollout"] <= ours["cpu_ms_per_rollout"]
        assert ours["cpu_vs_builtin"] == round(ours["cpu_ms_per_rollout"] / by_side["builtin"]["cpu_ms_per_rollout"], 2)
    assert "| tau2 | tau2_airline:" in (tmp_path / "benchmark_rollout_cost.md").read_text()


@pytest.mark.slow
def test_tau2_side_by_side_runs_upstream_and_our_sweep_on_the_same_endpoint(data_dir: Path, tmp_path: Path) -> None:
    upstream_side_by_side.main(["tau2", "--simulated", "--tasks", "0", "1", "--out", str(tmp_path)])

    report = json.loads((tmp_path / "upstream_side_by_side_tau2.json").read_text())
    assert report["task_ids"] == ["0", "1"]
    assert (report["agent_model"], report["user_model"]) == ("sim-oracle", "sim-user")
    # Upstream's own runner and our sweep each scored both tasks; the oracle with its simulated user passes both.
    for side in (report["upstream"], report["ours"]):
        assert (side["tasks"], side["rollouts"], side["score"]) == (2, 2, 1.0)
    assert report["per_task"] == {t: {"upstream": [True], "ours": [True]} for t in ("0", "1")}
    assert report["agreement"] == {"tasks_both": 2, "tasks_differing": []}
    assert report["ours"]["errors_left_out"] == {}
    assert "| upstream: tau2 run" in (tmp_path / "upstream_side_by_side_tau2.md").read_text()


def test_side_by_side_score_is_pass_hat_1_over_tasks_with_a_t_interval() -> None:
    # Task a: 1 of 2 trials, b: 2 of 2, c: 0 of 2 -> per-task shares 0.5, 1, 0 (τ²'s pass^1 averages them).
    result = upstream_side_by_side.score({"a": [True, False], "b": [True, True], "c": [False, False]})

    assert (result["tasks"], result["rollouts"], result["score"]) == (3, 6, 0.5)
    # t(0.975, 2) = 4.303, sd 0.5, n 3: a half-width of 1.24, clipped to [0, 1].
    assert (result["ci_low"], result["ci_high"]) == (0.0, 1.0)
    narrow = upstream_side_by_side.score({f"t{i}": [i % 4 != 0] for i in range(40)})
    # 30 of 40: sd 0.4385, t(0.975, 39) = 2.0227, half-width 0.1402.
    assert (narrow["score"], narrow["ci_low"], narrow["ci_high"]) == (0.75, 0.6098, 0.8902)


def test_side_by_side_names_tasks_whose_success_share_differs() -> None:
    ours = {"0": [True], "1": [False], "2": [True]}
    upstream = {"0": [True], "1": [True], "3": [False]}

    assert upstream_side_by_side.per_task_agreement(ours, upstream) == {"tasks_both": 2, "tasks_differing": ["1"]}
