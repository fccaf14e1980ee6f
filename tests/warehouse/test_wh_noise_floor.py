"""`noise_floor` against hand counts: flip rates, unstable tasks, pass@k beside pass^k at the sweep's epochs,
and the floor's detectable difference and epochs (closed forms, the epochs by searching k upwards)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.schemas.sweep import DEFAULT_DETECTABLE_DIFFERENCE
from eval_pipelines.warehouse.catalog import connect_read_only
from tests.reports.synthetic_warehouse import attempts_with, build

FACTOR = statistics.NormalDist().inv_cdf(0.975) + statistics.NormalDist().inv_cdf(0.80)


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    con = connect_read_only(path)
    try:
        cursor = con.execute("select * from noise_floor")
        names = [d[0] for d in cursor.description]
        return {row[2]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}
    finally:
        con.close()


def test_noise_floor_hand_counts(tmp_path: Path) -> None:
    # model-a: t1 1 of 3, t2 3 of 3, t3 0 of 3, t4 2 of 4. model-b: one epoch per task, nothing to flip.
    attempts = attempts_with({"t1": (3, 1), "t2": (3, 3), "t3": (3, 0), "t4": (4, 2)}, model_name="model-a")
    attempts += attempts_with({"t1": (1, 1), "t2": (1, 0)}, model_name="model-b")
    rows = _rows(build(tmp_path, attempts))
    a = rows["model-a"]
    assert (a["n_tasks"], a["epochs"], a["n_repeated_tasks"], a["n_unstable_tasks"]) == (4, 3, 4, 2)
    assert a["mean_epochs"] == pytest.approx(13 / 4)
    assert a["unstable_share"] == pytest.approx(0.5)
    # Two epochs disagree: t1 2*1*2/(3*2) = 2/3, t4 2*2*2/(4*3) = 2/3, t2 and t3 never: mean 1/3.
    assert a["flip_rate"] == pytest.approx(1 / 3)
    assert a["sigma2_within"] == pytest.approx(1 / 6)
    # pass@1: mean of 1/3, 1, 0, 1/2. At k = 3: pass@3 1, 1, 0, 1 - C(2,3)/C(4,3) = 1; pass^3 0, 1, 0, 0.
    assert a["pass_at_1"] == pytest.approx(11 / 24)
    assert a["pass_at_k"] == pytest.approx(3 / 4)
    assert a["pass_hat_k"] == pytest.approx(1 / 4)
    assert a["mdd_one_epoch"] == pytest.approx(FACTOR * math.sqrt(2 * (1 / 6) / 4))
    assert a["mdd"] == pytest.approx(FACTOR * math.sqrt(2 * (1 / 6) / (4 * 13 / 4)))
    needed = next(
        k for k in range(1, 10_000) if FACTOR * math.sqrt(2 * (1 / 6) / (4 * k)) <= DEFAULT_DETECTABLE_DIFFERENCE
    )
    assert a["epochs_needed"] == needed
    b = rows["model-b"]
    assert (b["n_tasks"], b["epochs"], b["n_repeated_tasks"]) == (2, 1, 0)
    assert b["flip_rate"] is None and b["unstable_share"] is None and b["epochs_needed"] is None
    # At k = 1, pass@k and pass^k are both the pass rate.
    assert b["pass_at_k"] == b["pass_hat_k"] == b["pass_at_1"] == pytest.approx(0.5)


def test_stable_model_needs_one_epoch(tmp_path: Path) -> None:
    rows = _rows(build(tmp_path, attempts_with({"t1": (5, 5), "t2": (5, 0)})))
    a = rows["model-a"]
    assert a["flip_rate"] == 0.0 and a["n_unstable_tasks"] == 0
    assert a["mdd"] == 0.0 and a["epochs_needed"] == 1
