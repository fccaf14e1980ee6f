"""Warehouse write benchmark: what collecting a run costs on the warehouse side, rows built and files written.

    .venv/bin/python benchmarks/warehouse_write.py                   # 10,000 rollouts, median of 3
    .venv/bin/python benchmarks/warehouse_write.py --rollouts 2000   # a quick check

The collector's hot path, as `pipeline.steps.run_and_collect` runs it: rollouts (each with the unit tests' trace: 5
messages, 2 tool calls, a state diff, a simulator check) in pages of `COLLECT_CHUNK`, each page's tables built by
`rollout_tables` and streamed into one file per table with `Warehouse.write_streams`; then two verdicts per rollout
written as one `verifications` file with `Warehouse.write`. `build s` is the row building alone (no files), so
`write s - build s` is what the files cost. It only calls the warehouse's public functions, so the same script
measures an earlier commit (check it out with this file and tests/warehouse/conftest.py, run it there). Results go
to `benchmarks/results/warehouse_write.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import RESULTS_DIR, command_line, load_average, machine, now_iso, write_report
from eval_pipelines.pipeline.steps import COLLECT_CHUNK
from eval_pipelines.warehouse.rows import VerificationRecord, rollout_tables, verification_table
from eval_pipelines.warehouse.store import Warehouse
from tests.warehouse import conftest as factories


def _items(n: int) -> list[tuple[Any, Any, str]]:
    return [
        (factories.make_rollout(f"r{i:06d}", f"t{i % 50}", index=i), factories.make_artifacts(f"t{i % 50}"), f"a/{i}")
        for i in range(n)
    ]


def _pages(items: list[tuple[Any, Any, str]]) -> Iterator[list[tuple[Any, Any, str]]]:
    for start in range(0, len(items), COLLECT_CHUNK):
        yield items[start : start + COLLECT_CHUNK]


def _once(root: Path, items: list[tuple[Any, Any, str]], verdicts: list[VerificationRecord]) -> dict[str, float]:
    ctx = factories.make_ctx()
    start = time.perf_counter()
    for page in _pages(items):
        rollout_tables(ctx, page)
    build = time.perf_counter() - start

    warehouse = Warehouse(root)
    start = time.perf_counter()
    cpu = time.process_time()
    rows = warehouse.write_streams(
        (rollout_tables(ctx, page) for page in _pages(items)),
        model_key=ctx.model_key,
        scenario_key=ctx.scenario_key,
        file_stem="run",
    )
    write = time.perf_counter() - start
    write_cpu = time.process_time() - cpu

    start = time.perf_counter()
    warehouse.write(
        "verifications",
        verification_table(verdicts),
        model_key=ctx.model_key,
        scenario_key=ctx.scenario_key,
        file_stem="v",
    )
    verify = time.perf_counter() - start
    size = sum(p.stat().st_size for p in root.rglob("*.parquet"))
    return {
        "build_s": build,
        "write_s": write,
        "write_cpu_s": write_cpu,
        "verifications_s": verify,
        "rows": float(sum(rows.values())),
        "bytes": float(size),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)

    items = _items(args.rollouts)
    verdicts: list[VerificationRecord] = [
        factories.make_verification(f"r{i:06d}", module, "h1", i % 3 != 0, task_id=f"t{i % 50}")
        for i in range(args.rollouts)
        for module in ("state_check", "reply_check")
    ]
    load_before = load_average()
    runs = []
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix=f"warehouse-write-{repeat}-") as folder:
            runs.append(_once(Path(folder), items, verdicts))
    load_after = load_average()
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    report = {
        "benchmark": "warehouse_write",
        "measured_at": now_iso(),
        "command": command_line(),
        "machine": machine(),
        "rollouts": args.rollouts,
        "repeats": args.repeats,
        "median": median,
        "runs": runs,
        "load_average_before": load_before,
        "load_average_after": load_after,
    }
    per = 1e6 / args.rollouts
    markdown = "\n".join(
        [
            f"Warehouse write benchmark, {report['measured_at']}, {args.rollouts:,} rollouts, median of {args.repeats}",
            "",
            "| build s | write_streams s | write CPU s | files us/rollout | verifications write s | rows | MiB |",
            "|---|---|---|---|---|---|---|",
            f"| {median['build_s']:.2f} | {median['write_s']:.2f} | {median['write_cpu_s']:.2f} "
            f"| {(median['write_s'] - median['build_s']) * per:.0f} | {median['verifications_s']:.2f} "
            f"| {median['rows']:,.0f} | {median['bytes'] / 2**20:.1f} |",
            "",
            f"Load average before {load_before}, after {load_after}.",
        ]
    )
    write_report("warehouse_write", report, markdown, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
