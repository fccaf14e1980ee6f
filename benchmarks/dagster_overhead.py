"""Dagster overhead: a sweep of 20 small partitions through Dagster versus the same work run directly.

    .venv/bin/python benchmarks/dagster_overhead.py          # 20 partitions x 2 rollouts

The sweep: 20 simulated models (sim-oracle, `sim://local`) x the benchmark scenario (copies of email_ops_001: one
tool call and a final answer), 2 tasks x rollout_count 1 per partition. Each side runs in a fresh child process
with its own data directory, after one untimed warm-up partition:

- **dagster**: what `eval-pipelines sweep --skip-assessment` does: `dg.materialize([eval_run, rollouts,
  verification])` per partition on a SQLite Dagster instance (the repository's dagster.yaml, storage moved to a
  temporary folder), then `eval_catalog`.
- **direct**: the same steps without Dagster: `launch_request` -> `run_and_collect` -> `verify_partition` per
  partition on one embedded backend, then `build_catalog`.
- **cli** (reference): the `eval-pipelines sweep --skip-assessment` process itself, wall time including
  interpreter start and imports.

Results: JSON on stdout and in `benchmarks/results/dagster_overhead.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import (
    BENCH_SCENARIO_ID,
    REPO_ROOT,
    RESULTS_DIR,
    command_line,
    cpu_seconds,
    load_average,
    machine,
    now_iso,
    run_child,
    write_bench_scenario,
    write_report,
)

SMALL_TASK = "email_ops_001"
SWEEP = "bench-dagster"
WARMUP_SWEEP = "bench-warmup"
SWEEP_ID = "bench"
DEFAULT_PARTITIONS = 20
DEFAULT_TASKS = 2
CHILD_TIMEOUT_SECONDS = 3600.0


def model_names(count: int) -> list[str]:
    return [f"bench-m{index:02d}" for index in range(1, count + 1)]


def write_sweeps(sweeps_dir: Path, partitions: int, tasks: int) -> None:
    """The timed sweep, and a one-model sweep for the warm-up partition (so the CLI runs only the timed one)."""
    sweeps_dir.mkdir(parents=True, exist_ok=True)
    task_ids = [f"bench_{i:05d}" for i in range(tasks)]

    def sweep(name: str, models: list[str]) -> str:
        lines = [f"name: {name}", "scenarios:", f'  - "{BENCH_SCENARIO_ID}"', "models:"]
        for model in models:
            lines += [
                f"  - name: {model}",
                "    model: sim-oracle",
                "    base_url: sim://local",
                "    temperature: 0.0",
            ]
        lines += ["task_ids:", *(f"  - {t}" for t in task_ids), "rollout_count: 1", "max_parallel: 8"]
        return "\n".join(lines) + "\n"

    (sweeps_dir / f"{SWEEP}.yaml").write_text(sweep(SWEEP, model_names(partitions)), encoding="utf-8")
    (sweeps_dir / f"{WARMUP_SWEEP}.yaml").write_text(sweep(WARMUP_SWEEP, ["bench-warmup"]), encoding="utf-8")


def write_dagster_home(home: Path) -> None:
    """The repository's dagster.yaml with its storage moved under `home`."""
    home.mkdir(parents=True, exist_ok=True)
    config = (REPO_ROOT / "dagster.yaml").read_text(encoding="utf-8")
    config = re.sub(r"base_dir: data/dagster", f"base_dir: {home / 'storage'}", config)
    (home / "dagster.yaml").write_text(config, encoding="utf-8")


# --- children ---------------------------------------------------------------------------------------------------


def dagster_child(partitions: int) -> dict[str, Any]:
    """What `eval-pipelines sweep --skip-assessment` runs: `defs.runner.SweepRun.execute`, i.e. one
    `dg.materialize` of the partition steps per partition, then `eval_catalog`."""
    from eval_pipelines.defs.runner import SweepRun
    from eval_pipelines.inputs.paths import sweeps_dir
    from eval_pipelines.inputs.scenarios import ScenarioCatalog
    from eval_pipelines.inputs.sweeps import load_all_sweeps

    scenario = ScenarioCatalog().get(BENCH_SCENARIO_ID)
    sweeps = load_all_sweeps(sweeps_dir())

    def sweep_run(name: str) -> SweepRun:
        return SweepRun(sweep=sweeps[name], sweep_id=SWEEP_ID, scenarios=[scenario], sweeps_dir=sweeps_dir(),
                        skip_assessment=True)  # fmt: skip

    sweep_run(WARMUP_SWEEP).execute(lambda model, scenario: None)
    starts: list[float] = []
    cpu_before, started = cpu_seconds(), time.perf_counter()
    failures = sweep_run(SWEEP).execute(lambda model, scenario: starts.append(time.perf_counter()))
    wall = time.perf_counter() - started
    return {
        "partitions_succeeded": partitions - len([f for f in failures if f != "eval_catalog"]),
        "catalog_succeeded": "eval_catalog" not in failures,
        "failures": failures,
        # The catalog step is not announced; counting from the starts, the last partition runs to the end.
        "seconds_per_partition": None if len(starts) < 2 else (starts[-1] - starts[0]) / (len(starts) - 1),
        "wall_seconds": wall,
        "cpu_seconds": cpu_seconds() - cpu_before,
    }


def direct_child(partitions: int) -> dict[str, Any]:
    """The same steps as the assets, called directly: launch, wait and collect, verify per partition (through the
    local service's client, as the assets do); then the catalog."""
    from eval_pipelines.inputs.paths import data_dir, sweeps_dir
    from eval_pipelines.inputs.scenarios import ScenarioCatalog
    from eval_pipelines.inputs.sweeps import load_all_sweeps
    from eval_pipelines.local.services import local_evaluation_service
    from eval_pipelines.pipeline.steps import launch_request, run_and_collect, verify_partition
    from eval_pipelines.reports import pass_rate_summary
    from eval_pipelines.warehouse.catalog import build_catalog
    from eval_pipelines.warehouse.rows import RolloutContext
    from eval_pipelines.warehouse.store import Warehouse

    root = data_dir()
    catalog = ScenarioCatalog()
    scenario = catalog.get(BENCH_SCENARIO_ID)
    sweeps = load_all_sweeps(sweeps_dir())
    # Held for the whole child (the stack lives as long as this frame), as the CLI holds it for a whole sweep.
    held = contextlib.ExitStack()
    backend = held.enter_context(local_evaluation_service(root, catalog.root)).backend()
    warehouse = Warehouse(root / "warehouse")

    def partition(sweep_name: str, model_name: str) -> bool:
        sweep = sweeps[sweep_name]
        model = next(m for m in sweep.models if m.name == model_name)
        request = launch_request(sweep, model, scenario, SWEEP_ID)
        ctx = RolloutContext(
            SWEEP_ID, request.run_name or "", model.name, scenario.key, model.name, True, model.base_url
        )
        summary = run_and_collect(
            backend,
            request,
            ctx,
            scenario,
            warehouse,
            root / "artifacts",
            timeout_seconds=sweep.rollout_timeout_seconds,
        )
        verified = verify_partition(warehouse, scenario, model.name, scenario.key)
        return summary.by_status.get("completed", 0) == summary.rollouts and verified.rollouts_verified > 0

    def build() -> str | None:
        try:
            build_catalog(warehouse.root, root / "eval.duckdb")
            pass_rate_summary(root / "eval.duckdb", chart_path=root / "reports" / "pass_rates.png")
        except Exception as exc:  # reported like the Dagster side's failed eval_catalog run, not a crash
            return f"{type(exc).__name__}: {exc}"[:300]
        return None

    partition(WARMUP_SWEEP, "bench-warmup")
    build()
    starts: list[float] = []
    cpu_before, started = cpu_seconds(), time.perf_counter()
    succeeded = 0
    for model in model_names(partitions):
        starts.append(time.perf_counter())
        succeeded += partition(SWEEP, model)
    catalog_error = build()
    wall = time.perf_counter() - started
    held.close()
    return {
        "partitions_succeeded": succeeded,
        "catalog_succeeded": catalog_error is None,
        "failures": [f"eval_catalog: {catalog_error}"] if catalog_error else [],
        "seconds_per_partition": None if len(starts) < 2 else (starts[-1] - starts[0]) / (len(starts) - 1),
        "wall_seconds": wall,
        "cpu_seconds": cpu_seconds() - cpu_before,
    }


# --- the run ----------------------------------------------------------------------------------------------------


def environment(workdir: Path, side: str) -> dict[str, str]:
    """What each side's process gets on top of the inherited environment: its own Dagster home and data."""
    return {
        "DAGSTER_HOME": str(workdir / f"dagster-home-{side}"),
        "EVAL_PIPELINES_DATA_DIR": str(workdir / f"data-{side}"),
        "EVAL_PIPELINES_SCENARIOS_DIR": str(workdir / "scenarios"),
        "EVAL_PIPELINES_SWEEPS_DIR": str(workdir / "sweeps"),
    }


def run_cli(workdir: Path) -> dict[str, Any]:
    env = environment(workdir, "cli")
    write_dagster_home(Path(env["DAGSTER_HOME"]))
    command = [str(Path(sys.executable).parent / "eval-pipelines"), "sweep", "--config",
               str(workdir / "sweeps" / f"{SWEEP}.yaml"), "--sweep-id", SWEEP_ID, "--skip-assessment"]  # fmt: skip
    started = time.perf_counter()
    completed = subprocess.run(
        command, env={**os.environ, **env}, cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    return {
        "exit_code": completed.returncode,
        "wall_seconds": round(time.perf_counter() - started, 3),
        "stderr_tail": completed.stderr[-1000:] if completed.returncode else "",
    }


def child_main(argv: list[str]) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    return dagster_child(args.partitions) if args.child == "dagster" else direct_child(args.partitions)


def run(partitions: int, tasks: int, sides: list[str], workdir: Path, in_process: bool = False) -> dict[str, Any]:
    write_bench_scenario(workdir / "scenarios", max(tasks, 2), source_task=SMALL_TASK)
    write_sweeps(workdir / "sweeps", partitions, tasks)
    load_before = load_average()
    results: dict[str, Any] = {}
    for side in sides:
        if side == "cli":
            results[side] = run_cli(workdir)
            continue
        env = environment(workdir, side)
        write_dagster_home(Path(env["DAGSTER_HOME"]))
        child_args = ["--child", side, "--partitions", str(partitions)]
        raw = run_child(
            Path(__file__), child_args, child_main, in_process=in_process, timeout=CHILD_TIMEOUT_SECONDS, env=env
        )
        results[side] = {k: round(v, 3) if isinstance(v, float) else v for k, v in raw.items()} | {
            "wall_seconds_per_partition": round(raw["wall_seconds"] / partitions, 3),
            "load_average": load_average(),
        }
    overhead = None
    if "dagster" in results and "direct" in results:
        dagster, direct = results["dagster"], results["direct"]
        overhead = {
            "wall_seconds": round(dagster["wall_seconds"] - direct["wall_seconds"], 3),
            "wall_seconds_per_partition": round((dagster["wall_seconds"] - direct["wall_seconds"]) / partitions, 3),
            "cpu_seconds": round(dagster["cpu_seconds"] - direct["cpu_seconds"], 3),
            "ratio": round(dagster["wall_seconds"] / direct["wall_seconds"], 2),
        }
    return {
        "benchmark": "dagster_overhead",
        "command": command_line(),
        "partitions": partitions,
        "rollouts_per_partition": tasks,
        "in_process": in_process,
        "task": f"{SMALL_TASK} copy (1 tool call + final answer), sim-oracle on sim://local",
        "results": results,
        "dagster_overhead": overhead,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "machine": machine(),
        "measured_at": now_iso(),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Dagster overhead (`{report['command']}`; {report['partitions']} partitions x "
        f"{report['rollouts_per_partition']} rollouts, load {report['load_average_before'][0]} -> "
        f"{report['load_average_after'][0]} on {report['machine']['cpus']} CPUs)",
        "",
        "| path | wall s (partitions + catalog) | s between partition starts | CPU s | partitions ok | catalog ok |",
        "|---|---|---|---|---|---|",
    ]
    for side, r in report["results"].items():
        if side == "cli":
            lines.append(f"| cli process (incl. start-up, exit {r['exit_code']}) | {r['wall_seconds']} | | | | |")
            continue
        lines.append(
            f"| {side} | {r['wall_seconds']} | {r['seconds_per_partition']} | {r['cpu_seconds']} | "
            f"{r['partitions_succeeded']}/{report['partitions']} | {r['catalog_succeeded']} |"
        )
    overhead = report["dagster_overhead"]
    if overhead:
        lines += [
            "",
            f"Dagster adds **{overhead['wall_seconds_per_partition']} s per partition** ({overhead['wall_seconds']} s "
            f"over {report['partitions']} partitions, {overhead['ratio']}x the direct wall time).",
        ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS)
    parser.add_argument("--rollouts-per-partition", type=int, default=DEFAULT_TASKS)
    parser.add_argument(
        "--sides", nargs="+", choices=("dagster", "direct", "cli"), default=["direct", "dagster", "cli"]
    )
    parser.add_argument("--out", default=str(RESULTS_DIR), help="where dagster_overhead.{json,md} go ('' = nowhere)")
    parser.add_argument("--child", choices=("dagster", "direct"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--in-process", action="store_true", help="both paths in this process, one after the other (smoke tests only)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child_main(argv or sys.argv[1:])))
        return 0
    if args.partitions < 1 or args.rollouts_per_partition < 1:
        parser.error("--partitions and --rollouts-per-partition must be at least 1")
    workdir = Path(tempfile.mkdtemp(prefix="ep-dagster-"))
    try:
        report = run(args.partitions, args.rollouts_per_partition, args.sides, workdir, args.in_process)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    write_report("dagster_overhead", report, markdown(report), Path(args.out) if args.out else None)
    ok = all(r.get("partitions_succeeded", args.partitions) == args.partitions for r in report["results"].values())
    return 0 if ok and report["results"].get("cli", {}).get("exit_code", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
