"""Many small runs on the evaluation service, an earlier commit's code against the current code, alternated.

SimLab users launch a run per task, so the service's everyday load is many one-rollout runs. This runs the same
load against two builds of the service on this machine in one go, alternating them (baseline, current, current,
baseline, ...) so that drift of the machine falls on both sides alike:

- the baseline is a commit's tree (`git archive`, unpacked in a temporary directory and compiled to bytecode);
  the current side is this checkout's working tree;
- each side's service runs in a process of its own with the same interpreter (`.venv`), PYTHONPATH pointing at
  its tree, a fresh data directory, on loopback;
- N clients (asyncio + httpx, in this process) mix for a fixed time, as `benchmarks/load.py` does without the
  assessment platform: launches of one-rollout runs (1 task x rollout_count 1, the simulated `sim-oracle`),
  GETs of runs, a run, its rollouts, a rollout and the scenarios; then every launched run is awaited.

Reported per side and repetition: requests/s, launch (POST /runs) p50/p99, 503s (the service's documented
overload answer, after which a client waits Retry-After), 5xx and transport errors, lost rollouts, the CPU of
the service's whole process tree (its workers, verifier workers and tool host included) per launched run, from
the start of the load until every launched run finished, and the load average (1 min) before, during (mean of
samples) and after. The summary gives each side's median over its repetitions.

    .venv/bin/python benchmarks/service_small_runs.py --baseline 1c85c20 --clients 50 --seconds 45 --repetitions 3

Writes benchmarks/results/service_small_runs.{json,md}. Exits 1 if a side lost a rollout or got a 5xx
(other than a 503 with Retry-After) or a transport error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO_ROOT, RESULTS_DIR, command_line, machine, now_iso, write_report

#: The last commit before the trust (contained verifiers, error classes) and performance work began.
DEFAULT_BASELINE = "1c85c20"
SCENARIO = "email_ops:1.0.0"
SIM_ORACLE = {"model": "sim-oracle", "base_url": "sim://local", "api_key": "x"}
REQUEST_TIMEOUT = 30.0
#: Per client, roughly one request in this many is a launch (as in load.py); the rest are polls.
LAUNCH_EVERY = 8
TERMINAL = frozenset({"completed", "failed", "workspace_error"})
API_KEY_HEADER = "API-Key"
KEY_VARIABLE = "SMALL_RUNS_SERVICE_KEY"
LOAD_SAMPLE_SECONDS = 2.0

#: Run in the side's own process, with PYTHONPATH at its tree: serves its service until stdin closes. Only names
#: both the baseline's and the current code have (load.py used them at the baseline too).
SERVE = f"""
import json, os, sys
from pathlib import Path
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.service.api import create_app
from eval_pipelines.service.auth import ApiKeyRegistry, Permission
from eval_pipelines.service.settings import ServiceSettings

settings = ServiceSettings(
    data_dir=Path(sys.argv[1]), api_keys=ApiKeyRegistry({{os.environ.pop("{KEY_VARIABLE}"): Permission.WRITE}})
)
with BackgroundServer(create_app(settings)) as server:
    print(json.dumps({{"url": server.url}}), flush=True)
    sys.stdin.read()
"""


@dataclass
class Side:
    name: str
    tree: Path
    revision: str


@dataclass
class Tally:
    requests: int = 0
    launches: list[float] = field(default_factory=list)
    unavailable: int = 0
    server_errors: Counter[str] = field(default_factory=Counter)
    transport_errors: Counter[str] = field(default_factory=Counter)
    launched: dict[str, str] = field(default_factory=dict)  # rollout_id -> run_id


# --- the sides ---------------------------------------------------------------------------------------------------


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.strip()


def unpack_commit(commit: str, into: Path) -> Side:
    """The commit's tree, unpacked under `into` and compiled, as an installed package would be."""
    revision = _git("rev-parse", "--short", commit)
    tree = into / f"tree-{revision}"
    archive = into / "tree.tar"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), revision], cwd=REPO_ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    _compile(tree)
    return Side(f"baseline {revision}", tree, revision)


def _compile(tree: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "1", str(tree / "eval_pipelines")],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def current_side() -> Side:
    _compile(REPO_ROOT)
    dirty = _git("status", "--porcelain", "--untracked-files=no", "eval_pipelines")
    head = _git("rev-parse", "--short", "HEAD")
    return Side("current", REPO_ROOT, f"{head}+dirty" if dirty else head)


class Service:
    """One side's service in a process of its own, on a fresh data directory."""

    def __init__(self, side: Side, workdir: Path) -> None:
        self.key = "bench-" + secrets.token_hex(16)
        data_dir = workdir / "data"
        env = {name: value for name, value in os.environ.items() if not name.startswith("EVAL_")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(
            PYTHONPATH=str(side.tree),
            EVAL_PIPELINES_DATA_DIR=str(data_dir),
            EVAL_PIPELINES_PROJECT_DIR=str(workdir),
            **{KEY_VARIABLE: self.key},
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(data_dir / "service")],
            cwd=workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {side.name} service did not start (exit {self.process.wait()})")
        self.url: str = json.loads(line)["url"]

    def tree_cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.process.pid)

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def tree_cpu_seconds(root: int) -> float:
    """CPU (user + system) of `root` and every process under it, alive or reaped: each live process's own time
    plus its waited-for children's (Linux /proc)."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:  # exited meanwhile
            continue
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, frontier = 0, [root]
    while frontier:
        pid = frontier.pop()
        total += ticks.get(pid, 0)
        frontier.extend(children.get(pid, []))
    return total / os.sysconf("SC_CLK_TCK")


# --- the load ----------------------------------------------------------------------------------------------------


async def _request(client: httpx.AsyncClient, tally: Tally, label: str, method: str, url: str, **kwargs: Any) -> Any:
    started = time.perf_counter()
    try:
        response = await client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        tally.requests += 1
        tally.transport_errors[f"{label}: {type(exc).__name__}"] += 1
        return None
    tally.requests += 1
    if response.status_code == 503:
        tally.unavailable += 1
    elif response.status_code >= 500:
        tally.server_errors[f"{label} {response.status_code}"] += 1
    elif label == "POST /runs" and response.status_code == 200:
        tally.launches.append(time.perf_counter() - started)
    return response


async def _client(index: int, url: str, key: str, task_ids: list[str], deadline: float, tally: Tally) -> None:
    rng = random.Random(index)
    headers = {API_KEY_HEADER: key}
    my_runs: list[str] = []
    my_rollouts: list[str] = []
    launch_after = 0.0
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT, headers=headers) as client:
        while time.monotonic() < deadline:
            roll = rng.randrange(LAUNCH_EVERY + 3)
            if roll == 0 and time.monotonic() >= launch_after:
                body = {"scenario_id": SCENARIO, "task_ids": [rng.choice(task_ids)], "rollout_count": 1,
                        "model_config": SIM_ORACLE}  # fmt: skip
                response = await _request(client, tally, "POST /runs", "POST", f"{url}/runs", json=body)
                if response is not None and response.status_code == 200:
                    launched = response.json()
                    my_runs.append(launched["run_id"])
                    for rollout in launched["rollouts"]:
                        tally.launched[rollout["rollout_id"]] = launched["run_id"]
                        my_rollouts.append(rollout["rollout_id"])
                elif response is not None and response.status_code == 503:
                    launch_after = time.monotonic() + float(response.headers.get("retry-after", "1"))
            elif roll <= 3:
                await _request(client, tally, "GET /runs", "GET", f"{url}/runs?limit=20")
            elif roll <= 5 and my_runs:
                await _request(client, tally, "GET /runs/{id}", "GET", f"{url}/runs/{rng.choice(my_runs)}")
            elif roll <= 7 and my_runs:
                await _request(client, tally, "GET /rollouts", "GET", f"{url}/rollouts?run_id={rng.choice(my_runs)}")
            elif roll <= 8 and my_rollouts:
                await _request(client, tally, "GET /rollouts/{id}", "GET", f"{url}/rollouts/{rng.choice(my_rollouts)}")
            else:
                await _request(client, tally, "GET /scenarios", "GET", f"{url}/scenarios")


async def _settle(url: str, key: str, tally: Tally, timeout: float) -> tuple[int, Counter[str]]:
    """Wait until every launched rollout is terminal; the number that never got there, and the outcomes."""
    expected: dict[str, set[str]] = {}
    for rollout_id, run_id in tally.launched.items():
        expected.setdefault(run_id, set()).add(rollout_id)
    seen: dict[str, str] = {}
    pending = set(expected)
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT, headers={API_KEY_HEADER: key}) as client:
        while pending and time.monotonic() < deadline:
            for run_id in sorted(pending):
                response = await client.get(f"{url}/rollouts", params={"run_id": run_id})
                if response.status_code != 200:
                    continue
                statuses = {r["rollout_id"]: r["status"] for r in response.json()["rollouts"]}
                seen.update(statuses)
                if expected[run_id] <= statuses.keys() and all(statuses[r] in TERMINAL for r in expected[run_id]):
                    pending.discard(run_id)
            if pending:
                await asyncio.sleep(0.5)
    lost = sum(1 for r in tally.launched if seen.get(r) not in TERMINAL)
    return lost, Counter(seen[r] for r in tally.launched if r in seen)


async def _sample_load(samples: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(os.getloadavg()[0])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), LOAD_SAMPLE_SECONDS)


def _ms(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0] * 1000, 1)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(fraction * 100) - 1] * 1000, 1)


async def _measure(service: Service, clients: int, seconds: float, settle_seconds: float) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT, headers={API_KEY_HEADER: service.key}) as client:
        tasks = await client.get(f"{service.url}/scenarios/{SCENARIO}/tasks")
        tasks.raise_for_status()
    task_ids = [task["task_id"] for task in tasks.json()["tasks"]]
    tally = Tally()
    samples: list[float] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample_load(samples, stop))
    load_before = os.getloadavg()[0]
    cpu_before = service.tree_cpu_seconds()
    started = time.monotonic()
    await asyncio.gather(
        *(_client(i, service.url, service.key, task_ids, started + seconds, tally) for i in range(clients))
    )
    elapsed = time.monotonic() - started
    lost, outcomes = await _settle(service.url, service.key, tally, settle_seconds)
    settled = time.monotonic() - started
    cpu = service.tree_cpu_seconds() - cpu_before
    stop.set()
    await sampler
    runs = len(set(tally.launched.values()))
    return {
        "elapsed_seconds": round(elapsed, 1),
        "settled_after_seconds": round(settled, 1),
        "requests": tally.requests,
        "requests_per_second": round(tally.requests / elapsed, 1),
        "launched_runs": runs,
        "launch_p50_ms": _ms(tally.launches, 0.50),
        "launch_p99_ms": _ms(tally.launches, 0.99),
        "unavailable_503": tally.unavailable,
        "server_errors_5xx": sum(tally.server_errors.values()),
        "server_errors_by_endpoint": dict(tally.server_errors),
        "transport_errors": sum(tally.transport_errors.values()),
        "transport_errors_by_endpoint": dict(tally.transport_errors),
        "lost_rollouts": lost,
        "rollout_outcomes": dict(sorted(outcomes.items())),
        "service_cpu_seconds": round(cpu, 2),
        "cpu_ms_per_launched_run": round(cpu * 1000 / runs, 1) if runs else None,
        "load_average_1m": {
            "before": round(load_before, 2),
            "during_mean": round(statistics.fmean(samples), 2) if samples else None,
            "after": round(os.getloadavg()[0], 2),
        },
    }


def measure_side(side: Side, clients: int, seconds: float, settle_seconds: float) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="ep-small-runs-"))
    service = Service(side, workdir)
    try:
        return asyncio.run(_measure(service, clients, seconds, settle_seconds))
    finally:
        service.stop()
        shutil.rmtree(workdir, ignore_errors=True)


# --- the report --------------------------------------------------------------------------------------------------

SUMMARISED = ("requests_per_second", "launch_p50_ms", "launch_p99_ms", "cpu_ms_per_launched_run")


def summary(rounds: list[dict[str, Any]], sides: list[Side]) -> dict[str, Any]:
    """Each side's median of every summarised figure over its repetitions, and its worst p99."""
    result: dict[str, Any] = {}
    for side in sides:
        mine = [r["figures"] for r in rounds if r["side"] == side.name]
        row: dict[str, Any] = {"revision": side.revision, "repetitions": len(mine)}
        for name in SUMMARISED:
            values = [m[name] for m in mine if m[name] is not None]
            row[f"median_{name}"] = round(statistics.median(values), 1) if values else None
        row["worst_launch_p99_ms"] = max((m["launch_p99_ms"] or 0.0) for m in mine)
        row["mean_load_average_during"] = round(
            statistics.fmean(m["load_average_1m"]["during_mean"] or 0.0 for m in mine), 2
        )
        result[side.name] = row
    return result


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Small runs: {report['clients']} clients for {report['seconds']} s, baseline against current",
        "",
        f"`{report['command']}` ({report['when']}, {report['machine']['cpus']} CPUs)",
        "",
        "| round | side | revision | req/s | launch p50 ms | launch p99 ms | 503 | runs | CPU ms/run | load avg "
        "before / during / after | lost | 5xx | transport |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for index, entry in enumerate(report["rounds"], start=1):
        f = entry["figures"]
        load = f["load_average_1m"]
        lines.append(
            f"| {index} | {entry['side']} | {entry['revision']} | {f['requests_per_second']} | {f['launch_p50_ms']} "
            f"| {f['launch_p99_ms']} | {f['unavailable_503']} | {f['launched_runs']} | {f['cpu_ms_per_launched_run']} "
            f"| {load['before']} / {load['during_mean']} / {load['after']} | {f['lost_rollouts']} "
            f"| {f['server_errors_5xx']} | {f['transport_errors']} |"
        )
    lines += ["", "| side | revision | median req/s | median launch p50 ms | median launch p99 ms | worst p99 ms "
              "| median CPU ms/run | mean load avg during |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, row in report["summary"].items():
        lines.append(
            f"| {name} | {row['revision']} | {row['median_requests_per_second']} | {row['median_launch_p50_ms']} "
            f"| {row['median_launch_p99_ms']} | {row['worst_launch_p99_ms']} | {row['median_cpu_ms_per_launched_run']} "
            f"| {row['mean_load_average_during']} |"
        )
    lines += ["", f"passed: {report['passed']}"]
    return "\n".join(lines)


def run(
    baseline: str, clients: int, seconds: float, settle_seconds: float, repetitions: int, only_current: bool
) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="ep-small-runs-trees-"))
    try:
        current = current_side()
        sides = [current] if only_current else [unpack_commit(baseline, scratch), current]
        rounds: list[dict[str, Any]] = []
        for repetition in range(repetitions):
            # Alternate which side goes first, so neither always runs on the machine the other just warmed.
            for side in sides if repetition % 2 == 0 else list(reversed(sides)):
                print(f"repetition {repetition + 1}: {side.name} ({side.revision})", file=sys.stderr, flush=True)
                figures = measure_side(side, clients, seconds, settle_seconds)
                print(json.dumps(figures), file=sys.stderr, flush=True)
                rounds.append({"side": side.name, "revision": side.revision, "figures": figures})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    passed = all(
        r["figures"]["lost_rollouts"] == 0
        and r["figures"]["server_errors_5xx"] == 0
        and r["figures"]["transport_errors"] == 0
        for r in rounds
    )
    return {
        "benchmark": "service_small_runs",
        "when": now_iso(),
        "command": command_line(),
        "machine": machine(),
        "clients": clients,
        "seconds": seconds,
        "repetitions": repetitions,
        "passed": passed,
        "summary": summary(rounds, sides),
        "rounds": rounds,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help=f"the earlier commit (default {DEFAULT_BASELINE})")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    parser.add_argument("--seconds", type=float, default=45.0, help="duration of each side's load (default 45)")
    parser.add_argument("--repetitions", type=int, default=3, help="rounds of each side (default 3)")
    parser.add_argument("--settle-seconds", type=float, default=180.0, help="how long launched runs may take")
    parser.add_argument("--only-current", action="store_true", help="measure the current code alone (profiling)")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="results directory ('' writes no files)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.clients < 1 or args.seconds <= 0 or args.settle_seconds <= 0 or args.repetitions < 1:
        parser.error("--clients and --repetitions must be at least 1, --seconds and --settle-seconds positive")
    report = run(args.baseline, args.clients, args.seconds, args.settle_seconds, args.repetitions, args.only_current)
    write_report("service_small_runs", report, markdown(report), Path(args.out) if args.out else None)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
