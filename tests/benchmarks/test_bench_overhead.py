"""The overhead benchmark at a tiny size: every side completes and passes every rollout, and the report adds up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks._common import INSPECT_PYTHON
from benchmarks.overhead import (
    HEADLINE,
    INSPECT_SIDES,
    OURS,
    SIDES,
    inspect_environment,
    main,
    paired_ratios,
    repetition_order,
)

LEAN_ARGS = {"log_realtime": False, "display": "none", "ctl_server": False, "score_display": False}


def test_bench_overhead_ours_runs_and_reports(tmp_path: Path) -> None:
    main(["--sizes", "4x1", "2x2", "--sides", "ours", "--repeats", "1", "--in-process", "--out", str(tmp_path)])

    report = json.loads((tmp_path / "overhead.json").read_text())
    assert [(c["samples"], c["epochs"]) for c in report["comparisons"]] == [(4, 1), (2, 2)]
    for comparison in report["comparisons"]:
        ours = comparison["medians"]["ours"]
        assert ours["rollouts"] == 4 and ours["passed"] == 4  # sim-oracle replays the reference: all pass
        assert ours["rollouts_per_second"] > 0 and ours["cpu_ms_per_rollout"] > 0
        assert ours["endpoint_cpu_ms_per_rollout"] >= 0
        assert ours["bytes_per_rollout"] > 0
    (measurement,) = [m for m in report["measurements"] if (m["samples"], m["epochs"]) == (2, 2)]
    assert measurement["status"] == {"completed": 4}
    assert measurement["artifact_bytes"] > 0  # artifacts, traces and Parquet were written
    assert measurement["bytes_per_rollout"] == round(measurement["artifact_bytes"] / 4)
    assert set(report["settings"]) == {"ours"} and report["settings"]["ours"]["max_parallel"] == 10
    # No Inspect side ran: judged on CPU and bytes alone, each the worst of the two sizes.
    targets = report["targets"]
    assert set(targets) == {"cpu_ms_per_rollout", "bytes_per_rollout"}
    worst_cpu = max(c["medians"]["ours"]["cpu_ms_per_rollout"] for c in report["comparisons"])
    assert targets["cpu_ms_per_rollout"]["worst"] == worst_cpu
    assert targets["cpu_ms_per_rollout"]["met"] == (worst_cpu <= 12)
    assert report["meets_target"] == all(t["met"] for t in targets.values())
    assert "| 4 x 1 | ours |" in (tmp_path / "overhead.md").read_text()


def test_bench_overhead_alternates_each_pair_back_to_back() -> None:
    orders = [repetition_order(list(SIDES), repeat) for repeat in range(4)]

    for order in orders:
        assert sorted(order) == sorted(SIDES)
        # Ours and the headline side always run one right after the other...
        assert abs(order.index(OURS) - order.index(HEADLINE)) == 1
    # ...and which of the two goes first alternates.
    assert [order.index(OURS) < order.index(HEADLINE) for order in orders] == [True, False, True, False]


def test_bench_overhead_ratios_are_per_pair_not_of_medians() -> None:
    def runs(rates: list[float], cpu_ms: list[float]) -> list[dict[str, float]]:
        return [
            {"repeat": i, "rollouts_per_second": rate, "cpu_ms_per_rollout": cpu}
            for i, (rate, cpu) in enumerate(zip(rates, cpu_ms, strict=True))
        ]

    # Per pair: throughput 2x, 5x, 1x; CPU 4x, 1x, 3x. Medians of each side would give 20/5 = 4x and 30/10 = 3x.
    ours = runs([10.0, 20.0, 30.0], [10.0, 20.0, 10.0])
    other = runs([5.0, 4.0, 30.0], [40.0, 20.0, 30.0])

    ratio = paired_ratios(ours, other)

    assert ratio["throughput"] == 2.0 and ratio["cpu_per_rollout"] == 3.0
    assert ratio["throughput_spread"] == {"min": 1.0, "median": 2.0, "max": 5.0}
    assert ratio["cpu_per_rollout_spread"] == {"min": 1.0, "median": 3.0, "max": 4.0}
    assert ratio["pairs"] == 3


def test_bench_overhead_inspect_children_do_not_inherit_inspect_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # An exported INSPECT_DISPLAY or INSPECT_EVAL_CTL_SERVER would silently change what "default" measures.
    monkeypatch.setenv("INSPECT_DISPLAY", "plain")
    monkeypatch.setenv("INSPECT_EVAL_CTL_SERVER", "false")
    monkeypatch.setenv("BENCH_UNRELATED", "kept")

    env = inspect_environment()

    assert not [name for name in env if name.startswith("INSPECT_")]
    assert env["BENCH_UNRELATED"] == "kept"


@pytest.mark.slow
@pytest.mark.skipif(not INSPECT_PYTHON.is_file(), reason="benchmarks/.venv-inspect (inspect-ai) is not installed")
def test_bench_overhead_inspect_sides_score_the_same_task(tmp_path: Path) -> None:
    main(["--sizes", "3x1", "--repeats", "2", "--out", str(tmp_path)])

    report = json.loads((tmp_path / "overhead.json").read_text())
    (comparison,) = report["comparisons"]
    assert set(comparison["medians"]) == set(SIDES)
    for side in comparison["medians"].values():
        assert side["rollouts"] == 3 and side["passed"] == 3  # the same verifier passes the same replayed actions
        assert side["bytes_per_rollout"] > 0  # ours: the data folder; Inspect: its .eval log
    assert set(comparison["ours_vs"]) == set(INSPECT_SIDES)
    assert {ratio["pairs"] for ratio in comparison["ours_vs"].values()} == {2}
    calls = {m["side"]: m["endpoint_chat_completions"] for m in report["measurements"] if m["repeat"] == 0}
    # Both HTTP sides called the shared endpoint 6 times per rollout (5 tool calls + the answer), warm-up of 2
    # included; Inspect's mockllm side never did.
    assert calls == {
        "ours": 6 * (3 + 2),
        "inspect-openai": 6 * (3 + 2),
        "inspect-openai-lean": 6 * (3 + 2),
        "inspect-mockllm-lean": 0,
    }
    settings = report["settings"]
    # Default = nothing passed, and Inspect resolved its documented defaults.
    assert settings["inspect-openai"]["eval_args"] == {}
    default = settings["inspect-openai"]["resolved"]
    switches = (default["display"], default["log_realtime"], default["ctl_server"], default["score_display"])
    assert switches == ("full", True, True, True)
    for lean in ("inspect-openai-lean", "inspect-mockllm-lean"):
        assert settings[lean]["eval_args"] == LEAN_ARGS
        resolved = settings[lean]["resolved"]
        assert (resolved["display"], resolved["log_realtime"], resolved["ctl_server"]) == ("none", False, False)
    assert settings["inspect-mockllm-lean"]["model"] == "mockllm/model"
    # Inspect snapshots the store around every span: each side's samples kept the live mailbox there, nothing else.
    assert all(settings[side]["store_keys"] == ["mailbox"] for side in INSPECT_SIDES)
    assert len(report["measurements"]) == 2 * len(SIDES) and report["load_average_range"]["max"] >= 0
    assert report["headline"].startswith("ours vs inspect-mockllm-lean")
    ratio = comparison["ours_vs"]["inspect-mockllm-lean"]["throughput"]
    assert report["targets"]["throughput_vs_inspect-mockllm-lean"] == {"target": ">= 3x", "worst": ratio,
                                                                       "met": ratio >= 3}  # fmt: skip
    markdown = (tmp_path / "overhead.md").read_text()
    assert "eval() args: none (defaults)" in markdown and "ctl_server=False" in markdown
    assert "store keys: ['mailbox']" in markdown and "2 paired repetitions" in markdown
