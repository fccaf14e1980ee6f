"""Latency hiding: throughput against a model that takes 200 ms per call, at several concurrencies.

    .venv/bin/python benchmarks/latency_hiding.py            # concurrency 10, 50, 200, median of 5 runs each

Targets: at least 90% of ideal at concurrency 50 and at least 70% at 200, each the median of `--repeats` runs.

The model endpoint (sim-oracle, a separate process) starts each chat-completion response 200 ms (`--latency`)
after the request arrived. Each concurrency runs in a fresh child process: `--waves` x concurrency rollouts of
the benchmark task (5 tool calls and a final answer, so 6 model calls per rollout) through our pipeline
(`run_and_collect` on the embedded service, max_parallel = concurrency), which spreads a run over rollout
worker processes when its concurrency calls for it (`service/workers.py`), with the tool servers in their own
process. Ideal throughput = concurrency / (6 x latency) rollouts/s: every rollout slot always waiting on the
model and nothing else. Achieved = rollouts / seconds from launch to the last rollout's completion (the store's
timestamps), so it is a throughput over 10 waves by default: the first wave's start and the last one's tail
are in it, but do not dominate it. The end-to-end figure, which also writes traces and Parquet afterwards, is
reported too. CPU-ms per rollout counts every process of ours (this one, its workers and the tool servers);
the endpoint's CPU is reported apart.

Results: JSON on stdout and in `benchmarks/results/latency_hiding.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import (
    CALLS_PER_ROLLOUT,
    RESULTS_DIR,
    ModelEndpoint,
    OurPipeline,
    command_line,
    load_average,
    machine,
    now_iso,
    peak_rss_mib,
    run_child,
    write_bench_scenario,
    write_report,
)

DEFAULT_CONCURRENCY = (10, 50, 200)
DEFAULT_LATENCY_SECONDS = 0.2
DEFAULT_REPEATS = 5
#: The least fraction of ideal throughput each concurrency must reach (median of the repeats).
TARGETS: dict[int, float] = {50: 0.90, 200: 0.70}
CHILD_TIMEOUT_SECONDS = 3600.0


def child(args: argparse.Namespace) -> dict[str, Any]:
    pipeline = OurPipeline(args.scenarios_dir, args.data_dir)
    task_ids = sorted(pipeline.scenario.tasks())
    pipeline.run(task_ids[:2], 1, 2, args.endpoint, model_key="warmup")
    run = pipeline.run(task_ids[: args.rollouts], 1, args.concurrency, args.endpoint, endpoint_pid=args.endpoint_pid)
    return {
        "rollouts": run.rollouts,
        "passed": run.passed,
        "status": run.by_status,
        "execute_seconds": run.execute_seconds,
        "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds,
        "endpoint_cpu_seconds": run.endpoint_cpu_seconds,
        "peak_rss_mib": peak_rss_mib(),
    }


def child_main(argv: list[str]) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    args.concurrency = args.concurrency[0]
    return child(args)


def measure(concurrency: int, rollouts: int, latency: float, scenarios_dir: Path, endpoint: ModelEndpoint,
            workdir: Path, in_process: bool = False) -> dict[str, Any]:  # fmt: skip
    child_args = [
        "--child",
        "--scenarios-dir",
        str(scenarios_dir),
        "--data-dir",
        str(workdir),
        "--endpoint",
        endpoint.url,
        "--endpoint-pid",
        str(endpoint.pid),
        "--concurrency",
        str(concurrency),
        "--rollouts",
        str(rollouts),
    ]
    raw = run_child(Path(__file__), child_args, child_main, in_process=in_process, timeout=CHILD_TIMEOUT_SECONDS)
    ideal = concurrency / (CALLS_PER_ROLLOUT * latency)
    achieved = raw["rollouts"] / raw["execute_seconds"]
    end_to_end = raw["rollouts"] / raw["wall_seconds"]
    return {
        "concurrency": concurrency,
        **{k: round(v, 3) if isinstance(v, float) else v for k, v in raw.items()},
        "ideal_rollouts_per_second": round(ideal, 2),
        "achieved_rollouts_per_second": round(achieved, 2),
        "fraction_of_ideal": round(achieved / ideal, 3),
        "end_to_end_rollouts_per_second": round(end_to_end, 2),
        "end_to_end_fraction_of_ideal": round(end_to_end / ideal, 3),
        "cpu_ms_per_rollout": round(1000 * raw["cpu_seconds"] / raw["rollouts"], 1),
        "load_average": load_average(),
    }


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose fraction of ideal is the median (the lower middle one of an even count), with every run's
    fraction beside it, so the reported row is one real run rather than a blend of several."""
    ordered = sorted(runs, key=lambda r: r["fraction_of_ideal"])
    fractions = [r["fraction_of_ideal"] for r in runs]
    return {**ordered[(len(ordered) - 1) // 2], "repeats": len(runs), "fractions": fractions}


def target_text() -> str:
    return "; ".join(f">= {fraction:.0%} of ideal at concurrency {c}" for c, fraction in TARGETS.items())


def meets_targets(results: list[dict[str, Any]]) -> bool | None:
    """None when no targeted concurrency was measured."""
    checked = [r["fraction_of_ideal"] >= TARGETS[r["concurrency"]] for r in results if r["concurrency"] in TARGETS]
    return all(checked) if checked else None


def run(
    concurrencies: list[int], waves: int, latency: float, workdir: Path, in_process: bool = False, repeats: int = 1
) -> dict[str, Any]:
    counts = {c: max(c * waves, 20) for c in concurrencies}
    scenario = write_bench_scenario(workdir / "scenarios", max(counts.values()))
    load_before = load_average()
    results = []
    with ModelEndpoint(scenario.scenarios_dir, latency_seconds=latency, in_process=in_process) as endpoint:
        for concurrency in concurrencies:
            runs = []
            for attempt in range(repeats):
                folder = workdir / f"c{concurrency}-{attempt}"
                runs.append(
                    measure(
                        concurrency, counts[concurrency], latency, scenario.scenarios_dir, endpoint, folder, in_process
                    )
                )
                shutil.rmtree(folder, ignore_errors=True)
            results.append(median_run(runs))
    return {
        "benchmark": "latency_hiding",
        "command": command_line(),
        "latency_seconds": latency,
        "calls_per_rollout": CALLS_PER_ROLLOUT,
        "waves": waves,
        "repeats": repeats,
        "in_process": in_process,
        "target": target_text(),
        "meets_target": meets_targets(results),
        "results": results,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "machine": machine(),
        "measured_at": now_iso(),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Latency hiding (`{report['command']}`; {report['latency_seconds'] * 1000:g} ms per model call, "
        f"{report['calls_per_rollout']} calls per rollout, the median of {report['repeats']} runs each, load "
        f"{report['load_average_before'][0]} -> {report['load_average_after'][0]} on {report['machine']['cpus']} CPUs)",
        "",
        "| concurrency | rollouts | ideal rollouts/s | achieved rollouts/s | % of ideal (median) | every run | "
        "end-to-end % | CPU-ms/rollout | passed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        every = ", ".join(f"{f:.0%}" for f in r["fractions"])
        lines.append(
            f"| {r['concurrency']} | {r['rollouts']} | {r['ideal_rollouts_per_second']} | "
            f"{r['achieved_rollouts_per_second']} | **{r['fraction_of_ideal']:.0%}** | {every} | "
            f"{r['end_to_end_fraction_of_ideal']:.0%} | {r['cpu_ms_per_rollout']} | {r['passed']}/{r['rollouts']} |"
        )
    if report["meets_target"] is not None:
        verdict = "meets" if report["meets_target"] else "MISSES"
        lines += ["", f"Target ({report['target']}): {verdict}."]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--concurrency", nargs="+", type=int, default=list(DEFAULT_CONCURRENCY))
    parser.add_argument("--latency", type=float, default=DEFAULT_LATENCY_SECONDS, help="seconds per model call")
    parser.add_argument("--waves", type=int, default=10, help="rollouts = waves x concurrency (at least 20)")
    parser.add_argument(
        "--repeats", type=int, default=DEFAULT_REPEATS, help="runs per concurrency; the median is reported"
    )
    parser.add_argument("--out", default=str(RESULTS_DIR), help="where latency_hiding.{json,md} go ('' = nowhere)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenarios-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rollouts", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--in-process", action="store_true", help="runs and the endpoint in this process (smoke tests only)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child:
        args.concurrency = args.concurrency[0]
        print(json.dumps(child(args)))
        return 0
    if min(args.concurrency) < 1 or args.waves < 1 or args.repeats < 1 or args.latency <= 0:
        parser.error("--concurrency, --waves and --repeats must be at least 1 and --latency positive")
    workdir = Path(tempfile.mkdtemp(prefix="ep-latency-"))
    try:
        report = run(args.concurrency, args.waves, args.latency, workdir, args.in_process, args.repeats)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    write_report("latency_hiding", report, markdown(report), Path(args.out) if args.out else None)
    return 0 if report["meets_target"] in (True, None) else 1


if __name__ == "__main__":
    sys.exit(main())
