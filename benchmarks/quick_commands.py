"""Quick commands: the wall time and CPU of `eval-pipelines sql`, `export`, `report` and `reverify` on a small
catalog, against the same work done by a bare script in the same run; the difference is the command's own overhead
(interpreter and imports, argument parsing, Dagster's run bookkeeping where a command records a run). The CPU of
`reverify` includes its recorder process's (a child it waits for).

    .venv/bin/python benchmarks/quick_commands.py               # 3 repeats of each, medians
    .venv/bin/python benchmarks/quick_commands.py --repeats 5

Setup (untimed): `eval-pipelines init` in a temporary folder, then a sweep of sim-oracle and sim-noisy over three
email_ops tasks, one rollout each (6 rollouts, `--skip-assessment`). Then, for each command, alternating the two
sides each repeat so that load drifts hit both alike:

- sql: `eval-pipelines sql "<query>"`; bare: DuckDB connects read-only, runs the query, prints the rows.
- export: `eval-pipelines export --format jsonl`; bare: one DuckDB query of the rollouts with their verdicts and
  messages, written as JSON lines.
- report: `eval-pipelines report`; bare: `reports.build.build_report` called directly (the page and its charts).
- reverify: `eval-pipelines reverify --all --scenario email_ops:1.0.0` (the verification, the asset's checks and
  the catalog in the CLI's process, recorded in Dagster by one run of a recorder process: defs/reverify.py); bare:
  `pipeline.steps.verify_partition` per stored partition (the same verifier calls), then
  `warehouse.catalog.build_catalog`.

Each run is a fresh process (`subprocess.run`): wall time around it, CPU from the children's rusage (user + system,
the process and everything it waited for). Overhead = command - bare, per median. The load average is read before
and after. Results: JSON on stdout and in `benchmarks/results/quick_commands.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CLI = Path(sys.executable).with_name("eval-pipelines")
SWEEP_ID = "quick"
SCENARIO_ID = "email_ops:1.0.0"
QUERY = "select model_name, count(*) as n, avg(reward) as pass_rate from rollout_scores group by all order by 1"
SWEEP_YAML = f"""name: quick
scenarios:
  - {{id: "{SCENARIO_ID}", limit: 3}}
models:
  - {{name: sim-oracle, model: sim-oracle, base_url: sim://local}}
  - {{name: sim-noisy, model: sim-noisy, base_url: sim://local}}
rollout_count: 1
max_parallel: 4
"""
TARGET_OVERHEAD_SECONDS = 1.0

BARE_SQL = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
for row in con.execute(sys.argv[2]).fetchall():
    print(row)
"""
BARE_EXPORT = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
con.execute('''
    copy (
        select s.*, (select list(m order by m.message_index) from messages m where m.rollout_id = s.rollout_id)
            as messages
        from rollout_scores s where s.sweep_id = ? and s.outcome in ('passed', 'failed')
    ) to '%s' (format json)
''' % sys.argv[2].replace("'", "''"), [sys.argv[3]])
"""
BARE_REPORT = """
import sys
from pathlib import Path
from eval_pipelines.reports.build import build_report
build_report(Path(sys.argv[1]), Path(sys.argv[2]), sweep_id=sys.argv[3])
"""
BARE_REVERIFY = """
import sys
from pathlib import Path
from eval_pipelines.inputs.scenarios import ScenarioCatalog, partition_key
from eval_pipelines.pipeline.reverification import stored_partitions
from eval_pipelines.pipeline.steps import verify_partition
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.store import Warehouse
data = Path(sys.argv[1])
catalog = ScenarioCatalog()
warehouse = Warehouse(data / "warehouse")
for p in stored_partitions(warehouse, catalog, scenario_ids=[sys.argv[2]], sweep_id=None):
    verify_partition(warehouse, p.scenario, p.model_key, partition_key(p.scenario.scenario_id))
build_catalog(data / "warehouse", data / "eval.duckdb")
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh process and everything it waited for; fails loudly."""
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall, used = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{argv[:3]} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, used


def setup(root: Path, env: dict[str, str]) -> None:
    subprocess.run([str(CLI), "init", str(root)], check=True, env=env, capture_output=True)
    (root / "sweeps" / "quick.yaml").write_text(SWEEP_YAML, encoding="utf-8")
    done = subprocess.run(
        [str(CLI), "sweep", "--config", "sweeps/quick.yaml", "--sweep-id", SWEEP_ID, "--skip-assessment"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the setup sweep failed ({done.returncode}):\n{done.stderr[-3000:]}")


def commands(root: Path, scratch: Path) -> dict[str, tuple[list[str], list[str]]]:
    db = str(root / "data" / "eval.duckdb")
    python = sys.executable
    return {
        "sql": ([str(CLI), "sql", QUERY], [python, "-c", BARE_SQL, db, QUERY]),
        "export": (
            [str(CLI), "export", "--format", "jsonl", "--sweep", SWEEP_ID, "--out", str(scratch / "cli.jsonl")],
            [python, "-c", BARE_EXPORT, db, str(scratch / "bare.jsonl"), SWEEP_ID],
        ),
        "report": (
            [str(CLI), "report", "--sweep", SWEEP_ID, "--out", str(scratch / "cli" / "report.html")],
            [python, "-c", BARE_REPORT, db, str(scratch / "bare" / "report.html"), SWEEP_ID],
        ),
        "reverify": (
            [str(CLI), "reverify", "--all", "--scenario", SCENARIO_ID],
            [python, "-c", BARE_REVERIFY, str(root / "data"), SCENARIO_ID],
        ),
    }


def measure(root: Path, scratch: Path, env: dict[str, str], repeats: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, (command, bare) in commands(root, scratch).items():
        runs: dict[str, list[tuple[float, float]]] = {"command": [], "bare": []}
        for index in range(repeats):
            order = (("command", command), ("bare", bare)) if index % 2 == 0 else (("bare", bare), ("command", command))
            for side, argv in order:
                runs[side].append(timed(argv, root, env))
        row: dict[str, Any] = {}
        for side, samples in runs.items():
            row[f"{side}_wall_s"] = round(statistics.median(s[0] for s in samples), 3)
            row[f"{side}_cpu_s"] = round(statistics.median(s[1] for s in samples), 3)
        row["overhead_wall_s"] = round(row["command_wall_s"] - row["bare_wall_s"], 3)
        row["overhead_cpu_s"] = round(row["command_cpu_s"] - row["bare_cpu_s"], 3)
        row["under_target"] = row["overhead_wall_s"] < TARGET_OVERHEAD_SECONDS
        results[name] = row
        print(f"{name}: {row}", file=sys.stderr, flush=True)
    return results


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Quick commands at load {report['load_before']} -> {report['load_after']} ({report['cpus']} CPUs), "
        f"{report['rollouts']} rollouts, median of {report['repeats']}:",
        "",
        "| command | wall | CPU | bare wall | bare CPU | overhead wall | overhead CPU |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in report["commands"].items():
        lines.append(
            f"| `{name}` | {row['command_wall_s']:.2f} s | {row['command_cpu_s']:.2f} s | {row['bare_wall_s']:.2f} s "
            f"| {row['bare_cpu_s']:.2f} s | {row['overhead_wall_s']:.2f} s | {row['overhead_cpu_s']:.2f} s |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the temporary project (its path is printed)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="quick-commands-"))
    root, scratch = workdir / "project", workdir / "out"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_PIPELINES_", "DAGSTER_"))}
    try:
        setup(root, env)
        load_before = os.getloadavg()
        measured = measure(root, scratch, env, args.repeats)
        load_after = os.getloadavg()
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    report = {
        "benchmark": "quick_commands",
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "rollouts": 6,
        "repeats": args.repeats,
        "target_overhead_s": TARGET_OVERHEAD_SECONDS,
        "commands": measured,
    }
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "quick_commands.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (RESULTS_DIR / "quick_commands.md").write_text(markdown(report), encoding="utf-8")
    print(json.dumps(report, indent=2))
    print(markdown(report), file=sys.stderr)
    if args.keep:
        print(f"kept {workdir}", file=sys.stderr)
    return 0 if all(row["under_target"] for row in measured.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
