"""`model_comparison` against an independent Python computation: pairing by task, the paired bootstrap (hashed
draws re-implemented in numpy), the sign-flip test (exact by enumerating sign vectors with itertools, or the
documented Monte Carlo patterns) and hand-worked cases."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import numpy as np
import pytest

from eval_pipelines.warehouse.catalog import connect_read_only
from eval_pipelines.warehouse.metrics import (
    BOOTSTRAP_REPLICATES,
    COMPARISON_BOOTSTRAP_SEED,
    EXACT_PERMUTATION_MAX_TASKS,
    PERMUTATION_PATTERNS,
    PERMUTATION_SEED,
)
from tests.reports.synthetic_warehouse import Attempt, attempts_with, build

SCENARIO = "scn:1.0.0"


def lowbias32(x: np.ndarray) -> np.ndarray:
    mask = np.uint64(0xFFFFFFFF)
    x = x.astype(np.uint64) & mask
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x7FEB352D)) & mask
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x846CA68B)) & mask
    x ^= x >> np.uint64(16)
    return x


def _design() -> dict[str, dict[str, tuple[int, int]]]:
    rng = random.Random(11)
    tasks = [f"t{i:02d}" for i in range(14)]
    design: dict[str, dict[str, tuple[int, int]]] = {
        # Hand-worked: A's task rates (1, 1, 1), B's (0, 0.5, 0.5) on the same three tasks.
        "hand-a": {"x": (2, 2), "y": (2, 2), "z": (2, 2)},
        "hand-b": {"x": (2, 0), "y": (2, 1), "z": (4, 2)},
    }
    for model, skill in (("m1", 0.3), ("m2", 0.6), ("m3", 0.5)):
        design[model] = {}
        for t in tasks:
            n = rng.randint(2, 6)
            design[model][t] = (n, sum(rng.random() < skill for _ in range(n)))
    design["m1-twin"] = dict(design["m1"])  # ties m1 on every task
    # Ran only some tasks (and one task nobody else has): pairs only on the shared ones, exact test (G <= 10).
    design["partial"] = {t: (3, i % 4 if i % 4 < 4 else 3) for i, t in enumerate(tasks[:6])} | {"solo": (3, 3)}
    return design


DESIGN = _design()


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    attempts: list[Attempt] = []
    for model, tasks in DESIGN.items():
        attempts += attempts_with(tasks, model_name=model, scenario_id=SCENARIO, is_simulated=model == "m3")
    # The same models in a second scenario must never be paired across scenarios.
    attempts += attempts_with({"x": (1, 1)}, model_name="hand-a", scenario_id="elsewhere:1")
    attempts += attempts_with({"x": (1, 0)}, model_name="hand-b", scenario_id="elsewhere:1")
    db = build(tmp_path_factory.mktemp("comparison"), attempts)
    con = connect_read_only(db)
    try:
        cursor = con.execute(f"select * from model_comparison where scenario_id = '{SCENARIO}'")
        names = [d[0] for d in cursor.description]
        result = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        other = con.execute("select count(*) from model_comparison where scenario_id = 'elsewhere:1'").fetchone()
    finally:
        con.close()
    assert other == (2,)
    return {(r["model_a"], r["model_b"]): r for r in result}


def _expected(model_a: str, model_b: str) -> dict[str, Any]:
    a, b = DESIGN[model_a], DESIGN[model_b]
    shared = sorted(set(a) & set(b))
    rate_a = np.array([a[t][1] / a[t][0] for t in shared])
    rate_b = np.array([b[t][1] / b[t][0] for t in shared])
    d = rate_a - rate_b
    g = len(shared)
    # The bootstrap draws are defined for the alphabetically first model as A; mirror for the other order.
    first = model_a < model_b
    d_first = d if first else -d
    keys = lowbias32(np.arange(BOOTSTRAP_REPLICATES, dtype=np.uint64) ^ np.uint64(COMPARISON_BOOTSTRAP_SEED))
    idx = (lowbias32(keys[:, None] ^ np.arange(g, dtype=np.uint64)[None, :]) % np.uint64(g)).astype(np.int64)
    low, high = np.quantile(d_first[idx].mean(axis=1), [0.025, 0.975])
    ci = (low, high) if first else (-high, -low)
    observed = abs(d.mean())
    if g <= EXACT_PERMUTATION_MAX_TASKS:
        hits = sum(
            abs(np.mean(np.array(signs) * d)) >= observed - 1e-12 for signs in itertools.product((1, -1), repeat=g)
        )
        p_value = hits / 2**g
    else:
        pattern_keys = lowbias32(np.arange(PERMUTATION_PATTERNS, dtype=np.uint64) ^ np.uint64(PERMUTATION_SEED))
        flips = lowbias32(pattern_keys[:, None] ^ np.arange(g, dtype=np.uint64)[None, :]) & np.uint64(1)
        statistics = np.where(flips == 1, -d_first, d_first).mean(axis=1)
        hits = int((np.abs(statistics) >= observed - 1e-12).sum())
        p_value = (1 + hits) / (PERMUTATION_PATTERNS + 1)
    return {
        "n_tasks": g,
        "pass_rate_a": rate_a.mean(),
        "pass_rate_b": rate_b.mean(),
        "diff": d.mean(),
        "std_error": d.std(ddof=1) / math.sqrt(g) if g > 1 else None,
        "ci": ci,
        "p_value": p_value,
        "tasks_a_better": int((d > 0).sum()),
        "tasks_b_better": int((d < 0).sum()),
    }


def test_every_ordered_pair_matches_python(rows: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert set(rows) == {(a, b) for a in DESIGN for b in DESIGN if a != b and set(DESIGN[a]) & set(DESIGN[b])}
    for (model_a, model_b), row in rows.items():
        want = _expected(model_a, model_b)
        assert row["n_tasks"] == want["n_tasks"]
        assert row["pass_rate_a"] == pytest.approx(want["pass_rate_a"])
        assert row["pass_rate_b"] == pytest.approx(want["pass_rate_b"])
        assert row["diff"] == pytest.approx(want["diff"], abs=1e-12)
        if want["std_error"] is None:
            assert row["std_error"] is None
        else:
            assert row["std_error"] == pytest.approx(want["std_error"], abs=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(want["ci"], abs=1e-12), (model_a, model_b)
        assert row["p_value"] == pytest.approx(want["p_value"], abs=1e-12), (model_a, model_b)
        assert (row["tasks_a_better"], row["tasks_b_better"]) == (want["tasks_a_better"], want["tasks_b_better"])
        assert row["a_is_simulated"] is (model_a == "m3") and row["b_is_simulated"] is (model_b == "m3")


def test_hand_worked_exact_sign_flip(rows: dict[tuple[str, str], dict[str, Any]]) -> None:
    # d = (1, 0.5, 0.5), T = 2/3. Of the 8 sign vectors only (+,+,+) and (-,-,-) reach |T*| = 2/3:
    # flipping the 1 gives 0, flipping one 0.5 gives 1/3. p = 2/8.
    row = rows[("hand-a", "hand-b")]
    assert (row["n_tasks"], row["pass_rate_a"], row["pass_rate_b"]) == (3, 1.0, pytest.approx(1 / 3))
    assert row["diff"] == pytest.approx(2 / 3) and row["p_value"] == 0.25
    assert row["tasks_a_better"] == 3 and row["tasks_b_better"] == 0
    # Resampled means of three values in {1, 0.5}: the interval lies within [0.5, 1] and covers 2/3.
    assert 0.5 <= row["ci_low"] <= 2 / 3 <= row["ci_high"] <= 1.0


def test_mirrored_rows_and_ties(rows: dict[tuple[str, str], dict[str, Any]]) -> None:
    for (a, b), row in rows.items():
        back = rows[(b, a)]
        assert back["diff"] == -row["diff"]
        assert (back["ci_low"], back["ci_high"]) == (-row["ci_high"], -row["ci_low"])
        assert back["p_value"] == row["p_value"]
        assert all(str(back[c]) != "-0.0" for c in ("diff", "ci_low", "ci_high"))
    twin = rows[("m1", "m1-twin")]
    assert (twin["diff"], twin["ci_low"], twin["ci_high"], twin["p_value"]) == (0.0, 0.0, 0.0, 1.0)
    assert twin["tasks_a_better"] == twin["tasks_b_better"] == 0
    # Paired only on shared tasks; `solo` is nobody else's.
    assert rows[("partial", "m2")]["n_tasks"] == 6


def test_monte_carlo_p_value_resolution(rows: dict[tuple[str, str], dict[str, Any]]) -> None:
    row = rows[("m1", "m2")]
    assert row["n_tasks"] > EXACT_PERMUTATION_MAX_TASKS
    # (1 + hits) / (B + 1): never 0, and a multiple of 1 / (B + 1).
    scaled = row["p_value"] * (PERMUTATION_PATTERNS + 1)
    assert row["p_value"] > 0 and scaled == pytest.approx(round(scaled))
