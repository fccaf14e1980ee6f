"""The in-flight benchmark at a tiny size, and its pieces: latency draws, throughput windows, memory growth."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from benchmarks.in_flight import Latency, main, meets_target, memory_growth, windows


def test_latencies_parse_draw_reproducibly_and_have_the_stated_mean() -> None:
    assert Latency.parse("const:2").mean == 2.0 and Latency.parse("const:2").sampler(1)() == 2.0
    spread = Latency.parse("uniform:0.5:8")
    first, again = spread.sampler(7), spread.sampler(7)
    draws = [first() for _ in range(4000)]
    assert draws[:50] == [again() for _ in range(50)]  # seeded
    assert min(draws) >= 0.5 and max(draws) <= 8 and abs(statistics.fmean(draws) - spread.mean) < 0.2
    lognormal = Latency.parse("lognormal:2:0.5")
    draw = lognormal.sampler(3)
    assert abs(statistics.fmean(draw() for _ in range(20000)) - lognormal.mean) < 0.1
    for bad in ("uniform:8:0.5", "const", "gamma:1:2", "const:-1"):
        with pytest.raises(ValueError, match="latency"):
            Latency.parse(bad)


def test_windows_show_a_slowdown_after_the_first_thousand() -> None:
    # 1,000 completions in 10 s, then 1,000 more in 20 s; a partial window at the end is left out.
    offsets = [i / 100 for i in range(1, 1001)] + [10 + i / 50 for i in range(1, 1001)] + [31.0]
    rows = windows(offsets, 1000, ideal=100.0)
    assert [(r["rollouts"], r["rollouts_per_second"], r["fraction_of_ideal"]) for r in rows] == [
        (1000, 100.0, 1.0),
        (2000, 50.0, 0.5),
    ]
    assert [(r["first_at"], r["last_at"]) for r in rows] == [(0.01, 10.0), (10.02, 30.0)]


def test_memory_growth_and_target_read_the_constant_latency_rows() -> None:
    rows = [
        {"in_flight": 200, "latency": "const:2", "rss_mib": 300.0, "fraction_of_ideal": 0.95},
        {"in_flight": 1000, "latency": "const:2", "rss_mib": 400.0, "fraction_of_ideal": 0.89},
        {"in_flight": 1000, "latency": "uniform:0.5:8", "rss_mib": 900.0, "fraction_of_ideal": 0.99},
    ]
    growth = memory_growth(rows)
    assert growth is not None and growth["kib_per_extra_in_flight"] == 128.0
    assert meets_target(rows) is False
    assert meets_target([{**rows[1], "fraction_of_ideal": 0.9}]) is True
    assert meets_target(rows[:1]) is None


@pytest.mark.slow
def test_bench_in_flight_measures_every_row_under_the_ideal(tmp_path: Path) -> None:
    argv = ["--in-flight", "3", "6", "--latency", "0.05", "--spread", "uniform:0.02:0.1", "--waves", "2",
            "--min-rollouts", "8", "--window", "4", "--in-process", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0  # no 1,000-in-flight row: no target to miss

    report = json.loads((tmp_path / "in_flight.json").read_text())
    rows = report["results"]
    assert [(r["in_flight"], r["latency"], r["rollouts"]) for r in rows] == [
        (3, "const:0.05", 8),
        (6, "const:0.05", 12),
        (6, "uniform:0.02:0.1", 12),
    ]
    for row in rows:
        assert row["passed"] == row["rollouts"] and row["model_calls"] >= 6 * row["rollouts"]
        assert 0 < row["fraction_of_ideal"] <= 1.0  # every call sleeps: nothing beats the ideal
        assert row["rss_mib"] > 0 and row["fds"] > 0 and row["processes"] >= 1
        assert len(row["windows"]) == row["rollouts"] // 4
    assert abs(rows[2]["mean_latency_seconds"] - 0.06) < 0.03  # the draws' own mean sets the ideal
    assert report["memory_growth"]["from"] == 3 and report["memory_growth"]["to"] == 6
    assert "| 6 | uniform:0.02:0.1" in (tmp_path / "in_flight.md").read_text()
