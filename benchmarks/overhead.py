"""Orchestration overhead versus Inspect AI, side by side in one run on the same machine.

    .venv/bin/python benchmarks/overhead.py                  # 200 x 1 and 100 x 5; target: ours >= 1.5x Inspect

The task on both sides: a copy of email_ops_011 (5 tool calls, then a final answer), scored by the scenario's own
state verifier, against a zero-latency model.

- **ours**: the `rollouts` asset's path without Dagster (`pipeline.steps.run_and_collect` on the embedded
  service): SQLite run store, RolloutEngine with workspaces on the real built-in email server over HTTP, the
  reference agent, state snapshots and diffs, verifiers, artifacts JSON, traces and Parquet rows. N samples x k
  epochs = N tasks x rollout_count k.
- **inspect-openai**: Inspect's `eval()` with `@tool` functions over a per-sample mailbox, the same verifier as
  the scorer, and Inspect's OpenAI-compatible provider pointed at the *same* endpoint process as ours. Both
  sides make the same model calls over HTTP, so this is the like-for-like comparison (the headline ratio).
- **inspect-mockllm**: the same task on Inspect's in-process `mockllm` (no model HTTP at all): Inspect's best
  case, reported beside it.

The endpoint (sim-oracle, zero latency) is a separate process; its CPU is reported on its own line. Each side
runs in a fresh child process (imports and a 2-rollout warm-up are not timed) at the same concurrency.
CPU = user + system time of the side's whole process tree: for ours, the runner (all threads), any rollout
workers and the tool-server process; for Inspect, its process (its tools are in-process Python functions).
Inspect AI lives in `benchmarks/.venv-inspect` (it pins packages differently from this project):

    python3.11 -m venv benchmarks/.venv-inspect
    benchmarks/.venv-inspect/bin/pip install -r benchmarks/requirements-inspect.txt

Results: JSON on stdout and in `benchmarks/results/overhead.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import (
    INSPECT_PYTHON,
    RESULTS_DIR,
    ModelEndpoint,
    OurPipeline,
    command_line,
    load_average,
    machine,
    now_iso,
    peak_rss_mib,
    run_child,
    run_json_child,
    write_bench_scenario,
    write_report,
)

OURS, INSPECT_OPENAI, INSPECT_MOCKLLM = "ours", "inspect-openai", "inspect-mockllm"
SIDES = (OURS, INSPECT_OPENAI, INSPECT_MOCKLLM)
INSPECT_SIDES = (INSPECT_OPENAI, INSPECT_MOCKLLM)
#: The like-for-like comparison: both sides call the same model endpoint over HTTP.
HEADLINE = INSPECT_OPENAI
TARGET_RATIO = 1.5
DEFAULT_SIZES = ("200x1", "100x5")
CHILD_TIMEOUT_SECONDS = 1800.0


def parse_size(text: str) -> tuple[int, int]:
    samples, _, epochs = text.partition("x")
    try:
        size = int(samples), int(epochs or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must read SAMPLESxEPOCHS, e.g. 200x1; got {text!r}") from None
    if min(size) < 1:
        raise argparse.ArgumentTypeError(f"samples and epochs must be at least 1; got {text!r}")
    return size


def _dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


# --- children ---------------------------------------------------------------------------------------------------


def ours_child(args: argparse.Namespace) -> dict[str, Any]:
    """Runs in a fresh process: warm up, then one timed run of samples x epochs through our pipeline."""
    pipeline = OurPipeline(args.scenarios_dir, args.data_dir)
    task_ids = sorted(pipeline.scenario.tasks())
    if args.warmup:
        pipeline.run(task_ids[: args.warmup], 1, args.max_parallel, args.endpoint, model_key="warmup")
    before = _dir_bytes(args.data_dir)
    run = pipeline.run(
        task_ids[: args.samples], args.epochs, args.max_parallel, args.endpoint, endpoint_pid=args.endpoint_pid
    )
    return {
        "rollouts": run.rollouts,
        "passed": run.passed,
        "status": run.by_status,
        "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds,
        "endpoint_cpu_seconds": run.endpoint_cpu_seconds,
        "artifact_bytes": _dir_bytes(args.data_dir) - before,
        "peak_rss_mib": peak_rss_mib(),
    }


def child_main(argv: list[str]) -> dict[str, Any]:
    return ours_child(build_parser().parse_args(argv))


def run_side(
    side: str,
    samples: int,
    epochs: int,
    max_parallel: int,
    scenarios_dir: Path,
    scenario_dir: Path,
    endpoint: ModelEndpoint,
    workdir: Path,
    in_process: bool = False,
) -> dict[str, Any]:
    size = ["--samples", str(samples), "--epochs", str(epochs), "--endpoint", endpoint.url,
            "--endpoint-pid", str(endpoint.pid)]  # fmt: skip
    completions_before = endpoint.chat_completions()
    if side == OURS:
        args = ["--child", "--scenarios-dir", str(scenarios_dir), "--data-dir", str(workdir / "data"),
                "--max-parallel", str(max_parallel), *size]  # fmt: skip
        raw = run_child(Path(__file__), args, child_main, in_process=in_process, timeout=CHILD_TIMEOUT_SECONDS)
    else:
        model = "openai" if side == INSPECT_OPENAI else "mockllm"
        command = [str(INSPECT_PYTHON), str(Path(__file__).resolve().parent / "inspect_task.py"), "--scenario-dir",
                   str(scenario_dir), "--model", model, "--log-dir", str(workdir / "logs"),
                   "--max-samples", str(max_parallel), *size]  # fmt: skip
        raw = run_json_child(command, timeout=CHILD_TIMEOUT_SECONDS)
    # Warm-up included: proof that a side called the shared endpoint, and how often for the same task shape.
    raw["endpoint_chat_completions"] = endpoint.chat_completions() - completions_before
    return summarise(raw)


def summarise(raw: dict[str, Any]) -> dict[str, Any]:
    rollouts = raw["rollouts"]
    cpu_ms = 1000 * raw["cpu_seconds"] / rollouts
    endpoint_ms = 1000 * raw["endpoint_cpu_seconds"] / rollouts if raw.get("endpoint_cpu_seconds") is not None else 0.0
    return {
        **raw,
        "rollouts_per_second": round(rollouts / raw["wall_seconds"], 2),
        "cpu_ms_per_rollout": round(cpu_ms, 2),
        "endpoint_cpu_ms_per_rollout": round(endpoint_ms, 2),
        "total_cpu_ms_per_rollout": round(cpu_ms + endpoint_ms, 2),
        "rollouts_per_cpu_second": round(1000 / cpu_ms, 1),
        "wall_seconds": round(raw["wall_seconds"], 3),
        "cpu_seconds": round(raw["cpu_seconds"], 3),
    }


# --- the run ----------------------------------------------------------------------------------------------------


def _median(results: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in results), 2)


def run(
    sizes: list[tuple[int, int]],
    sides: list[str],
    max_parallel: int,
    repeats: int,
    workdir: Path,
    in_process: bool = False,
) -> dict[str, Any]:
    missing_inspect = not INSPECT_PYTHON.is_file()
    skipped = {s: f"{INSPECT_PYTHON} not found (see --help)" for s in sides if s in INSPECT_SIDES and missing_inspect}
    active = [s for s in sides if s not in skipped]
    scenario = write_bench_scenario(workdir / "scenarios", max(samples for samples, _ in sizes))
    load_before = load_average()
    measurements: list[dict[str, Any]] = []
    with ModelEndpoint(scenario.scenarios_dir, in_process=in_process) as endpoint:
        for samples, epochs in sizes:
            for repeat in range(repeats):
                # Rotating the order spreads slow drifts in the machine's load over every side.
                order = active[repeat % len(active) :] + active[: repeat % len(active)]
                for side in order:
                    run_dir = workdir / f"{side}-{samples}x{epochs}-{repeat}"
                    result = run_side(
                        side, samples, epochs, max_parallel, scenario.scenarios_dir, scenario.scenario_dir,
                        endpoint, run_dir, in_process,
                    )  # fmt: skip
                    shutil.rmtree(run_dir, ignore_errors=True)
                    measurements.append(
                        {"side": side, "samples": samples, "epochs": epochs, "repeat": repeat, "load": load_average()}
                        | result
                    )
    comparisons: list[dict[str, Any]] = []
    for samples, epochs in sizes:
        rows = {
            side: [m for m in measurements if m["side"] == side and (m["samples"], m["epochs"]) == (samples, epochs)]
            for side in active
        }
        medians = {
            side: {
                key: _median(results, key)
                for key in (
                    "rollouts_per_second",
                    "cpu_ms_per_rollout",
                    "endpoint_cpu_ms_per_rollout",
                    "total_cpu_ms_per_rollout",
                    "rollouts_per_cpu_second",
                )
            }
            | {"passed": min(r["passed"] for r in results), "rollouts": results[0]["rollouts"]}
            for side, results in rows.items()
            if results
        }
        ratios: dict[str, dict[str, float]] = {}
        if OURS in medians:
            for other in (s for s in INSPECT_SIDES if s in medians):
                ratios[other] = {
                    "throughput": round(
                        medians[OURS]["rollouts_per_second"] / medians[other]["rollouts_per_second"], 2
                    ),
                    "cpu_per_rollout": round(
                        medians[other]["cpu_ms_per_rollout"] / medians[OURS]["cpu_ms_per_rollout"], 2
                    ),
                }
        comparisons.append({"samples": samples, "epochs": epochs, "medians": medians, "ours_vs": ratios})
    headline = [c["ours_vs"][HEADLINE]["throughput"] for c in comparisons if HEADLINE in c["ours_vs"]]
    return {
        "benchmark": "overhead",
        "command": command_line(),
        "task": "email_ops_011 copy: 5 tool calls + final answer, state verifier, zero-latency sim-oracle",
        "max_parallel": max_parallel,
        "repeats": repeats,
        "in_process": in_process,
        "sides": active,
        "skipped": skipped,
        "headline": f"ours vs {HEADLINE} (both call the same model endpoint over HTTP)",
        "target_ratio": TARGET_RATIO,
        "meets_target": bool(headline) and min(headline) >= TARGET_RATIO,
        "comparisons": comparisons,
        "measurements": measurements,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "machine": machine(),
        "measured_at": now_iso(),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Overhead vs Inspect AI (`{report['command']}`; concurrency {report['max_parallel']}, "
        f"median of {report['repeats']}, load {report['load_average_before'][0]} -> "
        f"{report['load_average_after'][0]} on {report['machine']['cpus']} CPUs)",
        "",
        "| samples x epochs | side | rollouts/s | CPU-ms/rollout (process) | endpoint CPU-ms/rollout | passed |",
        "|---|---|---|---|---|---|",
    ]
    for comparison in report["comparisons"]:
        for side, m in comparison["medians"].items():
            lines.append(
                f"| {comparison['samples']} x {comparison['epochs']} | {side} | {m['rollouts_per_second']} | "
                f"{m['cpu_ms_per_rollout']} | {m['endpoint_cpu_ms_per_rollout']} | {m['passed']}/{m['rollouts']} |"
            )
        for other, ratio in comparison["ours_vs"].items():
            lines.append(
                f"| {comparison['samples']} x {comparison['epochs']} | **ours / {other}** | "
                f"**{ratio['throughput']}x** | {ratio['cpu_per_rollout']}x less CPU | | |"
            )
    verdict = "meets" if report["meets_target"] else "MISSES"
    lines += ["", f"Headline ({report['headline']}): {verdict} the {report['target_ratio']}x target."]
    if report["skipped"]:
        lines.append(f"Skipped: {report['skipped']}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=parse_size, default=[parse_size(s) for s in DEFAULT_SIZES])
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--max-parallel", type=int, default=10, help="rollouts in flight (Inspect: max_samples)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per side and size; the median is reported")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the run folders here")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="where overhead.{json,md} go ('' = nowhere)")
    parser.add_argument(
        "--in-process", action="store_true", help="our side and the endpoint in this process (smoke tests only)"
    )
    # The child process of one side ('ours'); the parent passes these.
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenarios-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=int, default=200, help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=2, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(ours_child(args)))
        return 0
    if args.max_parallel < 1 or args.repeats < 1:
        parser.error("--max-parallel and --repeats must be at least 1")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ep-overhead-"))
    try:
        report = run(args.sizes, args.sides, args.max_parallel, args.repeats, workdir, args.in_process)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    write_report("overhead", report, markdown(report), Path(args.out) if args.out else None)
    return 0 if report["meets_target"] or not report["comparisons"][0]["ours_vs"] else 1


if __name__ == "__main__":
    sys.exit(main())
