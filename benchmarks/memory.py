"""Memory: peak RSS of a 1,000 / 5,000 / 10,000-rollout sweep partition through our pipeline.

    .venv/bin/python benchmarks/memory.py                    # 1k and 10k rollouts

Targets: memory stays flat (peak RSS at the largest size within 10% of the smallest's) and under 1 GiB.

Each size runs in a fresh child process, the way the `rollouts` asset runs one partition: the embedded service
(SQLite run store, RolloutEngine, the built-in tool servers over HTTP in their own process, verifiers, artifacts
JSON) then `run_and_collect` writes every trace and the rollouts/messages/tool_calls Parquet. The peak RSS
reported and held to the target is the pipeline's: this process plus the tool-server process plus every worker
process alive during the run (the service's verifier worker, and rollout workers when the run's concurrency starts
any), each by its own peak (VmHWM), sampled while it lives. Not RUSAGE_CHILDREN: it counts only children already
waited for (the verifier worker outlives the run), and a forked-then-exec'd child's figure there includes the
parent's pages at the fork. The task is small (a copy of
email_ops_001: one tool call and a final answer) and the model is sim-oracle with zero latency, in its own
process (not counted). 100 tasks x rollout_count = rollouts. A sampler thread records the RSS as rollouts
finish, so the report shows whether memory grows with the rollout count (held) or stays flat (streamed).

Results: JSON on stdout and in `benchmarks/results/memory.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import threading
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
    descendant_pids,
    load_average,
    machine,
    now_iso,
    peak_rss_mib,
    process_peak_rss_mib,
    run_child,
    write_bench_scenario,
    write_report,
)

DEFAULT_SIZES = (1_000, 10_000)
SMALL_TASK = "email_ops_001"
TASKS = 100
TARGET_MIB = 1024.0
#: Flat memory: the largest size's peak RSS may exceed the smallest's by at most this fraction.
TARGET_GROWTH = 0.10
SAMPLE_SECONDS = 0.5
CHILD_TIMEOUT_SECONDS = 4 * 3600.0


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class RssSampler:
    """Samples this process's RSS against the number of finished rollouts, and the peak RSS of each process it
    started (but those in `counted_apart`), in a daemon thread. A worker's growth in its last `SAMPLE_SECONDS`
    before exiting is missed; one alive at the end is read then too."""

    def __init__(self, counted_apart: set[int]) -> None:
        self.finished = 0
        self.samples: list[tuple[float, int, float]] = []  # (seconds, rollouts finished, RSS MiB)
        self.worker_peaks: dict[int, float] = {}  # pid -> peak RSS MiB
        self._counted_apart = counted_apart
        self._stop = threading.Event()
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def rollout_done(self) -> None:
        self.finished += 1

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.samples.append((round(time.perf_counter() - self._started, 1), self.finished, rss_mib()))
            self._sample_workers()

    def _sample_workers(self) -> None:
        for pid in descendant_pids():
            if pid in self._counted_apart:
                continue
            with contextlib.suppress(OSError):  # exited meanwhile
                self.worker_peaks[pid] = max(self.worker_peaks.get(pid, 0.0), process_peak_rss_mib(pid))

    def workers_peak_mib(self) -> float:
        """The sum of the worker processes' peaks."""
        return round(sum(self.worker_peaks.values()), 1)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample_workers()

    def by_progress(self, total: int) -> list[dict[str, Any]]:
        """The highest RSS seen up to each tenth of the rollouts."""
        marks = []
        for tenth in range(1, 11):
            upto = [rss for _, done, rss in self.samples if done <= total * tenth / 10]
            if upto:
                marks.append({"rollouts_finished": total * tenth // 10, "max_rss_mib": max(upto)})
        return marks


def child(args: argparse.Namespace) -> dict[str, Any]:
    pipeline = OurPipeline(args.scenarios_dir, args.data_dir)
    try:
        return _measure(pipeline, args)
    finally:
        # Run in-process, the next size must not see this size's verifier worker.
        pipeline.close()


def _measure(pipeline: OurPipeline, args: argparse.Namespace) -> dict[str, Any]:
    task_ids = sorted(pipeline.scenario.tasks())
    pipeline.run(task_ids[:2], 1, 2, args.endpoint, model_key="warmup")
    rss_before = rss_mib()
    tasks = task_ids[: min(len(task_ids), args.rollouts)]
    rollout_count = max(1, args.rollouts // len(tasks))
    tool_host_pid = pipeline.runtime.tool_host_pid
    with RssSampler({tool_host_pid} if tool_host_pid else set()) as sampler:
        run = pipeline.run(
            tasks,
            rollout_count,
            args.max_parallel,
            args.endpoint,
            timeout_seconds=CHILD_TIMEOUT_SECONDS,
            on_rollout_done=sampler.rollout_done,
        )
    executing = [rss for _, done, rss in sampler.samples if done < run.rollouts]
    tool_host_peak = process_peak_rss_mib(tool_host_pid) if tool_host_pid else 0.0
    own_peak, workers_peak = peak_rss_mib(), sampler.workers_peak_mib()
    return {
        "rollouts": run.rollouts,
        "passed": run.passed,
        "status": run.by_status,
        "wall_seconds": round(run.wall_seconds, 1),
        "execute_seconds": round(run.execute_seconds, 1),
        "cpu_ms_per_rollout": round(1000 * run.cpu_seconds / run.rollouts, 1),
        "rss_before_mib": rss_before,
        "max_rss_while_executing_mib": max(executing, default=None),
        "peak_rss_mib": round(own_peak + tool_host_peak + workers_peak, 1),
        "runner_peak_rss_mib": own_peak,
        "tool_host_peak_rss_mib": tool_host_peak,
        "workers_peak_rss_mib": workers_peak,
        "rss_by_progress": sampler.by_progress(run.rollouts),
        "data_mib": round(sum(p.stat().st_size for p in args.data_dir.rglob("*") if p.is_file()) / 2**20, 1),
    }


def child_main(argv: list[str]) -> dict[str, Any]:
    return child(build_parser().parse_args(argv))


def run(sizes: list[int], max_parallel: int, workdir: Path, in_process: bool = False) -> dict[str, Any]:
    scenario = write_bench_scenario(workdir / "scenarios", TASKS, source_task=SMALL_TASK)
    load_before = load_average()
    results = []
    with ModelEndpoint(scenario.scenarios_dir, in_process=in_process) as endpoint:
        for size in sizes:
            folder = workdir / f"n{size}"
            child_args = [
                "--child",
                "--scenarios-dir",
                str(scenario.scenarios_dir),
                "--data-dir",
                str(folder),
                "--endpoint",
                endpoint.url,
                "--rollouts",
                str(size),
                "--max-parallel",
                str(max_parallel),
            ]
            result = run_child(
                Path(__file__), child_args, child_main, in_process=in_process, timeout=CHILD_TIMEOUT_SECONDS
            )
            results.append({"requested": size, **result, "load_average": load_average()})
            shutil.rmtree(folder, ignore_errors=True)
    largest = max(results, key=lambda r: r["rollouts"])
    smallest = min(results, key=lambda r: r["rollouts"])
    return {
        "benchmark": "memory",
        "command": command_line(),
        "task": f"{SMALL_TASK} copy (1 tool call + final answer), {TASKS} tasks x rollout_count, zero-latency model",
        "max_parallel": max_parallel,
        "in_process": in_process,
        "target": (
            f"peak RSS at {largest['rollouts']:,} rollouts within {TARGET_GROWTH:.0%} of {smallest['rollouts']:,}'s "
            f"and < {TARGET_MIB:g} MiB"
        ),
        "growth": round(largest["peak_rss_mib"] / smallest["peak_rss_mib"] - 1, 3),
        "meets_target": largest["peak_rss_mib"] < TARGET_MIB
        and largest["peak_rss_mib"] <= (1 + TARGET_GROWTH) * smallest["peak_rss_mib"],
        "peak_growth_mib_per_1000_rollouts": round(
            (largest["peak_rss_mib"] - smallest["peak_rss_mib"])
            / max(1, largest["rollouts"] - smallest["rollouts"])
            * 1000,
            1,
        ),
        "results": results,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "machine": machine(),
        "measured_at": now_iso(),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Memory (`{report['command']}`; {report['task']}, max_parallel {report['max_parallel']})",
        "",
        "| rollouts | peak RSS MiB (all processes) | runner / tool servers / workers MiB "
        "| max runner RSS while executing MiB "
        "| RSS before MiB | wall s | CPU-ms/rollout | data written MiB | passed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['rollouts']:,} | **{r['peak_rss_mib']}** | {r['runner_peak_rss_mib']} / "
            f"{r['tool_host_peak_rss_mib']} / {r['workers_peak_rss_mib']} | {r['max_rss_while_executing_mib']} | "
            f"{r['rss_before_mib']} | {r['wall_seconds']} | {r['cpu_ms_per_rollout']} | {r['data_mib']} | "
            f"{r['passed']:,}/{r['rollouts']:,} |"
        )
    verdict = "meets" if report["meets_target"] else "MISSES"
    lines += [
        "",
        f"Target ({report['target']}): {verdict}. Peak grows {report['growth']:.1%} from the smallest size to "
        f"the largest, {report['peak_growth_mib_per_1000_rollouts']} MiB per 1,000 rollouts.",
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=list(DEFAULT_SIZES))
    parser.add_argument("--max-parallel", type=int, default=10)
    parser.add_argument("--out", default=str(RESULTS_DIR), help="where memory.{json,md} go ('' = nowhere)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenarios-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--rollouts", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--in-process", action="store_true", help="runs and the endpoint in this process (smoke tests only)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    if min(args.sizes) < 1 or args.max_parallel < 1:
        parser.error("--sizes and --max-parallel must be at least 1")
    workdir = Path(tempfile.mkdtemp(prefix="ep-memory-"))
    try:
        report = run(sorted(args.sizes), args.max_parallel, workdir, args.in_process)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    write_report("memory", report, markdown(report), Path(args.out) if args.out else None)
    return 0 if report["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
