"""`model_comparison` paired by task and epoch: McNemar's exact p-value on the discordant epochs, the minimum
detectable difference and the epochs a 10-point difference needs, each against a closed form computed here
independently of the view's SQL (exact binomial sums with math.comb, normal quantiles from the standard library,
the epochs by searching k upwards)."""

from __future__ import annotations

import math
import statistics
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.schemas.sweep import DEFAULT_DETECTABLE_DIFFERENCE
from eval_pipelines.warehouse.catalog import connect_read_only
from eval_pipelines.warehouse.metrics.power import epochs_needed
from tests.reports.synthetic_warehouse import Attempt, build

SCENARIO = "scn:1.0.0"
#: z(0.975) + z(0.80), from the standard library's normal distribution.
FACTOR = statistics.NormalDist().inv_cdf(0.975) + statistics.NormalDist().inv_cdf(0.80)

#: task -> (model-a's verdicts by epoch, model-b's verdicts by epoch); 1 = passed.
DESIGN: dict[str, tuple[list[int], list[int]]] = {
    "t1": ([1, 1, 1, 1], [0, 0, 1, 0]),
    "t2": ([1, 0, 1, 1], [1, 0, 0, 0]),
    "t3": ([0, 0, 0, 0], [0, 0, 0, 0]),
    "t4": ([1, 1, 0, 1], [1, 1, 1, 1]),
    "t5": ([0, 1, 1, 0], [0, 0, 0, 1]),
    "t6": ([1, 1, 1, 1], [1, 1, 1, 1]),
}


def _attempts(design: dict[str, tuple[list[int], list[int]]]) -> list[Attempt]:
    attempts = []
    for task, verdicts in design.items():
        for model, outcomes in zip(("model-a", "model-b"), verdicts, strict=True):
            for epoch, passed in enumerate(outcomes):
                attempts.append(Attempt(task, "pass" if passed else "fail", model_name=model, epoch=epoch))
    return attempts


def _comparison(path: Path, a: str = "model-a", b: str = "model-b") -> dict[str, Any]:
    con = connect_read_only(path)
    try:
        cursor = con.execute("select * from model_comparison where model_a = ? and model_b = ?", [a, b])
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    finally:
        con.close()
    assert len(rows) == 1
    return dict(zip(names, rows[0], strict=True))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar: twice the smaller binomial tail of Binomial(b + c, 1/2), at most 1 (exact
    arithmetic)."""
    n = b + c
    tail = sum(Fraction(math.comb(n, i), 2**n) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), 2 * tail))


def _reference(design: dict[str, tuple[list[int], list[int]]]) -> dict[str, Any]:
    task_diffs, within, a_only, b_only = [], [], 0, 0
    for outcomes_a, outcomes_b in design.values():
        d = [x - y for x, y in zip(outcomes_a, outcomes_b, strict=True)]
        task_diffs.append(statistics.fmean(d))
        within.append(statistics.variance(d))
        a_only += d.count(1)
        b_only += d.count(-1)
    g = len(task_diffs)
    epochs = statistics.fmean(len(a) for a, _ in design.values())
    std_error = statistics.stdev(task_diffs) / math.sqrt(g)
    sigma2_within = statistics.fmean(within)
    sigma2_between = max(statistics.variance(task_diffs) - sigma2_within / epochs, 0.0)
    # The fewest epochs k with FACTOR * sqrt((between + within / k) / G) <= 10 points, by search.
    needed = next(
        (
            k
            for k in range(1, 100_000)
            if FACTOR * math.sqrt((sigma2_between + sigma2_within / k) / g) <= DEFAULT_DETECTABLE_DIFFERENCE
        ),
        None,
    )
    return {
        "n_tasks": g,
        "n_pairs": sum(len(a) for a, _ in design.values()),
        "a_only_passes": a_only,
        "b_only_passes": b_only,
        "mcnemar_p_value": mcnemar_exact(a_only, b_only),
        "mdd": FACTOR * std_error,
        "sigma2_within": sigma2_within,
        "sigma2_between": sigma2_between,
        "epochs_needed": needed,
    }


def test_paired_by_task_and_epoch_matches_closed_forms(tmp_path: Path) -> None:
    path = build(tmp_path, _attempts(DESIGN))
    row = _comparison(path)
    expected = _reference(DESIGN)
    # Hand count of the discordant epochs: a-only t1:3 t2:2 t5:2 = 7; b-only t4:1 t5:1 = 2.
    assert (
        (row["a_only_passes"], row["b_only_passes"]) == (7, 2) == (expected["a_only_passes"], expected["b_only_passes"])
    )
    # Hand-worked: 2 * (C(9,0) + C(9,1) + C(9,2)) / 2^9 = 2 * 46 / 512.
    assert row["mcnemar_p_value"] == pytest.approx(92 / 512, rel=1e-12)
    for column in ("n_tasks", "n_pairs", "epochs_needed"):
        assert row[column] == expected[column], column
    for column in ("mcnemar_p_value", "mdd", "sigma2_within", "sigma2_between"):
        assert row[column] == pytest.approx(expected[column], rel=1e-9, abs=1e-12), column
    assert row["epochs"] == 4
    # The mirrored row swaps the discordant counts and keeps the test and the sizes.
    mirror = _comparison(path, "model-b", "model-a")
    assert (mirror["a_only_passes"], mirror["b_only_passes"]) == (2, 7)
    for column in ("mcnemar_p_value", "mdd", "epochs_needed", "sigma2_within", "sigma2_between"):
        assert mirror[column] == row[column], column


def test_mcnemar_against_exact_binomial_for_many_counts() -> None:
    """The SQL's lgamma sum against exact fractions, over balanced, lopsided and large discordant counts."""
    import duckdb

    con = duckdb.connect()
    for b, c in [(0, 0), (0, 1), (1, 1), (0, 5), (3, 9), (10, 10), (2, 40), (150, 110), (400, 470)]:
        m, n = min(b, c), b + c
        sql = (
            "select least(1.0, 2 * sum(exp(lgamma(? + 1.0) - lgamma(i + 1.0) - lgamma(? - i + 1.0) - ? * ln(2.0)))) "
            "from (select unnest(range(? + 1)) as i)"
        )
        (value,) = con.execute(sql, [n, n, n, m]).fetchone()
        assert value == pytest.approx(mcnemar_exact(b, c), rel=1e-9, abs=1e-300), (b, c)


def test_epochs_only_pair_when_both_models_scored_them(tmp_path: Path) -> None:
    """An epoch one model did not score (an error: reward NULL) pairs with nothing; the task-level diff still
    uses every scored rollout."""
    attempts = [
        Attempt("t1", "pass", model_name="model-a", epoch=0),
        Attempt("t1", "pass", model_name="model-a", epoch=1),
        Attempt("t1", "fail", model_name="model-b", epoch=0),
        Attempt("t1", "unscored", model_name="model-b", epoch=1),
        Attempt("t2", "fail", model_name="model-a", epoch=0),
        Attempt("t2", "pass", model_name="model-b", epoch=0),
    ]
    row = _comparison(build(tmp_path, attempts))
    assert (row["n_tasks"], row["n_pairs"]) == (2, 2)
    assert (row["a_only_passes"], row["b_only_passes"]) == (1, 1)
    assert row["mcnemar_p_value"] == 1.0
    # One epoch per task: no within-task variance, so no epoch count can be computed.
    assert row["sigma2_within"] is None
    assert row["epochs_needed"] is None


def test_epochs_needed_python_matches_search() -> None:
    for between, within, g, delta in [(0.0, 0.2, 30, 0.1), (0.01, 0.3, 50, 0.1), (0.02, 0.25, 100, 0.05)]:
        expected = next((k for k in range(1, 100_000) if FACTOR * math.sqrt((between + within / k) / g) <= delta), None)
        assert epochs_needed(between, within, g, delta) == expected
    # The task-to-task variance alone exceeds the budget: no number of epochs is enough.
    assert epochs_needed(0.5, 0.2, 10, 0.1) is None
