"""Warehouse scale benchmark: metric-view latency on a synthetic warehouse of 1,000,000 rollouts x 2 verifiers.

    .venv/bin/python benchmarks/warehouse_scale.py            # 4 scenarios x 50 tasks x 5 models x 1000 rollouts

The warehouse is generated straight as Parquet with vectorised numpy/pyarrow (the row builders are for real
rollouts and far too slow for a million), through `Warehouse.write`, so the files have the registered schemas.
Each timed query runs in a fresh child process (`--time-only`), so the peak RSS reported is the query side's
alone. Results go to `benchmarks/results/warehouse_scale.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._arrow import arrow_schema, write_arrow, write_arrow_tasks
from eval_pipelines.warehouse.catalog import build_catalog, connect_read_only
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import ROLLOUTS, TASKS, VERIFICATIONS

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SWEEP_ID = "bench-sweep"
VERIFIERS = ("state_check", "reply_check")

#: (name, SQL, target seconds). The pass^k query asks for k = 1..8 as an analyst plotting a curve would.
QUERIES: tuple[tuple[str, str, float | None], ...] = (
    ("pass_rates", "select * from pass_rates", 1.0),
    ("scenario_model_metrics", "select * from scenario_model_metrics", None),
    ("pass_at_k (k=1..8)", "select * from pass_at_k where k <= 8", 2.0),
    ("model_comparison", "select * from model_comparison", 5.0),
)


@dataclass(frozen=True)
class Shape:
    scenarios: int
    tasks_per_scenario: int
    models: int
    rollouts_per_task: int

    @property
    def rollouts(self) -> int:
        return self.scenarios * self.tasks_per_scenario * self.models * self.rollouts_per_task


def _strings(prefix: str, numbers: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(prefix, pc.cast(pa.array(numbers), pa.string()), "")


def _constant(value: object, size: int, type_: pa.DataType) -> pa.Array:
    return pa.repeat(pa.scalar(value, type=type_), size)


def generate(root: Path, shape: Shape, seed: int = 20260101) -> None:
    """Write rollouts, verifications and tasks for one sweep; every task has rollouts_per_task scored rollouts."""
    rng = np.random.default_rng(seed)
    warehouse = Warehouse(root)
    size = shape.tasks_per_scenario * shape.rollouts_per_task
    task_numbers = np.repeat(np.arange(shape.tasks_per_scenario), shape.rollouts_per_task)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    started = pa.array(np.full(size, int(t0.timestamp() * 1e6), dtype=np.int64), type=pa.int64()).cast(
        pa.timestamp("us", tz="UTC")
    )
    serial = 0
    for s in range(shape.scenarios):
        scenario_id, scenario_key = f"bench_{s}:1.0.0", f"bench_{s}_1.0.0"
        task_ids = [f"task-{t:03d}" for t in range(shape.tasks_per_scenario)]
        write_arrow_tasks(
            warehouse,
            pa.table(
                {
                    "scenario_id": [scenario_id] * len(task_ids),
                    "task_id": task_ids,
                    "name": task_ids,
                    "category": ["bench"] * len(task_ids),
                    "difficulty": ["medium"] * len(task_ids),
                    "version": ["1"] * len(task_ids),
                    "num_reference_actions": pa.array([2] * len(task_ids), pa.int32()),
                    "verifiers": [list(VERIFIERS)] * len(task_ids),
                    "description": ["synthetic benchmark task"] * len(task_ids),
                    "benchmark": pa.array([None] * len(task_ids), pa.string()),
                    "unrunnable_reason": pa.array([None] * len(task_ids), pa.string()),
                },
                schema=arrow_schema(TASKS),
            ),
            scenario_key,
        )
        for m in range(shape.models):
            model = f"bench-model-{m}"
            # Per-task pass probability: a model-level skill plus task difficulty, so models differ and tasks vary.
            skill = rng.beta(2 + m, 4, size=shape.tasks_per_scenario)
            p_pass = skill[task_numbers]
            status = np.where(rng.random(size) < 0.01, "failed", "completed")
            # Each verifier passes with sqrt(p), so both pass (the rollout passes) with probability p.
            verdicts = rng.random((len(VERIFIERS), size)) < np.sqrt(p_pass)
            passed = verdicts.all(axis=0) & (status == "completed")
            ids = np.arange(serial, serial + size)
            serial += size
            rollout_ids = _strings("r-", ids)
            tokens = rng.integers(500, 5000, size)
            duration = rng.gamma(2.0, 5.0, size)
            columns = {
                "sweep_id": _constant(SWEEP_ID, size, pa.string()),
                "run_id": _constant(f"run-{s}-{m}", size, pa.string()),
                "run_name": _constant(f"sweep-{scenario_key}-{model}", size, pa.string()),
                "rollout_id": rollout_ids,
                "rollout_index": pa.array(
                    np.tile(np.arange(shape.rollouts_per_task), shape.tasks_per_scenario), pa.int32()
                ),
                "scenario_id": _constant(scenario_id, size, pa.string()),
                "task_id": _strings("task-", task_numbers).cast(pa.string()),
                "model_name": _constant(model, size, pa.string()),
                "model_identifier": _constant(model, size, pa.string()),
                "provider": _constant("custom", size, pa.string()),
                "base_url": _constant("sim://local", size, pa.string()),
                "is_simulated": _constant(True, size, pa.bool_()),
                "temperature": _constant(0.0, size, pa.float64()),
                "max_steps": _constant(30, size, pa.int32()),
                "status": pa.array(status),
                "termination_reason": _constant("final_response", size, pa.string()),
                "error_class": pa.nulls(size, pa.string()),
                "attempts": _constant(1, size, pa.int32()),
                "success": pa.array(passed),
                "reward": pa.array(passed.astype(np.float64)),
                "steps_taken": pa.array(rng.integers(1, 30, size), pa.int32()),
                "prompt_tokens": pa.array(tokens * 4 // 5, pa.int64()),
                "completion_tokens": pa.array(tokens - tokens * 4 // 5, pa.int64()),
                "total_tokens": pa.array(tokens, pa.int64()),
                "cost_usd": pa.array(tokens * (1 + m) * 1e-6),
                "duration_seconds": pa.array(duration),
                "created_at": started,
                "started_at": started,
                "completed_at": started,
                "error": pa.nulls(size, pa.string()),
                "artifacts_path": pa.nulls(size, pa.string()),
                "final_answer_is_tool_call": _constant(False, size, pa.bool_()),
            }
            rollouts = pa.Table.from_arrays(
                [columns[f.name] for f in arrow_schema(ROLLOUTS)], schema=arrow_schema(ROLLOUTS)
            )
            write_arrow(warehouse, "rollouts", rollouts, model_key=model, scenario_key=scenario_key, file_stem="run")
            n_v = len(VERIFIERS) * size
            success = verdicts.reshape(-1)
            v_columns = {
                "sweep_id": _constant(SWEEP_ID, n_v, pa.string()),
                "run_id": _constant(f"run-{s}-{m}", n_v, pa.string()),
                "rollout_id": pa.concat_arrays([rollout_ids] * len(VERIFIERS)),
                "scenario_id": _constant(scenario_id, n_v, pa.string()),
                "task_id": pa.concat_arrays([columns["task_id"]] * len(VERIFIERS)),
                "model_name": _constant(model, n_v, pa.string()),
                "verifier": pa.array(np.repeat(np.array(VERIFIERS), size)),
                "verifier_version": _constant("h1", n_v, pa.string()),
                "kind": _constant("programmatic", n_v, pa.string()),
                "success": pa.array(success),
                "is_error": _constant(False, n_v, pa.bool_()),
                "reward": pa.array(success.astype(np.float64)),
                "message": _constant("", n_v, pa.string()),
                "output_json": _constant('""', n_v, pa.string()),
                "verified_at": pa.concat_arrays([started] * len(VERIFIERS)),
            }
            verifications = pa.Table.from_arrays(
                [v_columns[f.name] for f in arrow_schema(VERIFICATIONS)], schema=arrow_schema(VERIFICATIONS)
            )
            write_arrow(
                warehouse, "verifications", verifications, model_key=model, scenario_key=scenario_key, file_stem="v"
            )


def _time_queries(duckdb_path: Path, repeats: int) -> dict[str, object]:
    """Runs in the child process: median of `repeats` timings per query, each fully fetched."""
    con = connect_read_only(duckdb_path)
    timings: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    rows: dict[str, int] = {}
    try:
        for name, sql, _ in QUERIES:
            timings[name], cpu[name] = [], []
            for _ in range(repeats):
                start, start_cpu = time.perf_counter(), time.process_time()
                result = con.execute(sql).fetchall()
                timings[name].append(time.perf_counter() - start)
                # All DuckDB threads of this process: what the query costs, whatever else runs on the machine.
                cpu[name].append(time.process_time() - start_cpu)
            rows[name] = len(result)
    finally:
        con.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"timings": timings, "cpu": cpu, "rows": rows, "peak_rss_mib": peak_kib / 1024}


def _markdown(report: dict[str, object]) -> str:
    shape = report["shape"]
    assert isinstance(shape, dict)
    lines = [
        f"Warehouse scale benchmark, {report['measured_at']} on {report['machine']}",
        "",
        f"{report['rollouts']:,} rollouts x {len(VERIFIERS)} verifiers ({shape['scenarios']} scenarios x "
        f"{shape['tasks_per_scenario']} tasks x {shape['models']} models x {shape['rollouts_per_task']} rollouts); "
        f"median of {report['repeats']} runs.",
        "",
        "| query | median s | min s | max s | median CPU s | rows | target s | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    load = report["load_average_1m"]
    assert isinstance(load, dict)
    results = report["queries"]
    assert isinstance(results, list)
    for q in results:
        target = "" if q["target_s"] is None else f"{q['target_s']:.0f}"
        met = "" if q["met"] is None else ("yes" if q["met"] else "NO")
        lines.append(
            f"| `{q['sql']}` | {q['median_s']:.3f} | {q['min_s']:.3f} | {q['max_s']:.3f} | {q['median_cpu_s']:.3f} | "
            f"{q['rows']} | "
            f"{target} | {met} |"
        )
    lines += [
        "",
        f"Peak RSS of the query process: {report['query_peak_rss_mib']:.0f} MiB. Generation: "
        f"{report['generate_s']:.1f} s, catalog build: {report['catalog_s']:.2f} s. 1-minute load average "
        f"{load['before']:.2f} before the timed queries, {load['after']:.2f} after ({_cpu_count()} CPUs). CPU s is "
        "the query process's CPU time over all its threads: unlike wall time, other load on the machine barely "
        "changes it, and a quiet machine's wall time is at most about that.",
        "",
    ]
    return "\n".join(lines)


def run(shape: Shape, repeats: int, workdir: Path, out_dir: Path) -> dict[str, object]:
    root, db = workdir / "warehouse", workdir / "eval.duckdb"
    start = time.perf_counter()
    generate(root, shape)
    generate_s = time.perf_counter() - start
    start = time.perf_counter()
    build_catalog(root, db)
    catalog_s = time.perf_counter() - start
    load_before = os.getloadavg()
    child = subprocess.run(
        [sys.executable, __file__, "--time-only", str(db), "--repeats", str(repeats)],
        check=True,
        capture_output=True,
        text=True,
    )
    measured = json.loads(child.stdout)
    queries = []
    for name, sql, target in QUERIES:
        samples = measured["timings"][name]
        median = statistics.median(samples)
        queries.append(
            {
                "name": name,
                "sql": sql,
                "median_s": median,
                "min_s": min(samples),
                "max_s": max(samples),
                "samples_s": samples,
                "median_cpu_s": statistics.median(measured["cpu"][name]),
                "rows": measured["rows"][name],
                "target_s": target,
                "met": None if target is None else median < target,
            }
        )
    report: dict[str, object] = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{_cpu_count()} CPUs",
        "shape": asdict(shape),
        "rollouts": shape.rollouts,
        "verifications": shape.rollouts * len(VERIFIERS),
        "repeats": repeats,
        "generate_s": generate_s,
        "catalog_s": catalog_s,
        "query_peak_rss_mib": measured["peak_rss_mib"],
        # Other work on a shared machine slows every query; the 1-minute load average says how busy it was.
        "load_average_1m": {"before": load_before[0], "after": os.getloadavg()[0]},
        "queries": queries,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "warehouse_scale.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out_dir / "warehouse_scale.md").write_text(_markdown(report), encoding="utf-8")
    return report


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=50, help="tasks per scenario")
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--rollouts", type=int, default=1000, help="rollouts per task and model")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the generated warehouse here")
    parser.add_argument("--time-only", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.time_only is not None:
        print(json.dumps(_time_queries(args.time_only, args.repeats)))
        return 0
    shape = Shape(args.scenarios, args.tasks, args.models, args.rollouts)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        report = run(shape, args.repeats, args.workdir, args.out)
    else:
        with tempfile.TemporaryDirectory(prefix="warehouse-scale-") as tmp:
            report = run(shape, args.repeats, Path(tmp), args.out)
    print(_markdown(report))
    queries = report["queries"]
    assert isinstance(queries, list)
    return 0 if all(q["met"] is not False for q in queries) else 1


if __name__ == "__main__":
    sys.exit(main())
