"""Run every benchmark of issue 10 with one command; print one side-by-side table and write a combined summary.

    .venv/bin/python benchmarks/run_all.py                   # full sizes (about an hour on 2 shared cores)
    .venv/bin/python benchmarks/run_all.py --quick           # tiny sizes: checks the harness in a few minutes

Each benchmark runs as its own process (`benchmarks/<name>.py --out <dir>`), so one failure or one memory peak
does not touch the others. Then one table puts them side by side: ours against Inspect AI over the same HTTP
endpoint (default and lean settings) and on its in-process `mockllm` (lean settings), in rollouts/s, CPU-ms and
bytes written per rollout, with each Inspect column's settings; then ours alone in latency hiding, peak RSS and
re-verification, which have no Inspect counterpart measured here. Results: `<out>/<name>.{json,md}` per
benchmark, `<out>/summary.md` and `<out>/run_all.json` with the table (default `benchmarks/results/`,
git-ignored). The Inspect AI sides of `overhead` need `benchmarks/.venv-inspect` (see
`benchmarks/overhead.py --help`); without it their columns read "not run".

`--quick` figures check that the harness runs end to end; they are not measurements.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO_ROOT, RESULTS_DIR, command_line, load_average, machine, now_iso
from benchmarks.overhead import INSPECT_SIDES, LABELS, OURS

HERE = Path(__file__).resolve().parent
BENCHMARKS = ("overhead", "latency_hiding", "memory", "reverify", "dagster_overhead")
#: Arguments of `--quick`: the smallest sizes that still exercise every code path.
QUICK_ARGS: dict[str, list[str]] = {
    "overhead": ["--sizes", "10x1", "4x2", "--repeats", "1"],
    "latency_hiding": ["--concurrency", "5", "--waves", "2", "--latency", "0.05", "--repeats", "1"],
    "memory": ["--sizes", "10", "30"],
    "reverify": ["--rollouts", "100"],
    "dagster_overhead": ["--partitions", "2", "--sides", "direct", "dagster"],
}
#: reverify has no `--in-process`: it always times re-verification in a fresh child of its own.
IN_PROCESS_CAPABLE = frozenset({"overhead", "latency_hiding", "memory", "dagster_overhead"})
#: The side-by-side table's columns, in order: ours, then each Inspect side of `overhead`.
COLUMNS = (OURS, *INSPECT_SIDES)
NOT_MEASURED = "not measured"


def run_one(name: str, out: Path, extra: list[str]) -> dict[str, Any]:
    """Run one benchmark script in its own process; its own report files land in `out`.

    Exit 1 means "ran, and missed a target" only when the script wrote a fresh report; an exit without one (an
    uncaught exception also exits 1) is a failure, with the end of its stderr kept."""
    command = [sys.executable, str(HERE / f"{name}.py"), "--out", str(out), *extra]
    started = time.time()
    completed = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    report = out / f"{name}.json"
    reported = report.is_file() and report.stat().st_mtime >= started
    exit_code = completed.returncode if reported or completed.returncode not in (0, 1) else 2
    return {
        "name": name,
        "command": " ".join([".venv/bin/python", f"benchmarks/{name}.py", *extra]),
        "exit_code": exit_code,
        "seconds": round(time.time() - started, 1),
        "stderr_tail": "" if reported else completed.stderr[-2000:],
    }


def headline(name: str, report: dict[str, Any]) -> tuple[str, str, str]:
    """(figure, target, verdict) of one benchmark's report."""
    if name == "overhead":
        parts = []
        for c in report["comparisons"]:
            ratios = ", ".join(
                f"{r['throughput']}x{per_pair_range(r, 'throughput')} vs {other}" for other, r in c["ours_vs"].items()
            )
            ours = c["medians"].get("ours", {})
            parts.append(
                f"{c['samples']}x{c['epochs']}: ours {ours.get('rollouts_per_second')} rollouts/s, "
                f"{ours.get('cpu_ms_per_rollout')} CPU-ms; {ratios or 'no Inspect side'}"
            )
        targets = "; ".join(f"{name} {t['target']}" for name, t in report.get("targets", {}).items())
        return "; ".join(parts), targets, _verdict(report["meets_target"])
    if name == "latency_hiding":
        figure = ", ".join(f"c={r['concurrency']}: {r['fraction_of_ideal']:.0%}" for r in report["results"])
        return f"of ideal {figure}", report["target"], _verdict(report["meets_target"])
    if name == "memory":
        figure = ", ".join(f"{r['rollouts']:,}: {r['peak_rss_mib']} MiB" for r in report["results"])
        return f"peak RSS {figure}", report["target"], _verdict(report["meets_target"])
    if name == "reverify":
        target = report["target_rollouts_per_second"]
        results = report["results"].values()
        figure = ", ".join(f"{r['mode']}: {r['rollouts_per_second']} rollouts/s" for r in results)
        met = all(r["rollouts_per_second"] >= target for r in results)
        return f"{report['rollouts']:,} rollouts, {figure}", f">= {target:g} rollouts/s", _verdict(met)
    if name == "dagster_overhead":
        overhead = report.get("dagster_overhead")
        if not overhead:
            return "incomplete", "(measurement)", "n/a"
        figure = (
            f"+{overhead['wall_seconds_per_partition']} s/partition ({overhead['ratio']}x direct over "
            f"{report['partitions']} partitions)"
        )
        return figure, "(measurement)", "n/a"
    return "", "", ""


def per_pair_range(ratio: dict[str, Any], measure: str) -> str:
    """ " [min-max]" of a ratio's per-pair values, when the report has them (older reports have medians only)."""
    values = ratio.get(f"{measure}_spread")
    return f" [{values['min']}-{values['max']}]" if values else ""


def _verdict(met: bool | None) -> str:
    return "n/a" if met is None else ("meets" if met else "**MISSES**")


# --- the side-by-side table -------------------------------------------------------------------------------------


def _row(measure: str, cells: dict[str, str], values: dict[str, Any] | None = None) -> dict[str, Any]:
    """One table row: the text of every column (a missing one reads "not measured") and, for JSON readers,
    the numbers behind it."""
    return {
        "measure": measure,
        "cells": {column: cells.get(column, NOT_MEASURED) for column in COLUMNS},
        "values": values or {},
    }


def compact_settings(settings: dict[str, Any]) -> str:
    """An Inspect column's settings in a few words: its model, then the overhead switches as Inspect resolved
    them, marked as defaults or as set."""
    resolved = settings.get("resolved", {})
    display = resolved.get("display")
    if display == "full" and resolved.get("stdout_is_tty") is False:
        display = "full (rich: stdout not a TTY)"
    switches = (
        f"display={display}, log_realtime={resolved.get('log_realtime')}, ctl_server={resolved.get('ctl_server')}, "
        f"score_display={resolved.get('score_display')}, {resolved.get('log_format')} log"
    )
    how = "eval() defaults" if not settings.get("eval_args") else "set: " + ", ".join(settings["eval_args"])
    return f"`{settings.get('model')}` (Inspect {settings.get('version')}); {how}; {switches}"


def ours_settings(settings: dict[str, Any]) -> str:
    return f"embedded service, no Dagster; {settings.get('model')}; max_parallel {settings.get('max_parallel')}"


def overhead_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    skipped = report.get("skipped", {})

    def absent(side: str) -> str:
        return "not run (no benchmarks/.venv-inspect)" if side in skipped else "not run"

    rows = []
    for c in report["comparisons"]:
        size, medians, versus = f"{c['samples']} x {c['epochs']}", c["medians"], c["ours_vs"]
        throughput: dict[str, str] = {}
        cpu: dict[str, str] = {}
        written: dict[str, str] = {}
        for side in COLUMNS:
            m = medians.get(side)
            if m is None:
                throughput[side] = cpu[side] = written[side] = absent(side)
                continue
            ratio = versus.get(side)
            throughput[side] = f"{m['rollouts_per_second']}" + (
                f" (ours {ratio['throughput']}x{per_pair_range(ratio, 'throughput')})" if ratio else ""
            )
            cpu[side] = f"{m['cpu_ms_per_rollout']}" + (
                f" ({ratio['cpu_per_rollout']}x{per_pair_range(ratio, 'cpu_per_rollout')} ours)" if ratio else ""
            )
            written[side] = f"{int(m['bytes_per_rollout']):,}"
        rows += [
            _row(
                f"rollouts/s, {size}",
                throughput,
                {side: m["rollouts_per_second"] for side, m in medians.items()} | {"ours_vs": versus},
            ),
            _row(
                f"CPU-ms per rollout (process; endpoint apart), {size}",
                cpu,
                {side: m["cpu_ms_per_rollout"] for side, m in medians.items()},
            ),
            _row(
                f"bytes written per rollout (ours: data folder; Inspect: its .eval log), {size}",
                written,
                {side: m["bytes_per_rollout"] for side, m in medians.items()},
            ),
        ]
    settings = report.get("settings", {})
    described = {
        side: (compact_settings(settings[side]) if side in INSPECT_SIDES else ours_settings(settings[side]))
        if side in settings
        else absent(side)
        for side in COLUMNS
    }
    rows.append(_row("settings", described, {side: settings.get(side) for side in COLUMNS}))
    return rows


def ours_only_rows(reports: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The benchmarks measured on our side only: their Inspect columns read "not measured"."""
    rows = []
    latency = reports.get("latency_hiding")
    if latency:
        results = latency["results"]
        concurrencies = " / ".join(str(r["concurrency"]) for r in results)
        rows.append(
            _row(
                f"latency hiding: % of ideal at concurrency {concurrencies} "
                f"({latency['latency_seconds'] * 1000:g} ms per model call)",
                {OURS: " / ".join(f"{r['fraction_of_ideal']:.0%}" for r in results)},
                {OURS: {r["concurrency"]: r["fraction_of_ideal"] for r in results}},
            )
        )
    else:
        rows.append(_row("latency hiding: % of ideal", {OURS: "not run"}))
    memory = reports.get("memory")
    if memory:
        results = memory["results"]
        sizes = " / ".join(f"{r['rollouts']:,}" for r in results)
        rows.append(
            _row(
                f"peak RSS MiB at {sizes} rollouts",
                {OURS: " / ".join(str(r["peak_rss_mib"]) for r in results)},
                {OURS: {r["rollouts"]: r["peak_rss_mib"] for r in results}},
            )
        )
    else:
        rows.append(_row("peak RSS MiB", {OURS: "not run"}))
    reverify = reports.get("reverify")
    if reverify:
        results = reverify["results"]
        rows.append(
            _row(
                f"re-verify rollouts/s ({reverify['rollouts']:,} stored rollouts)",
                {OURS: "; ".join(f"{mode} {r['rollouts_per_second']}" for mode, r in results.items())},
                {OURS: {mode: r["rollouts_per_second"] for mode, r in results.items()}},
            )
        )
    else:
        rows.append(_row("re-verify rollouts/s", {OURS: "not run"}))
    return rows


def side_by_side(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The one table: columns are ours and the Inspect sides; `reports` maps benchmark name to its JSON report
    (a missing one, not run or failed, leaves its rows reading "not run")."""
    overhead = reports.get("overhead")
    rows = overhead_rows(overhead) if overhead else [_row("rollouts/s vs Inspect", {OURS: "not run"})]
    return {
        "columns": {column: LABELS[column] for column in COLUMNS},
        "rows": rows + ours_only_rows(reports),
        "concurrency": overhead.get("max_parallel") if overhead else None,
    }


def side_by_side_markdown(table: dict[str, Any], quick: bool) -> str:
    columns = table["columns"]
    lines = [
        "## Side by side" + (" (--quick: a harness check at toy sizes, not a measurement)" if quick else ""),
        "",
        f"Concurrency {table['concurrency']}; zero-latency model unless stated. In brackets: rollouts/s as "
        "(ours Nx) = ours / Inspect's; CPU-ms as (Nx ours) = Inspect's / ours; N is the median of the per-pair "
        "ratios of the paired repetitions, [min-max] their spread. Above 1, ours is ahead.",
        "",
        "| measure | " + " | ".join(columns.values()) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for row in table["rows"]:
        lines.append(f"| {row['measure']} | " + " | ".join(row["cells"][c] for c in columns) + " |")
    return "\n".join(lines)


def load_reports(runs: list[dict[str, Any]], out: Path) -> dict[str, dict[str, Any]]:
    """The JSON report of every benchmark that ran (exit 0, or 1 = a target missed but reported)."""
    reports = {}
    for run in runs:
        path = out / f"{run['name']}.json"
        if run["exit_code"] in (0, 1) and path.is_file():
            reports[run["name"]] = json.loads(path.read_text(encoding="utf-8"))
    return reports


def summary(runs: list[dict[str, Any]], reports: dict[str, dict[str, Any]], table_md: str, out: Path) -> str:
    lines = [
        f"# Benchmarks ({now_iso()}, {machine()['cpus']} CPUs, load {load_average()})",
        "",
        table_md,
        "",
        "## Per benchmark",
        "",
        "| benchmark | figure | target | verdict | command |",
        "|---|---|---|---|---|",
    ]
    sections = []
    for run in runs:
        report = reports.get(run["name"])
        if report is None:
            lines.append(f"| {run['name']} | failed (exit {run['exit_code']}) | | | `{run['command']}` |")
            continue
        figure, target, verdict = headline(run["name"], report)
        lines.append(f"| {run['name']} | {figure} | {target} | {verdict} | `{run['command']}` |")
        md_path = out / f"{run['name']}.md"
        if md_path.is_file():
            sections += ["", f"## {run['name']}", "", md_path.read_text(encoding="utf-8").strip()]
    return "\n".join(lines + sections) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS))
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a check of the harness, not a measurement")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument(
        "--in-process", action="store_true", help="each benchmark keeps its runs in its own process (smoke tests)"
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    for name in args.only:
        in_process = ["--in-process"] if args.in_process and name in IN_PROCESS_CAPABLE else []
        extra = [*(QUICK_ARGS[name] if args.quick else []), *in_process]
        print(f"running {name} ...", file=sys.stderr, flush=True)
        runs.append(run_one(name, args.out, extra))
        print(f"  {name}: exit {runs[-1]['exit_code']} in {runs[-1]['seconds']} s", file=sys.stderr, flush=True)
        if runs[-1]["stderr_tail"]:
            print(runs[-1]["stderr_tail"], file=sys.stderr)
    reports = load_reports(runs, args.out)
    table = side_by_side(reports)
    text = summary(runs, reports, side_by_side_markdown(table, args.quick), args.out)
    (args.out / "summary.md").write_text(text, encoding="utf-8")
    record = {
        "command": command_line(),
        "quick": args.quick,
        "side_by_side": table,
        "runs": runs,
        "machine": machine(),
        "measured_at": now_iso(),
    }
    (args.out / "run_all.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(text)
    # 1 = a target was missed (reported), 2 = a benchmark itself failed.
    if any(r["exit_code"] not in (0, 1) for r in runs):
        return 2
    return 1 if any(r["exit_code"] == 1 for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
