"""Task, scenario x model and model metrics against an independent numpy computation: rates, variances, cost
per rollout, the CR1 task-clustered standard error, t-intervals (t quantiles by numerical integration of the
density) and the task bootstrap (the hashed draws re-implemented in numpy)."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from eval_pipelines.warehouse import metrics
from eval_pipelines.warehouse.benchmark_metrics import BENCHMARK_VIEWS
from eval_pipelines.warehouse.catalog import connect_read_only
from eval_pipelines.warehouse.metrics import BOOTSTRAP_REPLICATES, BOOTSTRAP_SEED, METRIC_VIEWS
from tests.reports.synthetic_warehouse import Attempt, attempts_with, build

SCENARIO, OTHER = "scn:1.0.0", "other:2.0.0"
# task -> (n, c) per model of the first sweep and scenario.
DESIGN: dict[str, dict[str, tuple[int, int]]] = {
    "balanced": {f"b{i}": (5, c) for i, c in enumerate([0, 1, 2, 3, 4, 5, 5, 2])},
    "unbalanced": {"u0": (3, 1), "u1": (7, 7), "u2": (2, 0), "u3": (10, 4), "u4": (5, 3)},
    "single": {"s0": (4, 2)},
    "constant": {"k0": (3, 3), "k1": (2, 2), "k2": (6, 6)},
    **{f"g{g}": {f"t{i:02d}": (4, (i * 7) % 5) for i in range(g)} for g in (2, 3, 11, 31, 41)},
}
OTHER_DESIGN = {"o0": (4, 1), "o1": (4, 4), "o2": (4, 0)}
SWEEP_2 = {"b0": (2, 2), "b1": (2, 2)}


def _cost_of(i: int) -> dict[str, Any]:
    """Varied per-rollout usage, with gaps, so means over 'rollouts that report it' differ from means over all."""
    return {
        "total_tokens": None if i % 4 == 3 else 100 * (i + 1),
        "cost_usd": None if i % 5 == 4 else 0.001 * (i + 1),
        "duration_seconds": None if i % 6 == 5 else 1.5 * (i + 1),
    }


def _attempts() -> list[Attempt]:
    attempts: list[Attempt] = []
    for model, tasks in DESIGN.items():
        attempts += attempts_with(tasks, model_name=model, scenario_id=SCENARIO, is_simulated=model == "constant")
    attempts += attempts_with(OTHER_DESIGN, model_name="balanced", scenario_id=OTHER)
    attempts += attempts_with(SWEEP_2, model_name="balanced", scenario_id=SCENARIO, sweep_id="sweep-2")
    # Not scored / failed-status rollouts of `unbalanced`: n_unscored and a 0 reward, and usage to average.
    attempts += [
        Attempt("u0", "unscored", model_name="unbalanced", scenario_id=SCENARIO),
        Attempt("u2", "error", model_name="unbalanced", scenario_id=SCENARIO),
        # Nothing scored yet: a row with NULL rates, and no cluster for the intervals.
        Attempt("u9", "unscored", model_name="unbalanced", scenario_id=SCENARIO),
    ]
    return [
        Attempt(**{**a.__dict__, **_cost_of(i)}) if a.model_name == "unbalanced" else a for i, a in enumerate(attempts)
    ]


ATTEMPTS = _attempts()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("intervals"), ATTEMPTS)


def _rows(db: Path, sql: str) -> list[dict[str, Any]]:
    con = connect_read_only(db)
    try:
        cursor = con.execute(sql)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()


def _reward(a: Attempt) -> float | None:
    return {"pass": 1.0, "fail": 0.0, "error": 0.0, "unscored": None}[a.outcome]


def _partial(a: Attempt) -> float | None:
    return {"pass": 1.0, "fail": 0.5, "error": 0.0, "unscored": None}[a.outcome]


# --- independent references -------------------------------------------------------------------------------


def t_quantile_975(df: int) -> float:
    """Numerically integrate Student's t density (Simpson) and bisect for P(|T| < t) = 0.95."""
    log_const = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def two_sided(t: float) -> float:
        x = np.linspace(0.0, t, 20001)
        f = np.exp(log_const - (df + 1) / 2 * np.log1p(x * x / df))
        h = x[1] - x[0]
        return float(2 * h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum()))

    low, high = 0.0, 20.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if two_sided(middle) < 0.95 else (low, middle)
    return (low + high) / 2


def lowbias32(x: np.ndarray) -> np.ndarray:
    mask = np.uint64(0xFFFFFFFF)
    x = x.astype(np.uint64) & mask
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x7FEB352D)) & mask
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x846CA68B)) & mask
    x ^= x >> np.uint64(16)
    return x


def bootstrap_indices(seed: int, n_clusters: int) -> np.ndarray:
    """(replicates x n_clusters) cluster indices: the documented counter-based draws."""
    keys = lowbias32(np.arange(BOOTSTRAP_REPLICATES, dtype=np.uint64) ^ np.uint64(seed))
    draws = lowbias32(keys[:, None] ^ np.arange(n_clusters, dtype=np.uint64)[None, :])
    return (draws % np.uint64(n_clusters)).astype(np.int64)


def cr1_se(rewards: list[float], clusters: list[Any]) -> float:
    """CR1 sandwich variance of the intercept of y = b + e, clustered, written from the per-rollout residuals."""
    y = np.asarray(rewards)
    e = y - y.mean()
    labels = sorted(set(clusters))
    scores = np.array([e[[c == label for c in clusters]].sum() for label in labels])
    g, n = len(labels), len(y)
    bread = 1.0 / n  # (X'X)^-1 with X a column of ones
    return math.sqrt(g / (g - 1) * bread * (scores @ scores) * bread)


# --- tests ---------------------------------------------------------------------------------------------------


def test_student_t_table_matches_published_values_and_integration() -> None:
    published = {1: 12.7062, 2: 4.3027, 5: 2.5706, 10: 2.2281, 30: 2.0423, 120: 1.9799}
    con = duckdb.connect()
    try:
        for df in [*range(1, 45), 50, 60, 80, 120, 200, 1000, 100000]:
            sql_value = con.execute(f"select {metrics.t975_sql(str(df))}").fetchone()
            assert sql_value is not None
            assert sql_value[0] == pytest.approx(t_quantile_975(df), abs=1e-6), df
            if df in published:
                assert round(sql_value[0], 4) == published[df]
        assert con.execute(f"select {metrics.t975_sql('0')}").fetchone() == (None,)
    finally:
        con.close()


def test_task_metrics_match_numpy(db: Path) -> None:
    by_task: dict[tuple[str, str, str, str], list[Attempt]] = defaultdict(list)
    for a in ATTEMPTS:
        by_task[(a.sweep_id, a.scenario_id, a.model_name, a.task_id)].append(a)
    rows = {
        (r["sweep_id"], r["scenario_id"], r["model_name"], r["task_id"]): r
        for r in _rows(db, "select * from task_metrics")
    }
    assert set(rows) == set(by_task)
    for key, attempts in by_task.items():
        row = rows[key]
        rewards = [r for a in attempts if (r := _reward(a)) is not None]
        assert row["n"] == len(rewards)
        assert row["n_unscored"] == len(attempts) - len(rewards)
        assert row["passes"] == rewards.count(1.0)
        if not rewards:
            rates = ("pass_rate", "mean_reward", "variance", "std", "mean_partial_credit")
            assert [row[c] for c in rates] == [None] * len(rates), key
            continue
        assert row["pass_rate"] == pytest.approx(np.mean(rewards))
        assert row["mean_reward"] == pytest.approx(np.mean(rewards))
        assert row["variance"] == pytest.approx(np.var(rewards), abs=1e-15)
        assert row["std"] == pytest.approx(np.std(rewards), abs=1e-12)
        assert row["mean_partial_credit"] == pytest.approx(
            np.mean([p for a in attempts if (p := _partial(a)) is not None])
        )
        for column, field in (
            ("tokens_per_rollout", "total_tokens"),
            ("cost_per_rollout_usd", "cost_usd"),
            ("seconds_per_rollout", "duration_seconds"),
        ):
            values = [v for a in attempts if (v := getattr(a, field)) is not None]
            assert row[column] == (pytest.approx(np.mean(values)) if values else None), (key, column)
        assert row["total_cost_usd"] == pytest.approx(sum(a.cost_usd or 0.0 for a in attempts))
        assert row["is_simulated"] is (key[2] == "constant")
    # Spelled out: u2 has two scored fails plus the failed-status rollout; u0 has one unscored rollout.
    assert rows[("sweep-1", SCENARIO, "unbalanced", "u9")]["n_unscored"] == 1
    u0, u2 = rows[("sweep-1", SCENARIO, "unbalanced", "u0")], rows[("sweep-1", SCENARIO, "unbalanced", "u2")]
    assert (u0["n"], u0["n_unscored"], u0["passes"]) == (3, 1, 1)
    assert (u2["n"], u2["n_unscored"], u2["passes"], u2["pass_rate"]) == (3, 0, 0, 0.0)


def _expected_group(attempts: list[Attempt], cluster_of: Any) -> dict[str, Any]:
    scored = [(a, r) for a in attempts if (r := _reward(a)) is not None]
    rewards = [r for _, r in scored]
    clusters = [cluster_of(a) for a, _ in scored]
    labels = sorted(set(clusters))
    passes = np.array([sum(r for (a, r) in scored if cluster_of(a) == label) for label in labels])
    counts = np.array([sum(1 for (a, _) in scored if cluster_of(a) == label) for label in labels])
    out: dict[str, Any] = {
        "n": len(rewards),
        "n_tasks": len(labels),
        "pass_rate": float(np.mean(rewards)),
        "variance": float(np.var(rewards)),
        "n_unscored": len(attempts) - len(rewards),
    }
    if len(labels) >= 2:
        out["clustered_se"] = cr1_se(rewards, clusters)
        t = t_quantile_975(len(labels) - 1)
        out["ci_t"] = (out["pass_rate"] - t * out["clustered_se"], out["pass_rate"] + t * out["clustered_se"])
    else:
        out["clustered_se"] = None
        out["ci_t"] = (None, None)
    idx = bootstrap_indices(BOOTSTRAP_SEED, len(labels))
    replicate_rates = passes[idx].sum(axis=1) / counts[idx].sum(axis=1)
    out["ci_boot"] = tuple(np.quantile(replicate_rates, [0.025, 0.975]))
    return out


def _assert_group(row: dict[str, Any], want: dict[str, Any]) -> None:
    assert (row["n"], row["n_tasks"], row["n_unscored"]) == (want["n"], want["n_tasks"], want["n_unscored"])
    assert row["pass_rate"] == pytest.approx(want["pass_rate"])
    assert row["variance"] == pytest.approx(want["variance"], abs=1e-15)
    if want["clustered_se"] is None:
        assert (row["clustered_se"], row["t_df"], row["ci_t_low"], row["ci_t_high"]) == (None, None, None, None)
    else:
        assert row["clustered_se"] == pytest.approx(want["clustered_se"], abs=1e-14)
        assert row["t_df"] == want["n_tasks"] - 1
        assert (row["ci_t_low"], row["ci_t_high"]) == pytest.approx(want["ci_t"], abs=1e-6)
    assert (row["ci_boot_low"], row["ci_boot_high"]) == pytest.approx(want["ci_boot"], abs=1e-12)


def test_scenario_model_metrics_match_numpy(db: Path) -> None:
    groups: dict[tuple[str, str, str], list[Attempt]] = defaultdict(list)
    for a in ATTEMPTS:
        groups[(a.sweep_id, a.scenario_id, a.model_name)].append(a)
    rows = {
        (r["sweep_id"], r["scenario_id"], r["model_name"]): r for r in _rows(db, "select * from scenario_model_metrics")
    }
    assert set(rows) == set(groups)
    for key, attempts in groups.items():
        _assert_group(rows[key], _expected_group(attempts, lambda a: a.task_id))

    # Hand-checked: with equal n per task CR1 is the standard error of the mean of the task pass rates.
    balanced = rows[("sweep-1", SCENARIO, "balanced")]
    task_rates = np.array([c / n for n, c in DESIGN["balanced"].values()])
    assert balanced["clustered_se"] == pytest.approx(task_rates.std(ddof=1) / math.sqrt(len(task_rates)))
    assert balanced["ci_boot_low"] < balanced["pass_rate"] < balanced["ci_boot_high"]
    # One task: no clustered SE; every bootstrap replicate is that task.
    single = rows[("sweep-1", SCENARIO, "single")]
    assert (single["clustered_se"], single["ci_boot_low"], single["ci_boot_high"]) == (None, 0.5, 0.5)
    # All pass: no spread at all.
    constant = rows[("sweep-1", SCENARIO, "constant")]
    assert (constant["clustered_se"], constant["ci_t_low"], constant["ci_t_high"]) == (0.0, 1.0, 1.0)
    assert constant["is_simulated"] is True
    # Sweeps are never pooled.
    assert rows[("sweep-2", SCENARIO, "balanced")]["pass_rate"] == 1.0
    # The t quantile at t_df (from the view's own numbers) across the table and the expansion.
    for g in (2, 3, 11, 31, 41):
        row = rows[("sweep-1", SCENARIO, f"g{g}")]
        t = (row["ci_t_high"] - row["pass_rate"]) / row["clustered_se"]
        assert t == pytest.approx(t_quantile_975(g - 1), abs=1e-6), g


def test_model_metrics_cluster_by_scenario_and_task(db: Path) -> None:
    groups: dict[tuple[str, str], list[Attempt]] = defaultdict(list)
    for a in ATTEMPTS:
        groups[(a.sweep_id, a.model_name)].append(a)
    rows = {(r["sweep_id"], r["model_name"]): r for r in _rows(db, "select * from model_metrics")}
    assert set(rows) == set(groups)
    for key, attempts in groups.items():
        _assert_group(rows[key], _expected_group(attempts, lambda a: (a.scenario_id, a.task_id)))
        assert rows[key]["n_scenarios"] == len({a.scenario_id for a in attempts})
    assert rows[("sweep-1", "balanced")]["n_tasks"] == len(DESIGN["balanced"]) + len(OTHER_DESIGN)


def test_bootstrap_interval_is_statistically_sane(db: Path) -> None:
    """Independent of the hash: with 41 equal-sized tasks the percentile interval is close to the t-interval."""
    row = _rows(db, "select * from scenario_model_metrics where model_name = 'g41'")[0]
    boot_width = row["ci_boot_high"] - row["ci_boot_low"]
    t_width = row["ci_t_high"] - row["ci_t_low"]
    assert 0.75 < boot_width / t_width < 1.1


JUDGE_VIEWS = {
    "judgements_latest",
    "judge_scores_by_model",
    "judge_verifier_agreement",
    "rubric_verifier_agreement",
    "judge_calibration_rollouts",
    "judge_calibration",
}


def test_metric_view_keys_are_unique(db: Path) -> None:
    con = connect_read_only(db)
    try:
        for view in METRIC_VIEWS:
            assert view.key, f"{view.name} documents no key"
            keys = ", ".join(view.key)
            duplicates = con.execute(
                f"select {keys}, count(*) from {view.name} group by {keys} having count(*) > 1 limit 3"
            ).fetchall()
            assert duplicates == [], view.name
            # This fixture has no judge data, benchmark tasks nor simulator that strayed; those views have tests
            # of their own.
            if view.name not in JUDGE_VIEWS | {v.name for v in BENCHMARK_VIEWS} | {"simulator_check_failures"}:
                assert con.execute(f"select count(*) from {view.name}").fetchone() != (0,), view.name
    finally:
        con.close()


def test_python_reference_hash_matches_numpy() -> None:
    values = np.array([0, 1, 2, 12345, 0xFFFFFFFF, 0xDEADBEEF], dtype=np.uint64)
    assert [metrics.mix32(int(v)) for v in values] == [int(v) for v in lowbias32(values)]
    assert metrics.hashed_draw(BOOTSTRAP_SEED, 3, 5) == int(
        lowbias32(lowbias32(np.array([3], dtype=np.uint64) ^ np.uint64(BOOTSTRAP_SEED)) ^ np.uint64(5))[0]
    )
