"""The cost of a benchmark rollout (BFCL multi-turn, τ² airline) beside a built-in task's, measured the same way
in one run.

    .venv/bin/python benchmarks/benchmark_rollout_cost.py                      # 20 rollouts a side
    .venv/bin/python benchmarks/benchmark_rollout_cost.py --rollouts 50 --bfcl-family bfcl_multi_turn_miss_func

Sides, each the first N tasks of its scenario x 1 rollout, sim-oracle on a zero-latency endpoint:

- **builtin**: a copy of email_ops_011 (5 tool calls, then a final answer; the overhead benchmark's task);
- **bfcl**: a BFCL v4 multi-turn category (default `bfcl_multi_turn_base`): scripted user turns, the `bfcl` tool
  server whose state lives in the upstream worker (bfcl-eval's own classes in its cached venv), our verifier;
- **tau2**: `tau2_airline`, its user played by `sim-user` on the same endpoint, the `tau2_airline` tool server
  (τ²'s own environment in its venv), our verifier.

Each side runs in a fresh child process through the `rollouts` asset's path without Dagster
(`pipeline.steps.run_and_collect` on the embedded service, as `benchmarks/overhead.py` does); one warm-up rollout
(which also starts the upstream worker) is not timed. CPU = user + system time of every process of this project
during the timed run (the runner, its verifier workers, the tool-server process and the upstream worker under it);
the upstream worker's own share is also named on its own, and the endpoint (the simulated agent and user models,
a separate process) is reported apart. Bytes per rollout = the data folder's growth (run store, artifacts, Parquet);
the benchmark scenarios are materialised beforehand (once per pinned version, where sweeps make them) and not counted.

Results: JSON on stdout and in `benchmarks/results/benchmark_rollout_cost.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import (
    BENCH_SCENARIO_ID,
    RESULTS_DIR,
    ModelEndpoint,
    OurPipeline,
    command_line,
    load_average,
    machine,
    now_iso,
    process_cpu_seconds,
    run_child,
    write_bench_scenario,
    write_report,
)

BUILTIN = "builtin"
BFCL = "bfcl"
TAU2 = "tau2"
SIDES = (BUILTIN, BFCL, TAU2)
DEFAULT_BFCL_FAMILY = "bfcl_multi_turn_base"
TAU2_FAMILY = "tau2_airline"
#: Plays the τ² user on the endpoint, as in a sweep's default for benchmarks.
SIM_USER = "sim-user"
#: A BFCL task may take 20 steps in each of its turns; a rollout's cap must not end one early.
BENCHMARK_MAX_STEPS = 400
#: What the upstream worker runs (`benchmarks/<name>/upstream_worker.py`): how its process is told apart.
UPSTREAM_WORKER_SCRIPT = "upstream_worker.py"
CHILD_TIMEOUT_SECONDS = 1800.0


def _dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _descendants(root_pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[-1].split()[1])
        except (OSError, IndexError, ValueError):  # exited meanwhile
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, frontier = [], [root_pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.append(child)
            frontier.append(child)
    return found


def upstream_worker_cpu_seconds() -> dict[int, float]:
    """CPU so far of each upstream worker below this process (pid -> seconds)."""
    found: dict[int, float] = {}
    for pid in _descendants(os.getpid()):
        try:
            if UPSTREAM_WORKER_SCRIPT in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                found[pid] = process_cpu_seconds(pid)
        except OSError:
            continue
    return found


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """The workers' CPU between two readings; a worker started in between counts from zero. One that exited in
    between is not seen here (its time is in the tree's total all the same)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


# --- the child: one side, in a fresh process --------------------------------------------------------------------


def side_child(args: argparse.Namespace) -> dict[str, Any]:
    pipeline = OurPipeline(args.scenarios_dir, args.data_dir, scenario_id=args.scenario_id)
    task_ids = sorted(pipeline.scenario.tasks())[: args.samples]
    if len(task_ids) < args.samples:
        raise SystemExit(f"{args.scenario_id} has {len(task_ids)} tasks; --rollouts asks for {args.samples}")
    settings = {"user_model": args.user_model, "max_steps": args.max_steps}
    pipeline.run(task_ids[:1], 1, args.max_parallel, args.endpoint, model_key="warmup", **settings)
    bytes_before = _dir_bytes(args.data_dir)
    workers_before = upstream_worker_cpu_seconds()
    run = pipeline.run(
        task_ids, 1, args.max_parallel, args.endpoint, endpoint_pid=args.endpoint_pid, **settings
    )  # fmt: skip
    return {
        "scenario_id": pipeline.scenario.scenario_id,
        "rollouts": run.rollouts,
        "passed": run.passed,
        "status": run.by_status,
        "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds,
        "upstream_worker_cpu_seconds": cpu_between(workers_before, upstream_worker_cpu_seconds()),
        "endpoint_cpu_seconds": run.endpoint_cpu_seconds,
        "artifact_bytes": _dir_bytes(args.data_dir) - bytes_before,
    }


def child_main(argv: list[str]) -> dict[str, Any]:
    return side_child(build_parser().parse_args(argv))


# --- the run ----------------------------------------------------------------------------------------------------


def summarise(side: str, raw: dict[str, Any]) -> dict[str, Any]:
    rollouts = raw["rollouts"]

    def per_rollout_ms(seconds: float | None) -> float:
        return round(1000 * (seconds or 0.0) / rollouts, 2)

    return {
        "side": side,
        **raw,
        "cpu_ms_per_rollout": per_rollout_ms(raw["cpu_seconds"]),
        "upstream_worker_cpu_ms_per_rollout": per_rollout_ms(raw["upstream_worker_cpu_seconds"]),
        "ours_without_upstream_cpu_ms_per_rollout": per_rollout_ms(
            raw["cpu_seconds"] - raw["upstream_worker_cpu_seconds"]
        ),
        "endpoint_cpu_ms_per_rollout": per_rollout_ms(raw["endpoint_cpu_seconds"]),
        "bytes_per_rollout": round(raw["artifact_bytes"] / rollouts),
        "wall_seconds": round(raw["wall_seconds"], 3),
    }


def materialise_benchmarks(families: list[str]) -> dict[str, str]:
    """Make the benchmark scenarios (and their venvs) before anything is timed, in the data folder sweeps use
    (`EVAL_PIPELINES_DATA_DIR`), where they are made once per pinned version: family -> scenario id."""
    from eval_pipelines.benchmarks import catalog

    made: dict[str, str] = {}
    for family in families:
        catalog.materialise(family)
        adapter = catalog.adapter_of(family)
        assert adapter is not None  # materialise refuses an unknown family
        made[family] = f"{family}:{adapter.version}"
    return made


def run(
    sides: list[str], rollouts: int, bfcl_family: str, max_parallel: int, workdir: Path, in_process: bool = False
) -> dict[str, Any]:
    families = {BFCL: bfcl_family, TAU2: TAU2_FAMILY}
    made = materialise_benchmarks([families[side] for side in sides if side in families])
    scenario_ids = {side: made[families[side]] if side in families else BENCH_SCENARIO_ID for side in sides}
    scenarios = write_bench_scenario(workdir / "scenarios", rollouts)
    load_before = load_average()
    results: list[dict[str, Any]] = []
    with ModelEndpoint(scenarios.scenarios_dir, in_process=in_process) as endpoint:
        for side in sides:
            run_dir = workdir / f"{side}-data"
            child_args = ["--child", "--scenarios-dir", str(scenarios.scenarios_dir), "--data-dir", str(run_dir),
                          "--scenario-id", scenario_ids[side], "--samples", str(rollouts), "--max-parallel",
                          str(max_parallel), "--endpoint", endpoint.url,
                          "--endpoint-pid", str(endpoint.pid)]  # fmt: skip
            if side != BUILTIN:
                child_args += ["--max-steps", str(BENCHMARK_MAX_STEPS)]
            if side == TAU2:
                child_args += ["--user-model", SIM_USER]
            raw = run_child(
                Path(__file__), child_args, child_main, in_process=in_process, timeout=CHILD_TIMEOUT_SECONDS
            )
            shutil.rmtree(run_dir, ignore_errors=True)
            results.append(summarise(side, raw) | {"load": load_average()})
    builtin = next((r for r in results if r["side"] == BUILTIN), None)
    if builtin is not None:
        for result in results:
            result["cpu_vs_builtin"] = round(result["cpu_ms_per_rollout"] / builtin["cpu_ms_per_rollout"], 2)
            result["bytes_vs_builtin"] = round(result["bytes_per_rollout"] / builtin["bytes_per_rollout"], 2)
    return {
        "benchmark": "benchmark_rollout_cost",
        "command": command_line(),
        "rollouts_per_side": rollouts,
        "max_parallel": max_parallel,
        "in_process": in_process,
        "scenarios": scenario_ids,
        "results": results,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "machine": machine(),
        "measured_at": now_iso(),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Cost of a rollout (`{report['command']}`; {report['rollouts_per_side']} rollouts a side, concurrency "
        f"{report['max_parallel']}, load {report['load_average_before'][0]} -> {report['load_average_after'][0]} on "
        f"{report['machine']['cpus']} CPUs, `{report['machine']['git_revision']}`)",
        "",
        "| side | scenario | passed | CPU-ms/rollout, all our processes | of which the upstream worker | "
        "endpoint CPU-ms/rollout | bytes/rollout | vs builtin (CPU, bytes) | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        versus = f"{r['cpu_vs_builtin']}x, {r['bytes_vs_builtin']}x" if "cpu_vs_builtin" in r else "-"
        lines.append(
            f"| {r['side']} | {r['scenario_id']} | {r['passed']}/{r['rollouts']} | {r['cpu_ms_per_rollout']} | "
            f"{r['upstream_worker_cpu_ms_per_rollout']} | {r['endpoint_cpu_ms_per_rollout']} | "
            f"{int(r['bytes_per_rollout']):,} | {versus} | {r['wall_seconds']} |"
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=20, help="rollouts a side (its first N tasks, 1 each)")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--bfcl-family", default=DEFAULT_BFCL_FAMILY, help="the BFCL multi-turn category measured")
    parser.add_argument("--max-parallel", type=int, default=4, help="rollouts in flight")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the run folders here")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="where the .json and .md go ('' = nowhere)")
    parser.add_argument("--in-process", action="store_true", help="sides and endpoint in this process (tests only)")
    # One side's child process; the parent passes these.
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenarios-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--scenario-id", help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--user-model", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--max-steps", type=int, default=None, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(side_child(args)))
        return 0
    if args.rollouts < 1 or args.max_parallel < 1:
        parser.error("--rollouts and --max-parallel must be at least 1")
    if not args.bfcl_family.startswith("bfcl_multi_turn_"):
        parser.error(f"--bfcl-family must be a BFCL multi-turn category, e.g. {DEFAULT_BFCL_FAMILY}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ep-benchmark-cost-"))
    try:
        report = run(args.sides, args.rollouts, args.bfcl_family, args.max_parallel, workdir, args.in_process)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    write_report("benchmark_rollout_cost", report, markdown(report), Path(args.out) if args.out else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
