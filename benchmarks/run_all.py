"""Run every benchmark of issue 10 with one command and write a combined Markdown summary.

    .venv/bin/python benchmarks/run_all.py                   # full sizes (about an hour on 2 shared cores)
    .venv/bin/python benchmarks/run_all.py --quick           # tiny sizes: checks the harness in a minute or two

Each benchmark runs as its own process (`benchmarks/<name>.py --out <dir>`), so one failure or one memory peak
does not touch the others. Results: `<out>/<name>.{json,md}` per benchmark and `<out>/summary.md` (default
`benchmarks/results/`, git-ignored). The Inspect AI side of `overhead` needs `benchmarks/.venv-inspect` (see
`benchmarks/overhead.py --help`); without it `overhead` reports ours alone.
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

HERE = Path(__file__).resolve().parent
BENCHMARKS = ("overhead", "latency_hiding", "memory", "dagster_overhead")
#: Arguments of `--quick`: the smallest sizes that still exercise every code path.
QUICK_ARGS: dict[str, list[str]] = {
    "overhead": ["--sizes", "10x1", "4x2"],
    "latency_hiding": ["--concurrency", "5", "--waves", "2", "--latency", "0.05"],
    "memory": ["--sizes", "10", "30"],
    "dagster_overhead": ["--partitions", "2", "--sides", "direct", "dagster"],
}


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
            ratios = ", ".join(f"{r['throughput']}x vs {other}" for other, r in c["ours_vs"].items())
            ours = c["medians"].get("ours", {})
            parts.append(
                f"{c['samples']}x{c['epochs']}: ours {ours.get('rollouts_per_second')} rollouts/s, "
                f"{ours.get('cpu_ms_per_rollout')} CPU-ms; {ratios or 'no Inspect side'}"
            )
        return (
            "; ".join(parts),
            f">= {report['target_ratio']}x ({report['headline']})",
            _verdict(report["meets_target"]),
        )
    if name == "latency_hiding":
        figure = ", ".join(f"c={r['concurrency']}: {r['fraction_of_ideal']:.0%}" for r in report["results"])
        return f"of ideal {figure}", report["target"], _verdict(report["meets_target"])
    if name == "memory":
        figure = ", ".join(f"{r['rollouts']:,}: {r['peak_rss_mib']} MiB" for r in report["results"])
        return f"peak RSS {figure}", report["target"], _verdict(report["meets_target"])
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


def _verdict(met: bool | None) -> str:
    return "n/a" if met is None else ("meets" if met else "**MISSES**")


def summary(runs: list[dict[str, Any]], out: Path) -> str:
    lines = [
        f"# Benchmarks ({now_iso()}, {machine()['cpus']} CPUs, load {load_average()})",
        "",
        "| benchmark | figure | target | verdict | command |",
        "|---|---|---|---|---|",
    ]
    sections = []
    for run in runs:
        json_path, md_path = out / f"{run['name']}.json", out / f"{run['name']}.md"
        if run["exit_code"] not in (0, 1) or not json_path.is_file():
            lines.append(f"| {run['name']} | failed (exit {run['exit_code']}) | | | `{run['command']}` |")
            continue
        figure, target, verdict = headline(run["name"], json.loads(json_path.read_text(encoding="utf-8")))
        lines.append(f"| {run['name']} | {figure} | {target} | {verdict} | `{run['command']}` |")
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
        extra = [*(QUICK_ARGS[name] if args.quick else []), *(["--in-process"] if args.in_process else [])]
        print(f"running {name} ...", file=sys.stderr, flush=True)
        runs.append(run_one(name, args.out, extra))
        print(f"  {name}: exit {runs[-1]['exit_code']} in {runs[-1]['seconds']} s", file=sys.stderr, flush=True)
        if runs[-1]["stderr_tail"]:
            print(runs[-1]["stderr_tail"], file=sys.stderr)
    text = summary(runs, args.out)
    (args.out / "summary.md").write_text(text, encoding="utf-8")
    (args.out / "run_all.json").write_text(
        json.dumps({"command": command_line(), "runs": runs, "measured_at": now_iso()}, indent=2) + "\n",
        encoding="utf-8",
    )
    print(text)
    # 1 = a target was missed (reported), 2 = a benchmark itself failed.
    if any(r["exit_code"] not in (0, 1) for r in runs):
        return 2
    return 1 if any(r["exit_code"] == 1 for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
