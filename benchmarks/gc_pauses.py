"""Garbage-collector pauses: how long the cyclic collector stops the loop that runs a sweep's rollouts.

    .venv/bin/python benchmarks/gc_pauses.py                 # 400 rollouts at concurrency 10, median of 3

The embedded evaluation service runs a sweep's rollouts on an event loop of this process, so every collection
the cyclic collector makes here stops every rollout in flight. This runs the benchmark task (5 tool calls and an
answer, zero-latency model in another process) through our pipeline (`run_and_collect` on the embedded service,
no Dagster), each repetition in a fresh process after a 2-rollout warm-up, and times every collection of this
process with `gc.callbacks`: collections per generation, their total and longest pause, and how many objects
were frozen (kept out of the scans, `lib/aio.startup_objects_frozen`) and tracked when the run ended.

Results: JSON on stdout and in `benchmarks/results/gc_pauses.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import (
    RESULTS_DIR,
    ModelEndpoint,
    OurPipeline,
    command_line,
    load_average,
    machine,
    now_iso,
    run_child,
    write_bench_scenario,
    write_report,
)

GENERATIONS = (0, 1, 2)
CHILD_TIMEOUT_SECONDS = 1800.0


class CollectionClock:
    """Every collection's generation and duration, from `gc.callbacks`, while installed."""

    def __init__(self) -> None:
        self.pauses: dict[int, list[float]] = {generation: [] for generation in GENERATIONS}
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses[info["generation"]].append(time.perf_counter() - self._started)

    def __enter__(self) -> CollectionClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self)


def child(args: argparse.Namespace) -> dict[str, Any]:
    pipeline = OurPipeline(args.scenarios_dir, args.data_dir)
    task_ids = sorted(pipeline.scenario.tasks())
    pipeline.run(task_ids[:2], 1, 2, args.endpoint, model_key="warmup")
    with CollectionClock() as clock:
        run = pipeline.run(task_ids[: args.rollouts], 1, args.concurrency, args.endpoint)
    return {
        "rollouts": run.rollouts,
        "passed": run.passed,
        "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds,
        "collections": {str(g): len(clock.pauses[g]) for g in GENERATIONS},
        "pause_ms_total": {str(g): round(1000 * sum(clock.pauses[g]), 2) for g in GENERATIONS},
        "pause_ms_longest": {str(g): round(1000 * max(clock.pauses[g], default=0.0), 2) for g in GENERATIONS},
        "objects_frozen": gc.get_freeze_count(),
        "objects_tracked": len(gc.get_objects()),
    }


def child_main(argv: list[str]) -> dict[str, Any]:
    return child(build_parser().parse_args(argv))


def measure(rollouts: int, concurrency: int, scenarios_dir: Path, endpoint: ModelEndpoint, workdir: Path,
            in_process: bool) -> dict[str, Any]:  # fmt: skip
    child_args = ["--child", "--scenarios-dir", str(scenarios_dir), "--data-dir", str(workdir), "--endpoint",
                  endpoint.url, "--rollouts", str(rollouts), "--concurrency", str(concurrency)]  # fmt: skip
    raw = run_child(Path(__file__), child_args, child_main, in_process=in_process, timeout=CHILD_TIMEOUT_SECONDS)
    return {**raw, "load_average": load_average()}


def run(rollouts: int, concurrency: int, repeats: int, workdir: Path, in_process: bool = False) -> dict[str, Any]:
    scenario = write_bench_scenario(workdir / "scenarios", rollouts)
    load_before = load_average()
    runs = []
    with ModelEndpoint(scenario.scenarios_dir, in_process=in_process) as endpoint:
        for attempt in range(repeats):
            folder = workdir / f"run-{attempt}"
            runs.append(measure(rollouts, concurrency, scenario.scenarios_dir, endpoint, folder, in_process))
            shutil.rmtree(folder, ignore_errors=True)
    full = [r["pause_ms_total"]["2"] for r in runs]
    return {
        "benchmark": "gc_pauses",
        "command": command_line(),
        "rollouts": rollouts,
        "concurrency": concurrency,
        "repeats": repeats,
        "in_process": in_process,
        "full_collection_ms_total_median": statistics.median(full),
        "full_collection_ms_longest": max(r["pause_ms_longest"]["2"] for r in runs),
        "runs": runs,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "machine": machine(),
        "measured_at": now_iso(),
    }


def markdown(report: dict[str, Any]) -> str:
    load = f"load {report['load_average_before'][0]} -> {report['load_average_after'][0]}"
    lines = [
        f"Collector pauses in the runner process (`{report['command']}`; {report['rollouts']} rollouts at "
        f"concurrency {report['concurrency']}, each run in a fresh process, {load})",
        "",
        "| run | collections gen 0 / 1 / 2 | pause ms total, gen 0 / 1 / 2 | longest pause ms, gen 2 | objects frozen "
        "| objects tracked | CPU-ms/rollout | passed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for index, r in enumerate(report["runs"]):
        counts = " / ".join(str(r["collections"][str(g)]) for g in GENERATIONS)
        totals = " / ".join(str(r["pause_ms_total"][str(g)]) for g in GENERATIONS)
        cpu = round(1000 * r["cpu_seconds"] / r["rollouts"], 2)
        lines.append(
            f"| {index + 1} | {counts} | {totals} | {r['pause_ms_longest']['2']} | {r['objects_frozen']:,} | "
            f"{r['objects_tracked']:,} | {cpu} | {r['passed']}/{r['rollouts']} |"
        )
    lines += ["", f"Full collections: **{report['full_collection_ms_total_median']} ms** in all (median of the runs)."]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="runs, each in a fresh process")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="where gc_pauses.{json,md} go ('' = nowhere)")
    parser.add_argument("--in-process", action="store_true", help="runs and the endpoint in this process (tests)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenarios-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    if args.rollouts < 2 or args.concurrency < 1 or args.repeats < 1:
        parser.error("--rollouts must be at least 2, --concurrency and --repeats at least 1")
    workdir = Path(tempfile.mkdtemp(prefix="ep-gc-"))
    try:
        report = run(args.rollouts, args.concurrency, args.repeats, workdir, args.in_process)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    write_report("gc_pauses", report, markdown(report), Path(args.out) if args.out else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
