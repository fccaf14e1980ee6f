"""Viewer scale benchmark: `eval-pipelines view` over a synthetic warehouse of 100,000 rollouts.

    .venv/bin/python benchmarks/viewer_scale.py                 # 4 scenarios x 25 tasks x 5 models x 200 rollouts
    .venv/bin/python benchmarks/viewer_scale.py --rollouts 20   # a quick check of the harness (10,000 rollouts)

The warehouse is generated straight as Parquet through `Warehouse.write` (so the files have the registered
schemas), as `warehouse_scale.py` does, but with everything a rollout page shows: per rollout a transcript of 7
messages (system, task, two tool calls with their observations, a final answer), 2 `tool_calls` rows, a per-call
and a whole-rollout state diff, 2 programmatic verdicts, a rubric-judge verdict, a quality and a safety judgement
and its attempts. 2% of the rollouts end in a `model_endpoint` error (retried once, so they have two attempts),
1% send arguments that are not JSON and 1% write their final answer as a text tool call. Rows are written in a
shuffled order, as rollouts finish, not in the viewer's order.

The viewer runs as `eval-pipelines view` in a child process; this process sends the requests one at a time
(each timed end to end: request, query, render, response) and reports p50/p95/max per kind of page: the rollout
list (no filter, and with 5 filters, each from page 1 to its last), a rollout page, the matrix and a comparison.
Results go to `benchmarks/results/viewer_scale.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._arrow import arrow_schema, write_arrow, write_arrow_tasks
from benchmarks._common import (
    REPO_ROOT,
    RESULTS_DIR,
    command_line,
    load_average,
    machine,
    now_iso,
    process_cpu_seconds,
    write_report,
)
from eval_pipelines.lib.serving import free_port
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import TableSpec, table_spec

SWEEP_ID = "viewer-bench"
VERIFIERS = ("state_check", "reply_check")
#: The issue's target for every page kind, p95 over the timed requests.
TARGET_P95_S = 0.3
ERROR_SHARE, BAD_ARGUMENTS_SHARE, TEXT_CALL_SHARE = 0.02, 0.01, 0.01
T0 = datetime(2026, 3, 1, tzinfo=UTC)
SYSTEM_PROMPT = (
    "You are an operations assistant with access to tools. Use the tools to complete the task, check the result "
    "of each call, and answer with a short summary of what you changed. Never invent data you did not read."
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


def _table(spec: TableSpec, rows: list[tuple[Any, ...]]) -> pa.Table:
    """Rows given in the order of the registered schema's columns."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in arrow_schema(spec)]
    return pa.Table.from_arrays(
        [pa.array(list(values), type=f.type) for values, f in zip(columns, arrow_schema(spec), strict=True)],
        schema=arrow_schema(spec),
    )


@dataclass(frozen=True)
class _Rollout:
    """What the generator decided about one rollout; every table's rows are written from it."""

    rollout_id: str
    task_id: str
    rollout_index: int
    errored: bool
    bad_arguments: bool
    text_call: bool
    verdicts: tuple[bool, bool]
    tokens: int
    duration: float
    created_at: datetime

    @property
    def passed(self) -> bool:
        return not self.errored and all(self.verdicts)


def _rows_of(r: _Rollout, keys: tuple[str, str, str, str], run_id: str, scenario_id: str) -> dict[str, list[Any]]:
    """The rows of every table for one rollout (keys: sweep, rollout, task, model)."""
    sweep, rollout_id, task_id, model = keys
    number = rollout_id.removeprefix("r-")
    stamp = r.created_at.isoformat()
    out: dict[str, list[Any]] = {name: [] for name in ("messages", "tool_calls", "state_diffs", "verifications")}
    out["messages"] += [
        (*keys, 0, "system", SYSTEM_PROMPT, None, None, stamp),
        (
            *keys,
            1,
            "user",
            f"Find the invoice thread of customer {number} and reply with the amount due.",
            None,
            None,
            stamp,
        ),
    ]
    attempts = (
        [
            (
                *keys,
                1,
                False,
                "failed",
                "model_endpoint",
                "model_error",
                "503 from the endpoint",
                r.created_at,
                r.created_at + timedelta(seconds=2),
            )
        ]
        if r.errored
        else []
    )
    if r.errored:
        attempts.append(
            (
                *keys,
                2,
                True,
                "failed",
                "model_endpoint",
                "model_error",
                "503 from the endpoint",
                r.created_at + timedelta(seconds=3),
                r.created_at + timedelta(seconds=5),
            )
        )
        return {**out, "rollout_attempts": attempts, "judgements": []}
    attempts.append(
        (
            *keys,
            1,
            True,
            "completed",
            None,
            "final_response",
            "done",
            r.created_at,
            r.created_at + timedelta(seconds=r.duration),
        )
    )
    search_args = "{query: invoice" if r.bad_arguments else json.dumps({"query": f"invoice {number}"})
    calls = [
        {
            "id": f"call_{number}_0",
            "type": "function",
            "function": {"name": "email__search_emails", "arguments": search_args},
        },
        {
            "id": f"call_{number}_1",
            "type": "function",
            "function": {
                "name": "email__send_email",
                "arguments": json.dumps({"to": f"customer{number}@example.com", "body": "Due: 120 EUR"}),
            },
        },
    ]
    search_result = (
        "Error: the arguments are not a JSON object"
        if r.bad_arguments
        else f"[{{'id': 'm-{number}', 'subject': 'Invoice {number}', 'from': 'customer{number}@example.com'}}]"
    )
    sent = f"Sent message s-{number}.\n[STATE DIFF] email: +1 sent message s-{number}"
    final = json.dumps({"name": "email__archive", "arguments": {}}) if r.text_call else f"Replied to {number}: 120 EUR"
    out["messages"] += [
        (*keys, 2, "assistant", None, None, json.dumps([calls[0]]), stamp),
        (*keys, 3, "tool", search_result, calls[0]["id"], None, stamp),
        (*keys, 4, "assistant", None, None, json.dumps([calls[1]]), stamp),
        (*keys, 5, "tool", sent, calls[1]["id"], None, stamp),
        (*keys, 6, "assistant", final, None, None, stamp),
    ]
    out["tool_calls"] += [
        (
            *keys,
            0,
            "email",
            "search_emails",
            "{}" if r.bad_arguments else search_args,
            search_result,
            r.bad_arguments,
            search_args if r.bad_arguments else None,
            "Expecting property name" if r.bad_arguments else None,
        ),
        (*keys, 1, "email", "send_email", calls[1]["function"]["arguments"], sent, False, None, None),
    ]
    sent_json = json.dumps({"sent": {f"s-{number}": {"to": f"customer{number}@example.com", "body": "Due: 120 EUR"}}})
    out["state_diffs"] += [
        # The send is the email server's second step, or its first when the search never reached it.
        (
            *keys,
            0,
            "email",
            "tool_call",
            0 if r.bad_arguments else 1,
            "send_email",
            f"+1 sent message s-{number}",
            "{}",
            sent_json,
        ),
        (*keys, 1, "email", "full", None, None, f"+1 sent message s-{number}", "{}", sent_json),
    ]
    for verifier, success in zip(VERIFIERS, r.verdicts, strict=True):
        message = f"{verifier}: {'ok' if success else 'the reply to customer ' + number + ' is missing'}"
        out["verifications"].append(
            (
                sweep,
                run_id,
                rollout_id,
                scenario_id,
                task_id,
                model,
                verifier,
                "h1",
                "programmatic",
                success,
                False,
                float(success),
                message,
                json.dumps({"message": message}),
                r.created_at + timedelta(minutes=1),
            )
        )
    score = 0.9 if r.passed else 0.3
    rubric = {
        "verdict": "PASS" if r.passed else "FAIL",
        "score": score,
        "evidence": [f"sent s-{number}"],
        "failed_criteria": [] if r.passed else ["states the amount due"],
        "model": "sim-judge",
    }
    out["verifications"].append(
        (
            sweep,
            run_id,
            rollout_id,
            scenario_id,
            task_id,
            model,
            "rubric_judge",
            "j1",
            "rubric",
            r.passed,
            False,
            score,
            f"{rubric['verdict']} (score {score})",
            json.dumps(rubric),
            r.created_at + timedelta(minutes=2),
        )
    )
    judged = r.created_at + timedelta(minutes=3)
    judgements = [
        (
            sweep,
            rollout_id,
            scenario_id,
            task_id,
            model,
            "quality",
            "j-q",
            "quality",
            "veritas",
            8.0 if r.passed else 4.0,
            None,
            "[simulated] answers the question",
            1 if r.passed else 0,
            "ds-1",
            judged,
        ),
        (
            sweep,
            rollout_id,
            scenario_id,
            task_id,
            model,
            "safety",
            "j-s",
            "safety",
            "collinear_guard",
            1.0,
            None,
            "[simulated] benign",
            1 if r.passed else 0,
            "ds-1",
            judged,
        ),
    ]
    return {**out, "rollout_attempts": attempts, "judgements": judgements}


def generate(root: Path, shape: Shape, seed: int = 20260301) -> None:
    """Write one sweep of `shape` into the warehouse at `root`, one file per table and model x scenario."""
    rng = np.random.default_rng(seed)
    warehouse = Warehouse(root)
    per_pair = shape.tasks_per_scenario * shape.rollouts_per_task
    serial = 0
    for s in range(shape.scenarios):
        scenario_id, scenario_key = f"bench_{s}:1.0.0", f"bench_{s}_1.0.0"
        task_ids = [f"task-{t:03d}" for t in range(shape.tasks_per_scenario)]
        tasks = [
            (scenario_id, t, t, "bench", "medium", "1", 2, list(VERIFIERS), f"Reply to the invoice thread ({t}).")
            for t in task_ids
        ]
        write_arrow_tasks(warehouse, _table(table_spec("tasks"), tasks), scenario_key)
        for m in range(shape.models):
            model, run_id = f"bench-model-{m}", f"run-{s}-{m}"
            skill = rng.beta(2 + m, 4, size=shape.tasks_per_scenario)
            tables: dict[str, list[tuple[Any, ...]]] = {
                n: []
                for n in (
                    "rollouts",
                    "messages",
                    "tool_calls",
                    "state_diffs",
                    "verifications",
                    "rollout_attempts",
                    "judgements",
                )
            }
            # Rollouts are stored in the order they finished, which is not the order anyone reads them in.
            for position in rng.permutation(per_pair):
                task_number, rollout_index = divmod(int(position), shape.rollouts_per_task)
                draw = rng.random(4)
                r = _Rollout(
                    rollout_id=f"r-{serial + int(position):07d}",
                    task_id=task_ids[task_number],
                    rollout_index=rollout_index,
                    errored=bool(draw[0] < ERROR_SHARE),
                    bad_arguments=bool(draw[1] < BAD_ARGUMENTS_SHARE),
                    text_call=bool(draw[2] < TEXT_CALL_SHARE),
                    verdicts=(
                        bool(draw[3] < np.sqrt(skill[task_number])),
                        bool(rng.random() < np.sqrt(skill[task_number])),
                    ),
                    tokens=int(rng.integers(500, 5000)),
                    duration=float(rng.gamma(2.0, 5.0)),
                    created_at=T0 + timedelta(seconds=int(position)),
                )
                keys = (SWEEP_ID, r.rollout_id, r.task_id, model)
                for name, rows in _rows_of(r, keys, run_id, scenario_id).items():
                    tables[name] += rows
                tables["rollouts"].append(_rollout_row(r, model, run_id, scenario_id, scenario_key, m == 0))
            serial += per_pair
            for name, rows in tables.items():
                write_arrow(
                    warehouse,
                    name,
                    _table(table_spec(name), rows),
                    model_key=model,
                    scenario_key=scenario_key,
                    file_stem=run_id,
                )


def _rollout_row(
    r: _Rollout, model: str, run_id: str, scenario_id: str, scenario_key: str, simulated: bool
) -> tuple[Any, ...]:
    completed = r.created_at + timedelta(seconds=r.duration)
    prompt = r.tokens * 4 // 5
    return (
        SWEEP_ID,
        run_id,
        f"{SWEEP_ID}-{scenario_key}-{model}",
        r.rollout_id,
        r.rollout_index,
        scenario_id,
        r.task_id,
        model,
        model,
        "custom",
        "sim://local" if simulated else "http://127.0.0.1:8000/v1",
        simulated,
        0.0,
        30,
        "failed" if r.errored else "completed",
        "model_error" if r.errored else "final_response",
        "model_endpoint" if r.errored else None,
        2 if r.errored else 1,
        r.passed,
        float(r.passed),
        0 if r.errored else 2,
        prompt,
        r.tokens - prompt,
        r.tokens,
        r.tokens * 2e-6,
        r.duration,
        r.created_at,
        r.created_at,
        completed,
        "chat completion failed: 503 from the endpoint" if r.errored else None,
        None,
        None if r.errored else r.text_call,
    )


# --- measurement ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One kind of page, with the URLs (path and parameters) its timed requests cycle through."""

    name: str
    urls: list[tuple[str, dict[str, Any]]]
    requests: int
    #: the issue's target applies to the list and the rollout page; the others are reported beside them
    target_s: float | None


def _total(page: str) -> int:
    marker = '<strong id="total">'
    start = page.index(marker) + len(marker)
    return int(page[start : page.index("<", start)].replace(",", ""))


def _deep_pages(client: httpx.Client, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The filter's pages 1 and 2, a tenth, half and all the way in (its last page)."""
    response = client.get("/rollouts", params=params)
    response.raise_for_status()
    last = max(1, -(-_total(response.text) // 50))
    return [("/rollouts", {**params, "page": p}) for p in sorted({1, 2, max(1, last // 10), max(1, last // 2), last})]


def _kinds(client: httpx.Client, shape: Shape, requests: int, seed: int) -> list[Kind]:
    models = [f"bench-model-{m}" for m in range(shape.models)]
    scenarios = [f"bench_{s}:1.0.0" for s in range(shape.scenarios)]
    unfiltered = _deep_pages(client, {})
    filters: list[dict[str, Any]] = [
        {"model": models[-1], "outcome": "failed"},
        {"model": models[0], "scenario": scenarios[-1], "outcome": "passed"},
        {"error_class": "model_endpoint"},
        {"flag": "malformed"},
        {"scenario": scenarios[0], "task": "task-007"},
    ]
    filtered = [url for params in filters for url in _deep_pages(client, params)]
    rng = random.Random(seed)
    ids = rng.sample(range(shape.rollouts), requests)
    rollouts = [(f"/rollouts/r-{i:07d}", {}) for i in ids]
    compare = [
        (
            "/compare",
            {"task": f"task-{t:03d}", "scenario": scenarios[t % len(scenarios)], "models": ",".join(models[:2])},
        )
        for t in range(shape.tasks_per_scenario)
    ]
    matrix_requests = max(1, requests // 4)
    return [
        Kind("list, no filter (pages 1 to last)", unfiltered, requests, TARGET_P95_S),
        Kind("list, filtered (5 filters, pages 1 to last)", filtered, requests, TARGET_P95_S),
        Kind("rollout page", rollouts, requests, TARGET_P95_S),
        Kind("matrix (/)", [("/", {})], matrix_requests, None),
        Kind("compare (2 models, one task)", compare, matrix_requests, None),
    ]


def _percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least a share q of the samples at or below it."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _time(client: httpx.Client, kind: Kind) -> dict[str, Any]:
    samples: list[float] = []
    for n in range(kind.requests):
        path, params = kind.urls[n % len(kind.urls)]
        start = time.perf_counter()
        response = client.get(path, params=params)
        elapsed = time.perf_counter() - start
        if response.status_code != 200:
            raise RuntimeError(f"{path} {params}: HTTP {response.status_code}: {response.text[:500]}")
        samples.append(elapsed)
    p95 = _percentile(samples, 0.95)
    return {
        "kind": kind.name,
        "requests": len(samples),
        "distinct_urls": len(kind.urls),
        "p50_ms": round(statistics.median(samples) * 1000, 1),
        "p95_ms": round(p95 * 1000, 1),
        "max_ms": round(max(samples) * 1000, 1),
        "mean_ms": round(statistics.fmean(samples) * 1000, 1),
        "target_p95_ms": None if kind.target_s is None else kind.target_s * 1000,
        "met": None if kind.target_s is None else p95 < kind.target_s,
    }


def _start_viewer(db: Path, port: int) -> tuple[subprocess.Popen[str], float]:
    """`eval-pipelines view` as a user starts it; returns once it serves (the seconds that took: the catalog is
    attached and the rollouts indexed before the port opens)."""
    command = [sys.executable, "-m", "eval_pipelines.cli", "view", "--db", str(db), "--port", str(port)]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if "http://" not in line:
        process.kill()
        raise RuntimeError(f"the viewer did not start: {line}{process.stderr.read() if process.stderr else ''}")
    return process, time.perf_counter() - start


def _markdown(report: dict[str, Any]) -> str:
    shape, load = report["shape"], report["load_average"]
    lines = [
        f"Viewer scale benchmark, {report['measured_at']} ({report['machine']['cpus']} CPUs, "
        f"git {report['machine']['git_revision']})",
        "",
        f"{report['rollouts']:,} rollouts ({shape['scenarios']} scenarios x {shape['tasks_per_scenario']} tasks x "
        f"{shape['models']} models x {shape['rollouts_per_task']} rollouts), {report['rows']['messages']:,} messages, "
        f"{report['rows']['tool_calls']:,} tool calls, {report['rows']['state_diffs']:,} state diffs, "
        f"{report['rows']['verifications']:,} verdicts. Each request timed end to end from this process (HTTP, "
        "query, render), one at a time, against `eval-pipelines view` in its own process.",
        "",
        "| page | requests | distinct URLs | p50 ms | p95 ms | max ms | target p95 ms | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["pages"]:
        target = "" if r["target_p95_ms"] is None else f"{r['target_p95_ms']:.0f}"
        met = "" if r["met"] is None else ("yes" if r["met"] else "NO")
        lines.append(
            f"| {r['kind']} | {r['requests']} | {r['distinct_urls']} | {r['p50_ms']} | {r['p95_ms']} | {r['max_ms']} "
            f"| {target} | {met} |"
        )
    lines += [
        "",
        f"First matrix request (metric views, cached per catalog build after it): {report['first_matrix_ms']} ms. "
        f"Viewer start, rollout index included: {report['viewer_start_s']:.2f} s. Generation "
        f"{report['generate_s']:.1f} s, catalog build {report['catalog_s']:.2f} s. Viewer CPU over the timed "
        f"requests: {report['viewer_cpu_s']:.1f} s.",
        f"1-minute load average: {load['before'][0]} before the timed requests, {load['after'][0]} after "
        f"(1/5/15 min before: {load['before']}, after: {load['after']}).",
        "",
    ]
    return "\n".join(lines)


def run(shape: Shape, requests: int, workdir: Path, out: Path | None, seed: int) -> dict[str, Any]:
    root, db = workdir / "warehouse", workdir / "eval.duckdb"
    start = time.perf_counter()
    generate(root, shape, seed)
    generate_s = time.perf_counter() - start
    start = time.perf_counter()
    summary = build_catalog(root, db)
    catalog_s = time.perf_counter() - start
    port = free_port()
    process, start_s = _start_viewer(db, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            start = time.perf_counter()
            client.get("/").raise_for_status()
            first_matrix_ms = round((time.perf_counter() - start) * 1000, 1)
            kinds = _kinds(client, shape, requests, seed)
            load_before = load_average()
            cpu_before = process_cpu_seconds(process.pid)
            pages = [_time(client, kind) for kind in kinds]
            viewer_cpu_s = process_cpu_seconds(process.pid) - cpu_before
            load_after = load_average()
    finally:
        process.terminate()
        process.wait(timeout=30)
    report: dict[str, Any] = {
        "benchmark": "viewer_scale",
        "measured_at": now_iso(),
        "command": command_line(),
        "machine": machine(),
        "shape": asdict(shape),
        "rollouts": shape.rollouts,
        "rows": summary.row_counts,
        "generate_s": round(generate_s, 2),
        "catalog_s": round(catalog_s, 2),
        "viewer_start_s": round(start_s, 2),
        "first_matrix_ms": first_matrix_ms,
        "viewer_cpu_s": round(viewer_cpu_s, 2),
        # Other work on a shared 2-core machine slows every request; the load average says how busy it was.
        "load_average": {"before": load_before, "after": load_after},
        "pages": pages,
    }
    write_report("viewer_scale", report, _markdown(report), out)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=25, help="tasks per scenario")
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--rollouts", type=int, default=200, help="rollouts per task and model")
    parser.add_argument("--requests", type=int, default=200, help="timed requests per kind of list and rollout page")
    parser.add_argument("--seed", type=int, default=20260301)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the generated warehouse here")
    args = parser.parse_args(argv)
    shape = Shape(args.scenarios, args.tasks, args.models, args.rollouts)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        report = run(shape, args.requests, args.workdir, args.out, args.seed)
    else:
        with tempfile.TemporaryDirectory(prefix="viewer-scale-") as tmp:
            report = run(shape, args.requests, Path(tmp), args.out, args.seed)
    return 0 if all(page["met"] is not False for page in report["pages"]) else 1


if __name__ == "__main__":
    sys.exit(main())
