"""Export scale benchmark: `eval-pipelines export` (inspect, jsonl, parquet) on synthetic sweeps of 10k-200k rollouts.

    .venv/bin/python benchmarks/export_scale.py                     # 10,000, 50,000 and 200,000 rollouts
    .venv/bin/python benchmarks/export_scale.py --sizes 2000 8000   # a quick check of the harness

Each size is one sweep of 2 models x 1 scenario (so a model x scenario pair holds half the rollouts, in 2 run
files per table, as the warehouse writes one file per run), 50 tasks, with a transcript per rollout: 9 messages (a
system prompt, the task, 3 tool calls with their results, a final answer) and 3 `tool_calls` rows; 2% of the
rollouts were retried once (a `rollout_attempts` row more) and 1% ended in an error. The warehouse is generated
straight as Parquet with vectorised numpy/pyarrow through `Warehouse.write`, so the files have the registered
schemas, and rows are written in a shuffled order, as rollouts finish, not in the export's order.

Each export runs in a fresh child process (`--child`), so the peak RSS reported is that export's alone: the
child's VmHWM, and `getrusage`'s ru_maxrss beside it. On Linux ru_maxrss also holds the parent's high-water mark at
the fork (it is kept across exec), so the warehouse is generated in a child of its own (`--generate`) and the
parent stays small. The export's time per rollout should stay about constant as the size grows (linear), and the
peak RSS flat. Results go to `benchmarks/results/export_scale.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eval_pipelines.llm.types import wire_tool_name

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._arrow import arrow_schema, write_arrow, write_arrow_tasks
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import (
    MESSAGES,
    ROLLOUT_ATTEMPTS,
    ROLLOUTS,
    TASKS,
    TOOL_CALLS,
    VERIFICATIONS,
    TableSpec,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SWEEP_ID = "bench-export"
SCENARIO_ID, SCENARIO_KEY = "bench_email:1.0.0", "bench_email_1.0.0"
VERIFIERS = ("state_check", "reply_check")
FORMATS = ("jsonl", "inspect", "parquet")
DEFAULT_SIZES = (10_000, 50_000, 200_000)
#: Tool calls per rollout; each is an assistant message and a tool message, between the task and the answer.
CALLS = 3
MESSAGES_PER_ROLLOUT = 2 + 2 * CALLS + 1
TOOL_SERVER, TOOL_NAME = "email", "search_emails"
SYSTEM_PROMPT = (
    "You are an email assistant with tools for reading, searching and sending mail. Work step by step, call one "
    "tool at a time, and answer with a short summary of what you did once the task is done."
)
CHILD_TIMEOUT_SECONDS = 3600.0


@dataclass(frozen=True)
class Shape:
    rollouts: int
    models: int
    tasks: int
    runs_per_pair: int

    @property
    def per_run(self) -> int:
        return self.rollouts // (self.models * self.runs_per_pair)


def _strings(prefix: str, numbers: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(prefix, pc.cast(pa.array(numbers), pa.string()), "")


def _join(*parts: object) -> pa.Array:
    """Element-wise concatenation of string arrays and constants."""
    return pc.binary_join_element_wise(*parts, "")


def _constant(value: object, size: int, type_: pa.DataType) -> pa.Array:
    return pa.repeat(pa.scalar(value, type=type_), size)


def _text_where(mask: np.ndarray, text: str) -> pa.Array:
    """`text` where `mask` is set, null elsewhere."""
    return pa.array(np.full(len(mask), text), pa.string(), mask=~mask)


def _table(spec: TableSpec, columns: dict[str, Any]) -> pa.Table:
    return pa.Table.from_arrays([columns[f.name] for f in arrow_schema(spec)], schema=arrow_schema(spec))


def _common(size: int, model: str, rollout_ids: pa.Array, task_ids: pa.Array) -> dict[str, Any]:
    return {
        "sweep_id": _constant(SWEEP_ID, size, pa.string()),
        "rollout_id": rollout_ids,
        "task_id": task_ids,
        "model_name": _constant(model, size, pa.string()),
    }


def _transcripts(model: str, rollout_ids: pa.Array, task_ids: pa.Array) -> tuple[pa.Table, pa.Table]:
    """Messages and tool calls of the rollouts, rollout by rollout in the given (finishing) order."""
    n = len(rollout_ids)
    function = wire_tool_name(TOOL_SERVER, TOOL_NAME)
    observations: list[pa.Array] = []
    kinds: list[tuple[str, pa.Array | None, pa.Array | None, pa.Array | None]] = [
        ("system", _constant(SYSTEM_PROMPT, n, pa.string()), None, None),
        (
            "user",
            _join("Task ", task_ids, ": find the thread about rollout ", rollout_ids, " and reply to it."),
            None,
            None,
        ),
    ]
    for k in range(CALLS):
        call_id = _join("call-", rollout_ids, f"-{k}")
        calls = _join(
            '[{"id": "',
            call_id,
            f'", "type": "function", "function": {{"name": "{function}", "arguments": "{{\\"query\\": \\"',
            rollout_ids,
            f' part {k}\\"}}"}}}}]',
        )
        observation = _join(
            f'{{"results": [{{"id": "msg-{k}", "subject": "Re: ',
            rollout_ids,
            '", "snippet": "The quarterly '
            'numbers are attached; please confirm the figures before Friday and copy the finance team."}]}',
        )
        kinds.append(("assistant", None, None, calls))
        kinds.append(("tool", observation, call_id, None))
        observations.append(observation)
    kinds.append(("assistant", _join("Replied to the thread about ", rollout_ids, " and copied finance."), None, None))
    assert len(kinds) == MESSAGES_PER_ROLLOUT
    m = n * len(kinds)
    # Built kind by kind, then reordered rollout by rollout (row k * n + r is message k of rollout r).
    order = (np.arange(len(kinds))[None, :] * n + np.arange(n)[:, None]).reshape(-1)
    columns = _common(m, model, pa.concat_arrays([rollout_ids] * len(kinds)), pa.concat_arrays([task_ids] * len(kinds)))
    columns.update(
        message_index=pa.array(np.repeat(np.arange(len(kinds)), n), pa.int32()),
        role=pa.concat_arrays([_constant(role, n, pa.string()) for role, *_ in kinds]),
        content=pa.concat_arrays([c if c is not None else pa.nulls(n, pa.string()) for _, c, _, _ in kinds]),
        tool_call_id=pa.concat_arrays([c if c is not None else pa.nulls(n, pa.string()) for _, _, c, _ in kinds]),
        tool_calls_json=pa.concat_arrays([c if c is not None else pa.nulls(n, pa.string()) for *_, c in kinds]),
        timestamp=_constant("2026-01-01T12:00:00+00:00", m, pa.string()),
    )
    messages = _table(MESSAGES, columns).take(pa.array(order))
    c = n * CALLS
    call_order = (np.arange(CALLS)[None, :] * n + np.arange(n)[:, None]).reshape(-1)
    tool_columns = _common(c, model, pa.concat_arrays([rollout_ids] * CALLS), pa.concat_arrays([task_ids] * CALLS))
    tool_columns.update(
        call_index=pa.array(np.repeat(np.arange(CALLS), n), pa.int32()),
        tool_server=_constant(TOOL_SERVER, c, pa.string()),
        tool_name=_constant(TOOL_NAME, c, pa.string()),
        parameters_json=pa.concat_arrays([_join('{"query": "', rollout_ids, f' part {k}"}}') for k in range(CALLS)]),
        observation=pa.concat_arrays(observations),
        is_error=pa.array(np.arange(c) % 17 == 0),
        raw_arguments=pa.nulls(c, pa.string()),
        arguments_error=pa.nulls(c, pa.string()),
    )
    return messages, _table(TOOL_CALLS, tool_columns).take(pa.array(call_order))


def _write_tasks(warehouse: Warehouse, tasks: int) -> None:
    task_ids = [f"task-{t:03d}" for t in range(tasks)]
    write_arrow_tasks(
        warehouse,
        pa.table(
            {
                "scenario_id": [SCENARIO_ID] * tasks,
                "task_id": task_ids,
                "name": task_ids,
                "category": ["bench"] * tasks,
                "difficulty": ["medium"] * tasks,
                "version": ["1"] * tasks,
                "num_reference_actions": pa.array([CALLS] * tasks, pa.int32()),
                "verifiers": [list(VERIFIERS)] * tasks,
                "description": [f"Synthetic benchmark task {t}: find the thread and reply." for t in task_ids],
                "benchmark": pa.array([None] * len(task_ids), pa.string()),
                "unrunnable_reason": pa.array([None] * len(task_ids), pa.string()),
            },
            schema=arrow_schema(TASKS),
        ),
        SCENARIO_KEY,
    )


def _write_run(warehouse: Warehouse, rng: np.random.Generator, shape: Shape, model: str, run: str, first: int) -> None:
    size = shape.per_run
    per_task = size // shape.tasks
    # The order rollouts finished in: every table of the run lists them in it, as the collector writes them.
    order = rng.permutation(shape.tasks * per_task)
    task_numbers = np.repeat(np.arange(shape.tasks), per_task)[order]
    indexes = np.tile(np.arange(per_task), shape.tasks)[order]
    rollout_ids = _strings("r-", first + order)
    task_ids = pa.array([f"task-{t:03d}" for t in range(shape.tasks)]).take(pa.array(task_numbers))
    n = len(order)
    errored = rng.random(n) < 0.01
    retried = rng.random(n) < 0.02
    verdicts = rng.random((len(VERIFIERS), n)) < 0.8
    passed = verdicts.all(axis=0) & ~errored
    t0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
    at = pa.array(np.full(n, int(t0.timestamp() * 1e6), dtype=np.int64)).cast(pa.timestamp("us", tz="UTC"))
    tokens = rng.integers(500, 5000, n)
    columns = {
        **_common(n, model, rollout_ids, task_ids),
        "run_id": _constant(run, n, pa.string()),
        "run_name": _constant(f"sweep-{SCENARIO_KEY}-{model}-{run}", n, pa.string()),
        "rollout_index": pa.array(indexes, pa.int32()),
        "scenario_id": _constant(SCENARIO_ID, n, pa.string()),
        "model_identifier": _constant(model, n, pa.string()),
        "provider": _constant("custom", n, pa.string()),
        "base_url": _constant("sim://local", n, pa.string()),
        "is_simulated": _constant(True, n, pa.bool_()),
        "temperature": _constant(0.0, n, pa.float64()),
        "max_steps": _constant(30, n, pa.int32()),
        "status": pa.array(np.where(errored, "failed", "completed")),
        "termination_reason": pa.array(np.where(errored, "error", "final_response")),
        "error_class": _text_where(errored, "model_endpoint"),
        "attempts": pa.array(np.where(retried, 2, 1), pa.int32()),
        "success": pa.array(passed),
        "reward": pa.array(passed.astype(np.float64)),
        "steps_taken": _constant(CALLS, n, pa.int32()),
        "prompt_tokens": pa.array(tokens * 4 // 5, pa.int64()),
        "completion_tokens": pa.array(tokens - tokens * 4 // 5, pa.int64()),
        "total_tokens": pa.array(tokens, pa.int64()),
        "cost_usd": pa.array(tokens * 1e-6),
        "duration_seconds": pa.array(rng.gamma(2.0, 5.0, n)),
        "created_at": at,
        "started_at": at,
        "completed_at": at,
        "error": _text_where(errored, "model endpoint: HTTP 503"),
        "artifacts_path": pa.nulls(n, pa.string()),
        "final_answer_is_tool_call": _constant(False, n, pa.bool_()),
    }
    keys = {"model_key": model, "scenario_key": SCENARIO_KEY, "file_stem": run}
    write_arrow(warehouse, "rollouts", _table(ROLLOUTS, columns), **keys)
    messages, tool_calls = _transcripts(model, rollout_ids, task_ids)
    write_arrow(warehouse, "messages", messages, **keys)
    write_arrow(warehouse, "tool_calls", tool_calls, **keys)
    # Every rollout's final attempt, then the failed first attempt of those retried.
    again = np.flatnonzero(retried)
    a = n + len(again)
    attempts = {
        **_common(
            a,
            model,
            pa.concat_arrays([rollout_ids, rollout_ids.take(again)]),
            pa.concat_arrays([task_ids, task_ids.take(again)]),
        ),
        "attempt": pa.array(np.concatenate([np.where(retried, 2, 1), np.ones(len(again))]), pa.int32()),
        "is_final": pa.array(np.arange(a) < n),
        "status": pa.concat_arrays([columns["status"], _constant("failed", len(again), pa.string())]),
        "error_class": pa.concat_arrays([columns["error_class"], _constant("model_endpoint", len(again), pa.string())]),
        "termination_reason": pa.concat_arrays(
            [columns["termination_reason"], _constant("error", len(again), pa.string())]
        ),
        "message": pa.concat_arrays(
            [columns["error"], _constant("HTTP 503 from the endpoint", len(again), pa.string())]
        ),
        "started_at": pa.concat_arrays([at, at.take(again)]),
        "completed_at": pa.concat_arrays([at, at.take(again)]),
    }
    write_arrow(warehouse, "rollout_attempts", _table(ROLLOUT_ATTEMPTS, attempts), **keys)
    v = len(VERIFIERS) * n
    success = verdicts.reshape(-1)
    verifications = {
        **_common(
            v, model, pa.concat_arrays([rollout_ids] * len(VERIFIERS)), pa.concat_arrays([task_ids] * len(VERIFIERS))
        ),
        "run_id": _constant(run, v, pa.string()),
        "scenario_id": _constant(SCENARIO_ID, v, pa.string()),
        "verifier": pa.array(np.repeat(np.array(VERIFIERS), n)),
        "verifier_version": _constant("h1", v, pa.string()),
        "kind": _constant("programmatic", v, pa.string()),
        "success": pa.array(success),
        "is_error": _constant(False, v, pa.bool_()),
        "reward": pa.array(success.astype(np.float64)),
        "message": pa.array(np.where(success, "", "the reply was not sent")),
        "output_json": _constant('""', v, pa.string()),
        "verified_at": pa.concat_arrays([at] * len(VERIFIERS)),
    }
    verified = _table(VERIFICATIONS, verifications).filter(pa.array(np.tile(~errored, len(VERIFIERS))))
    write_arrow(warehouse, "verifications", verified, **keys)


def generate(root: Path, shape: Shape, seed: int = 20260101) -> None:
    """One sweep: `models` models x 1 scenario, `runs_per_pair` run files per pair and table."""
    rng = np.random.default_rng(seed)
    warehouse = Warehouse(root)
    _write_tasks(warehouse, shape.tasks)
    serial = 0
    for m in range(shape.models):
        for r in range(shape.runs_per_pair):
            _write_run(warehouse, rng, shape, f"bench-model-{m}", f"run-{m}-{r}", serial)
            serial += shape.per_run


def _child(db: Path, fmt: str, out: Path, scenarios_root: Path, batch_size: int | None) -> dict[str, Any]:
    """Runs in the child process: one export, timed, and the process's peak RSS."""
    from eval_pipelines.reports.export import DEFAULT_BATCH_SIZE, export_results

    start, start_cpu = time.perf_counter(), time.process_time()
    summary = export_results(db, out, fmt, batch_size=batch_size or DEFAULT_BATCH_SIZE, scenarios_root=scenarios_root)
    export_s = time.perf_counter() - start
    return {
        "export_s": export_s,
        # Every thread of the process (DuckDB's too).
        "cpu_s": time.process_time() - start_cpu,
        "rollouts": summary.rollouts,
        "batches": summary.batches,
        "output_bytes": sum(p.stat().st_size for p in summary.files),
        "peak_rss_mib": _peak_rss_mib(),
        # getrusage's figure: on Linux it also holds the parent's high-water mark at the fork (kept across exec),
        # which is why the warehouse is generated in a process of its own and the parent stays small.
        "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _peak_rss_mib() -> float:
    """This process's peak resident set since it started (VmHWM, Linux); getrusage's ru_maxrss elsewhere."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _generate_child(workdir: Path, shape: Shape) -> dict[str, Any]:
    """Runs in a child process: the warehouse and its catalog, timed. The parent that then starts the export
    processes never holds the generated tables."""
    start = time.perf_counter()
    generate(workdir / "warehouse", shape)
    generate_s = time.perf_counter() - start
    start = time.perf_counter()
    build_catalog(workdir / "warehouse", workdir / "eval.duckdb")
    return {"generate_s": generate_s, "catalog_s": time.perf_counter() - start}


def _run_child(db: Path, fmt: str, out: Path, scenarios_root: Path, batch_size: int | None) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", str(db), "--format", fmt, "--export-to", str(out)]
    command += ["--scenarios-root", str(scenarios_root)]
    if batch_size is not None:
        command += ["--batch-size", str(batch_size)]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    child = subprocess.run(command, check=False, capture_output=True, text=True, timeout=CHILD_TIMEOUT_SECONDS)
    wall = time.perf_counter() - start
    if child.returncode != 0:
        raise RuntimeError(f"export {fmt} of {db} exited {child.returncode}:\n{child.stderr[-3000:]}")
    measured: dict[str, Any] = json.loads(child.stdout.splitlines()[-1])
    # export_s is the export alone (in the child); process_wall_s adds the interpreter's start and the imports.
    return {"format": fmt, **measured, "process_wall_s": wall, "load_1m_before": load}


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Export scale benchmark, {report['measured_at']} on {report['machine']}",
        "",
        f"One sweep of {report['models']} models x 1 scenario x {report['tasks']} tasks ({report['runs_per_pair']} run "
        f"files per pair), {MESSAGES_PER_ROLLOUT} messages and {CALLS} tool calls per rollout; each export in a fresh "
        f"process, batch size {report['batch_size']}. `us/rollout` is the export's wall time per rollout: constant "
        "when the export is linear.",
        "",
        "| rollouts | format | export s | us/rollout | CPU s | process wall s | peak RSS MiB | ru_maxrss MiB "
        "| output MiB | load 1m |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size in report["sizes"]:
        for r in size["exports"]:
            lines.append(
                f"| {size['rollouts']:,} | {r['format']} | {r['export_s']:.2f} | "
                f"{1e6 * r['export_s'] / size['rollouts']:.0f} | {r['cpu_s']:.2f} | {r['process_wall_s']:.2f} | "
                f"{r['peak_rss_mib']:.0f} | {r['ru_maxrss_mib']:.0f} | {r['output_bytes'] / 2**20:.0f} | "
                f"{r['load_1m_before']:.2f} |"
            )
    lines += [
        "",
        "Generation and catalog build, per size: "
        + ", ".join(f"{s['rollouts']:,}: {s['generate_s']:.1f} s + {s['catalog_s']:.2f} s" for s in report["sizes"])
        + f". Load average at the start: {report['load_average']['start']}, at the end: "
        f"{report['load_average']['end']} ({_cpu_count()} CPUs). CPU s counts every thread of the export process. "
        "Peak RSS is the export process's VmHWM; ru_maxrss (getrusage) also holds the parent's high-water mark at "
        f"the fork, {report['parent_peak_rss_mib']:.0f} MiB here.",
        "",
    ]
    return "\n".join(lines)


def measure_size(shape: Shape, workdir: Path, batch_size: int | None, formats: tuple[str, ...]) -> dict[str, Any]:
    db = workdir / "eval.duckdb"
    command = [sys.executable, __file__, "--generate", str(workdir), "--sizes", str(shape.rollouts)]
    command += ["--models", str(shape.models), "--tasks", str(shape.tasks), "--runs", str(shape.runs_per_pair)]
    built = subprocess.run(command, check=False, capture_output=True, text=True, timeout=CHILD_TIMEOUT_SECONDS)
    if built.returncode != 0:
        raise RuntimeError(f"generating {shape} exited {built.returncode}:\n{built.stderr[-3000:]}")
    timings: dict[str, float] = json.loads(built.stdout.splitlines()[-1])
    scenarios_root = workdir / "scenarios"  # empty: the synthetic scenario is not on disk, so jsonl has no tools
    scenarios_root.mkdir(exist_ok=True)
    exports = []
    for fmt in formats:
        out = workdir / ("export.jsonl" if fmt == "jsonl" else f"export-{fmt}")
        exports.append(_run_child(db, fmt, out, scenarios_root, batch_size))
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink(missing_ok=True)
    return {
        "rollouts": shape.per_run * shape.models * shape.runs_per_pair,
        "shape": asdict(shape),
        **timings,
        "exports": exports,
    }


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES), help="rollouts per sweep")
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--runs", type=int, default=2, help="run files per model x scenario pair")
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--batch-size", type=int, default=None, help="default: the export's own")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--workdir", type=Path, default=None, help="generate here (kept) instead of a temp folder")
    parser.add_argument("--generate", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--format", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--export-to", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--scenarios-root", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.generate is not None:
        shape = Shape(args.sizes[0], args.models, args.tasks, args.runs)
        print(json.dumps(_generate_child(args.generate, shape)))
        return 0
    if args.child is not None:
        print(json.dumps(_child(args.child, args.format, args.export_to, args.scenarios_root, args.batch_size)))
        return 0
    from eval_pipelines.reports.export import DEFAULT_BATCH_SIZE

    load_start = [round(x, 2) for x in os.getloadavg()]
    sizes = []
    for rollouts in args.sizes:
        shape = Shape(rollouts, args.models, args.tasks, args.runs)
        if shape.per_run * args.models * args.runs != rollouts or shape.per_run % args.tasks:
            parser.error(
                f"{rollouts} rollouts do not split evenly into {args.models} models x {args.runs} runs x "
                f"{args.tasks} tasks"
            )
        if args.workdir is not None:
            workdir = args.workdir / f"size-{rollouts}"
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir(parents=True)
            sizes.append(measure_size(shape, workdir, args.batch_size, tuple(args.formats)))
        else:
            with tempfile.TemporaryDirectory(prefix="export-scale-") as tmp:
                sizes.append(measure_size(shape, Path(tmp), args.batch_size, tuple(args.formats)))
    report: dict[str, Any] = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{_cpu_count()} CPUs",
        "command": " ".join([".venv/bin/python", "benchmarks/export_scale.py", *(argv or sys.argv[1:])]),
        "models": args.models,
        "tasks": args.tasks,
        "runs_per_pair": args.runs,
        "batch_size": args.batch_size or DEFAULT_BATCH_SIZE,
        # Other work on a shared machine slows every export; the load average says how busy it was.
        "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
        "sizes": sizes,
        "parent_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "export_scale.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (args.out / "export_scale.md").write_text(_markdown(report), encoding="utf-8")
    print(_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
