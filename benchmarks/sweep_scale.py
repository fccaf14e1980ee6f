"""A sweep of N rollouts (default 100,000) on one machine, through the real pipeline: is its cost linear?

    .venv/bin/python benchmarks/sweep_scale.py --rollouts 10000      # a cheap linearity check
    .venv/bin/python benchmarks/sweep_scale.py                       # 100,000 rollouts

What runs: `eval-pipelines sweep --skip-assessment` (Dagster, the embedded evaluation service, verification, the
catalog) in a fresh project directory, with its own `dagster.yaml` (the package's template), on the built-in
`email_ops:1.0.0` scenario's task `email_ops_011` (5 tool calls and a final answer), with simulated zero-latency
models (`sim://local`): sim-oracle and sim-noisy alternating, under names of their own (`sim-oracle-0`,
`sim-noisy-1`, ...). One run holds at most DEFAULT_MAX_ROLLOUTS_PER_RUN rollouts, so the sweep has
max(2, ceil(N / 10,000)) models x 1 scenario, N / models rollouts (epochs) each.

Measured, sampled from outside the sweep's processes:

- wall time of the sweep command, and rollouts/s in each 10% window of the rollouts (from the service's run store,
  polled once a second): a linear run keeps the same rate in its last window as in its first;
- peak RSS (VmHWM) of every process of the sweep's tree (the CLI, rollout workers, tool host, verifier workers);
- bytes on disk: run store, artifacts, Parquet warehouse, DuckDB catalog, Dagster storage;
- the Dagster partitions it registered (dynamic partition keys of `models` and `scenarios`, and their grid);
- afterwards, `dagster-webserver` on the sweep's instance: the HTTP GET of the `rollouts` asset page and the
  GraphQL queries that page makes (the asset's definition and partition health, its materialisations), 5 times each;
- the catalog's views through `eval-pipelines sql` (process start included): pass rates, pass@k, comparisons.

Results: JSON on stdout and `benchmarks/results/sweep_scale_<N>.{json,md}` (git-ignored). `--keep` keeps the
project directory (its path is in the report).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from benchmarks._common import REPO_ROOT, RESULTS_DIR, command_line, git_revision, load_average, machine, now_iso
from eval_pipelines.schemas.limits import DEFAULT_MAX_ROLLOUTS_PER_RUN

SCENARIO_ID = "email_ops:1.0.0"
TASK_ID = "email_ops_011"
SWEEP_ID = "scale"
DEFAULT_ROLLOUTS = 100_000
WINDOWS = 10
TERMINAL = ("completed", "failed", "workspace_error")
VENV_BIN = REPO_ROOT / ".venv" / "bin"
TEMPLATE_DIR = REPO_ROOT / "eval_pipelines" / "builtin" / "project"
QUERY_REPEATS = 5
SWEEP_COMMAND = (str(VENV_BIN / "eval-pipelines"), "sweep", "--config", "sweeps/scale.yaml")

#: The asset page's queries, as the UI's AssetView makes them for a multi-partitioned asset (trimmed to the fields
#: whose cost grows with partitions and materialisations).
ASSET_DEFINITION_QUERY = """
query AssetViewDefinition($assetKey: AssetKeyInput!) {
  assetOrError(assetKey: $assetKey) {
    ... on Asset {
      id
      definition { id description opNames groupName partitionDefinition { description type } }
    }
  }
}
"""
PARTITION_HEALTH_QUERY = """
query PartitionHealth($assetKey: AssetKeyInput!) {
  assetNodeOrError(assetKey: $assetKey) {
    ... on AssetNode {
      id
      partitionKeysByDimension { name type partitionKeys }
      assetPartitionStatuses {
        ... on DefaultPartitionStatuses {
          materializedPartitions failedPartitions unmaterializedPartitions materializingPartitions
        }
        ... on MultiPartitionStatuses {
          primaryDimensionName
          ranges {
            primaryDimStartKey primaryDimEndKey
            secondaryDim {
              ... on DefaultPartitionStatuses {
                materializedPartitions failedPartitions unmaterializedPartitions materializingPartitions
              }
            }
          }
        }
      }
    }
  }
}
"""
MATERIALIZATIONS_QUERY = """
query AssetEvents($assetKey: AssetKeyInput!) {
  assetOrError(assetKey: $assetKey) {
    ... on Asset {
      id
      assetMaterializations(limit: 100) { runId partition timestamp metadataEntries { label } }
    }
  }
}
"""
CATALOG_QUERIES = {
    "pass_rates": "select * from pass_rates",
    "model_pass_at_k": "select * from model_pass_at_k",
    "model_comparison": "select * from model_comparison",
}


@dataclass
class Sampler:
    """Polls the run store for finished rollouts and /proc for the sweep's process tree, once a second."""

    root_pid: int
    store: Path
    interval: float = 1.0
    progress: list[tuple[float, int]] = field(default_factory=list)
    #: The sweep CLI's resident set (MiB) at each progress sample: memory that grows with rollouts shows here.
    root_rss: list[float] = field(default_factory=list)
    peaks: dict[int, tuple[str, float]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            self._sample_processes()
            self._sample_progress()
            self.stop.wait(self.interval)

    def _sample_progress(self) -> None:
        if not self.store.exists():
            return
        try:
            with sqlite3.connect(f"file:{self.store}?mode=ro", uri=True, timeout=1.0) as db:
                marks = ",".join("?" * len(TERMINAL))
                (done,) = db.execute(f"select count(*) from rollouts where status in ({marks})", TERMINAL).fetchone()
        except sqlite3.Error:
            return
        self.progress.append((time.monotonic(), int(done)))
        self.root_rss.append(_rss_mib(self.root_pid))

    def _sample_processes(self) -> None:
        for pid in _descendants(self.root_pid) | {self.root_pid}:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            hwm = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
            self.peaks[pid] = (_role(cmdline), round(hwm / 1024, 1))


def _rss_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return next(
        (round(int(line.split()[1]) / 1024, 1) for line in status.splitlines() if line.startswith("VmRSS:")), 0.0
    )


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[-1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    frontier = [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def _role(cmdline: str) -> str:
    for marker, role in (
        ("eval-pipelines", "sweep CLI (Dagster, embedded service)"),
        ("watch_orphans", "Dagster orphan watcher"),
        ("tail -F", "Dagster compute-log tail"),
        ("worker_main", "rollout worker"),
        ("toolservers", "tool host"),
        ("verifiers", "verifier worker"),
        ("sim", "simulated-model endpoint"),
    ):
        if marker in cmdline:
            return role
    return cmdline[:80]


def write_project(project: Path, rollouts: int, max_parallel: int) -> tuple[int, int]:
    """The sweep config and dagster.yaml of a fresh project directory; returns (models, rollouts per model)."""
    models = max(2, math.ceil(rollouts / DEFAULT_MAX_ROLLOUTS_PER_RUN))
    per_model = math.ceil(rollouts / models)
    (project / "sweeps").mkdir(parents=True)
    shutil.copy(TEMPLATE_DIR / "dagster.yaml", project / "dagster.yaml")
    shutil.copy(TEMPLATE_DIR / "workspace.yaml", project / "workspace.yaml")
    model_lines = []
    for index in range(models):
        kind = "sim-oracle" if index % 2 == 0 else "sim-noisy"
        model_lines += [f"  - name: {kind}-{index}", f"    model: {kind}", "    base_url: sim://local"]
    (project / "sweeps" / "scale.yaml").write_text(
        "\n".join(
            [
                "name: scale",
                f'scenarios: ["{SCENARIO_ID}"]',
                f"task_ids: [{TASK_ID}]",
                "models:",
                *model_lines,
                f"rollout_count: {per_model}",
                f"max_parallel: {max_parallel}",
                "rollout_timeout_seconds: 120",
                "error_threshold: 1.0",
                "",
            ]
        ),
        encoding="utf-8",
    )
    return models, per_model


def project_env(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_PIPELINES_", "DAGSTER_"))}
    env["EVAL_PIPELINES_PROJECT_DIR"] = str(project)
    env["DAGSTER_HOME"] = str(project)
    return env


def windows(progress: list[tuple[float, int]], rss: list[float], total: int, start: float) -> list[dict[str, Any]]:
    """Rollouts/s in each tenth of the rollouts, from the first sample at or past each tenth's end, and the sweep
    CLI's resident set then."""
    rows = []
    previous_time, previous_done = start, 0
    for index in range(1, WINDOWS + 1):
        target = math.ceil(total * index / WINDOWS)
        at = next((i for i, (_, d) in enumerate(progress) if d >= target), None)
        if at is None:
            break
        reached = progress[at]
        elapsed = reached[0] - previous_time
        rows.append(
            {
                "window": f"{(index - 1) * 10}-{index * 10}%",
                "rollouts": reached[1] - previous_done,
                "seconds": round(elapsed, 1),
                "rollouts_per_s": round((reached[1] - previous_done) / elapsed, 1) if elapsed > 0 else None,
                "cli_rss_mib": rss[at],
            }
        )
        previous_time, previous_done = reached
    return rows


def disk_bytes(data: Path) -> dict[str, int]:
    def size(path: Path) -> int:
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0

    service = data / "service"
    store = sum(size(p) for p in service.glob("runs.sqlite3*"))
    return {
        "run_store": store,
        "artifacts": size(service / "artifacts") + size(data / "artifacts"),
        "parquet": size(data / "warehouse"),
        "duckdb": sum(size(p) for p in data.glob("eval.duckdb*")),
        "dagster": size(data / "dagster"),
        "total": size(data),
    }


PARTITION_COUNT_SCRIPT = """
import json, dagster as dg
instance = dg.DagsterInstance.get()
models = instance.get_dynamic_partitions("models")
scenarios = instance.get_dynamic_partitions("scenarios")
print(json.dumps({"models": len(models), "scenarios": len(scenarios), "grid": len(models) * len(scenarios)}))
"""


def partition_count(project: Path) -> dict[str, int]:
    out = subprocess.run(
        [str(VENV_BIN / "python"), "-c", PARTITION_COUNT_SCRIPT],
        env=project_env(project),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def webserver_timings(project: Path) -> dict[str, Any]:
    """Starts dagster-webserver on the sweep's instance and times the asset page and its queries."""
    port = free_port()
    log = (project / "webserver.log").open("wb")
    started = time.perf_counter()
    server = subprocess.Popen(
        [str(VENV_BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        env=project_env(project),
        cwd=project,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=600.0) as client:
            deadline = time.monotonic() + 300
            while True:
                try:
                    if client.get("/server_info").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"dagster-webserver did not start; see {project / 'webserver.log'}")
                time.sleep(0.5)
            result: dict[str, Any] = {"start_s": round(time.perf_counter() - started, 2)}
            variables = {"assetKey": {"path": ["rollouts"]}}

            def graphql(query: str) -> None:
                response = client.post("/graphql", json={"query": query, "variables": variables})
                response.raise_for_status()
                body = response.json()
                if body.get("errors"):
                    raise RuntimeError(f"GraphQL errors: {body['errors']}")

            timed = {
                "asset_page_get": lambda: client.get("/assets/rollouts").raise_for_status(),
                "asset_definition_query": lambda: graphql(ASSET_DEFINITION_QUERY),
                "partition_health_query": lambda: graphql(PARTITION_HEALTH_QUERY),
                "materializations_query": lambda: graphql(MATERIALIZATIONS_QUERY),
            }
            for name, call in timed.items():
                samples = [_timed(call) for _ in range(QUERY_REPEATS)]
                result[name] = {
                    "first_s": round(samples[0], 3),
                    "median_s": round(sorted(samples)[len(samples) // 2], 3),
                }
            return result
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def catalog_timings(project: Path) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, query in CATALOG_QUERIES.items():
        started = time.perf_counter()
        out = subprocess.run(
            [str(VENV_BIN / "eval-pipelines"), "sql", query, "--format", "json"],
            env=project_env(project),
            cwd=project,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        elapsed = time.perf_counter() - started
        result[name] = {"seconds": round(elapsed, 3), "exit": out.returncode, "bytes": len(out.stdout)}
        if out.returncode != 0:
            result[name]["stderr"] = out.stderr[-500:]
    return result


def run_sweep(project: Path, total: int) -> dict[str, Any]:
    log = (project / "sweep.log").open("wb")
    started = time.monotonic()
    process = subprocess.Popen(
        [*SWEEP_COMMAND, "--sweep-id", SWEEP_ID, "--skip-assessment"],
        env=project_env(project),
        cwd=project,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    sampler = Sampler(process.pid, project / "data" / "service" / "runs.sqlite3")
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    code = process.wait()
    wall = time.monotonic() - started
    sampler.stop.set()
    thread.join()
    log.close()
    rollouts_done = next((t for t, d in sampler.progress if d >= total), None)
    by_role: dict[str, dict[str, Any]] = {}
    for role, mib in sampler.peaks.values():
        entry = by_role.setdefault(role, {"processes": 0, "max_peak_rss_mib": 0.0})
        entry["processes"] += 1
        entry["max_peak_rss_mib"] = max(entry["max_peak_rss_mib"], mib)
    return {
        "exit": code,
        "wall_s": round(wall, 1),
        "rollouts_finished": sampler.progress[-1][1] if sampler.progress else 0,
        "rollout_phase_s": round(rollouts_done - started, 1) if rollouts_done else None,
        "rollouts_per_s_overall": round(total / wall, 1),
        "windows": windows(sampler.progress, sampler.root_rss, total, started),
        "peak_rss_by_role": by_role,
        "sweep_log_tail": (project / "sweep.log").read_text(errors="replace")[-1500:],
    }


def markdown(report: dict[str, Any]) -> str:
    sweep = report["sweep"]
    lines = [
        f"# Sweep of {report['rollouts']:,} rollouts ({report['models']} models x 1 scenario x "
        f"{report['rollouts_per_model']:,})",
        "",
        f"`{report['command']}` at `{report['revision']}`, load {report['load_before']} -> {report['load_after']}",
        "",
        f"- wall {sweep['wall_s']} s (exit {sweep['exit']}), {sweep['rollouts_per_s_overall']} rollouts/s overall; "
        f"the last rollout finished at {sweep['rollout_phase_s']} s",
        "",
        "| window | rollouts | s | rollouts/s | sweep CLI RSS MiB |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {w['window']} | {w['rollouts']} | {w['seconds']} | {w['rollouts_per_s']} | {w['cli_rss_mib']} |"
        for w in sweep["windows"]
    ]
    lines += ["", "| process | count | peak RSS MiB |", "|---|---|---|"]
    lines += [
        f"| {role} | {v['processes']} | {v['max_peak_rss_mib']} |" for role, v in sweep["peak_rss_by_role"].items()
    ]
    lines += ["", f"disk bytes: {json.dumps(report['disk_bytes'])}", f"partitions: {json.dumps(report['partitions'])}"]
    lines += [f"webserver: {json.dumps(report.get('webserver'))}", f"catalog: {json.dumps(report.get('catalog'))}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=DEFAULT_ROLLOUTS)
    parser.add_argument("--max-parallel", type=int, default=16)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--keep", action="store_true", help="keep the project directory")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    project = Path(tempfile.mkdtemp(prefix="sweep_scale_", dir=args.workdir))
    models, per_model = write_project(project, args.rollouts, args.max_parallel)
    total = models * per_model
    report: dict[str, Any] = {
        "benchmark": "sweep_scale",
        "started": now_iso(),
        "command": command_line(),
        "revision": git_revision(),
        "machine": machine(),
        "project": str(project),
        "rollouts": total,
        "models": models,
        "rollouts_per_model": per_model,
        "load_before": load_average(),
    }
    try:
        report["sweep"] = run_sweep(project, total)
        report["load_after"] = load_average()
        report["disk_bytes"] = disk_bytes(project / "data")
        report["bytes_per_rollout"] = round(report["disk_bytes"]["total"] / total)
        report["partitions"] = partition_count(project)
        report["catalog"] = catalog_timings(project)
        report["webserver"] = webserver_timings(project)
        report["load_end"] = load_average()
    finally:
        args.out.mkdir(parents=True, exist_ok=True)
        name = f"sweep_scale_{total}"
        (args.out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        if "sweep" in report and "partitions" in report:
            (args.out / f"{name}.md").write_text(markdown(report) + "\n", encoding="utf-8")
            print(markdown(report))
        if not args.keep:
            shutil.rmtree(project, ignore_errors=True)
    return 0 if report["sweep"]["exit"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
