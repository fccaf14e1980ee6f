"""pass@k and pass^k in the catalog against exact rational arithmetic (math.comb + Fraction) and hand-worked
numbers, including n < k, all-pass and all-fail tasks."""

from __future__ import annotations

import random
from collections import defaultdict
from fractions import Fraction
from math import comb
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.warehouse.catalog import connect_read_only
from tests.reports.synthetic_warehouse import Attempt, attempts_with, build


def _rows(db: Path, sql: str) -> list[dict[str, Any]]:
    con = connect_read_only(db)
    try:
        cursor = con.execute(sql)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def exact_pass_hat_k(n: int, c: int, k: int) -> Fraction:
    return Fraction(comb(c, k), comb(n, k))


def test_hand_worked_pass_at_k_and_pass_hat_k(tmp_path: Path) -> None:
    attempts = [
        *attempts_with({"all-pass": (4, 4), "all-fail": (4, 0), "half": (4, 2)}, model_name="m"),
        # Two scored rollouts only: no unbiased estimate for k = 3 or 4.
        *attempts_with({"short": (2, 1)}, model_name="m"),
        # Neither the unscored nor the failed-status rollout changes n and c the way a naive count would.
        Attempt("short", "unscored", model_name="m"),
        Attempt("all-fail", "error", model_name="m"),
    ]
    db = build(tmp_path, attempts)
    tasks = {(r["task_id"], r["k"]): r for r in _rows(db, "select * from task_pass_at_k")}
    agg = {r["k"]: r for r in _rows(db, "select * from pass_at_k")}

    # half: n = 4, c = 2. pass@2 = 1 - C(2,2)/C(4,2) = 1 - 1/6; pass^2 = C(2,2)/C(4,2) = 1/6;
    # pass@3 = 1 - 0 (only 2 failures: any 3 include a pass); pass^3 = 0.
    assert tasks[("half", 1)]["pass_at_k"] == pytest.approx(0.5)
    assert tasks[("half", 1)]["pass_hat_k"] == pytest.approx(0.5)
    assert tasks[("half", 2)]["pass_at_k"] == pytest.approx(5 / 6)
    assert tasks[("half", 2)]["pass_hat_k"] == pytest.approx(1 / 6)
    assert (tasks[("half", 3)]["pass_at_k"], tasks[("half", 3)]["pass_hat_k"]) == (1.0, 0.0)
    # all-fail picked up the failed-status rollout: n = 5, c = 0.
    assert tasks[("all-fail", 5)]["n"] == 5
    for k in range(1, 5):
        assert (tasks[("all-pass", k)]["pass_at_k"], tasks[("all-pass", k)]["pass_hat_k"]) == (1.0, 1.0)
        assert (tasks[("all-fail", k)]["pass_at_k"], tasks[("all-fail", k)]["pass_hat_k"]) == (0.0, 0.0)
    assert ("short", 3) not in tasks and tasks[("short", 2)]["n"] == 2

    # k = 2 averages all four tasks: pass@2 = (1 + 0 + 5/6 + 1) / 4, pass^2 = (1 + 0 + 1/6 + 0) / 4.
    assert (agg[2]["n_tasks"], agg[2]["n_tasks_excluded"]) == (4, 0)
    assert agg[2]["pass_at_k"] == pytest.approx((1 + 0 + 5 / 6 + 1) / 4)
    assert agg[2]["pass_hat_k"] == pytest.approx((1 + 0 + 1 / 6 + 0) / 4)
    # k = 3: `short` (n = 2) is excluded, so the average is over three tasks.
    assert (agg[3]["n_tasks"], agg[3]["n_tasks_excluded"]) == (3, 1)
    assert agg[3]["pass_at_k"] == pytest.approx((1 + 0 + 1) / 3)
    assert agg[3]["pass_hat_k"] == pytest.approx((1 + 0 + 0) / 3)
    # k = 5 only all-fail has 5 scored rollouts; k stops at the largest n.
    assert (agg[5]["n_tasks"], agg[5]["n_tasks_excluded"]) == (1, 3)
    assert max(agg) == 5


def test_random_tasks_match_exact_fractions(tmp_path: Path) -> None:
    rng = random.Random(7)
    counts: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}
    attempts = []
    for scenario in ("alpha:1", "beta:2"):
        for model in ("m1", "m2", "m3"):
            tasks = {}
            for t in range(rng.randint(3, 7)):
                n = rng.randint(1, 12)
                tasks[f"t{t}"] = (n, rng.choice([0, n, rng.randint(0, n)]))
            counts[(scenario, model)] = tasks
            attempts += attempts_with(tasks, model_name=model, scenario_id=scenario)
    db = build(tmp_path, attempts)

    for row in _rows(db, "select * from task_pass_at_k"):
        n, c = counts[(row["scenario_id"], row["model_name"])][row["task_id"]]
        assert (row["n"], row["passes"]) == (n, c)
        assert row["pass_at_k"] == pytest.approx(float(exact_pass_at_k(n, c, row["k"])), rel=1e-12, abs=1e-14)
        assert row["pass_hat_k"] == pytest.approx(float(exact_pass_hat_k(n, c, row["k"])), rel=1e-12, abs=1e-14)

    got = {(r["scenario_id"], r["model_name"], r["k"]): r for r in _rows(db, "select * from pass_at_k")}
    expected_keys = set()
    for (scenario, model), tasks in counts.items():
        for k in range(1, max(n for n, _ in tasks.values()) + 1):
            eligible = [(n, c) for n, c in tasks.values() if n >= k]
            expected_keys.add((scenario, model, k))
            row = got[(scenario, model, k)]
            assert row["n_tasks"] == len(eligible)
            assert row["n_tasks_excluded"] == len(tasks) - len(eligible)
            mean_at = sum(exact_pass_at_k(n, c, k) for n, c in eligible) / len(eligible)
            mean_hat = sum(exact_pass_hat_k(n, c, k) for n, c in eligible) / len(eligible)
            assert row["pass_at_k"] == pytest.approx(float(mean_at), rel=1e-12, abs=1e-14)
            assert row["pass_hat_k"] == pytest.approx(float(mean_hat), rel=1e-12, abs=1e-14)
    assert set(got) == expected_keys

    # Model level: every task of both scenarios, equally weighted.
    model_rows = {(r["model_name"], r["k"]): r for r in _rows(db, "select * from model_pass_at_k")}
    by_model: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (_, model), tasks in counts.items():
        by_model[model] += list(tasks.values())
    for (model, k), row in model_rows.items():
        eligible = [(n, c) for n, c in by_model[model] if n >= k]
        assert row["n_tasks"] == len(eligible)
        assert row["pass_hat_k"] == pytest.approx(
            float(sum(exact_pass_hat_k(n, c, k) for n, c in eligible) / len(eligible)), rel=1e-12, abs=1e-14
        )
    assert {m for m, _ in model_rows} == {"m1", "m2", "m3"}


def test_lgamma_binomials_stay_accurate_at_a_thousand_rollouts(tmp_path: Path) -> None:
    n = 1000
    passes = (0, 1, 2, 500, 998, 999, 1000)
    db = build(tmp_path, attempts_with({f"c{c}": (n, c) for c in passes}))
    ks = (1, 2, 5, 10, 100, 500, 998, 999, 1000)
    rows = _rows(db, f"select * from task_pass_at_k where k in {ks}")
    assert len(rows) == len(passes) * len(ks)
    worst_absolute = worst_relative = 0.0
    for row in rows:
        c, k = row["passes"], row["k"]
        for column, exact in (("pass_at_k", exact_pass_at_k(n, c, k)), ("pass_hat_k", exact_pass_hat_k(n, c, k))):
            want = float(exact)
            worst_absolute = max(worst_absolute, abs(row[column] - want))
            if column == "pass_hat_k" and want > 0:
                worst_relative = max(worst_relative, abs(row[column] - want) / want)
    # The documented accuracy: pass^k (which can be tiny) to 1e-10 relative, both estimators to 1e-11 absolute.
    assert worst_relative < 1e-10
    assert worst_absolute < 1e-11
    # Exact where it matters most: no rounding turns an all-pass or all-fail task into 0.9999... or 1e-13.
    extremes = {(r["passes"], r["k"]): r for r in rows if r["passes"] in (0, n)}
    assert all(extremes[(0, k)]["pass_at_k"] == 0.0 and extremes[(0, k)]["pass_hat_k"] == 0.0 for k in ks)
    assert all(extremes[(n, k)]["pass_at_k"] == 1.0 and extremes[(n, k)]["pass_hat_k"] == 1.0 for k in ks)
