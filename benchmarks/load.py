"""Bounded load on both local services, on loopback only, stopping by itself.

N concurrent clients (asyncio + httpx), for a fixed duration, each mixing: launches of small runs on the
evaluation service (1 task x rollout_count 1 on the simulated `sim-oracle` model), GETs of its runs, rollouts
and scenarios, and GETs / a cheap judging call on the assessment platform. Afterwards every launched run is
awaited, and a rollout that was launched but is missing or not terminal counts as lost.

A 503 with Retry-After is the evaluation service's documented answer to too many active runs: it is counted
on its own line, and the client that got it waits Retry-After before launching again (it keeps polling).

    .venv/bin/python benchmarks/load.py --clients 50 --seconds 60

Writes benchmarks/results/load.{json,md}; exits 1 if any request got a 5xx (other than a 503 with
Retry-After), failed at the transport level, or any rollout was lost.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import RESULTS_DIR, command_line, machine, now_iso, write_report
from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.platform import PlatformSettings, TokenRegistry, create_platform_app
from eval_pipelines.schemas.runs import TERMINAL_STATUSES
from eval_pipelines.service.api import create_app
from eval_pipelines.service.auth import API_KEY_HEADER, ApiKeyRegistry, Permission
from eval_pipelines.service.settings import ServiceSettings

SCENARIO = "email_ops:1.0.0"
SIM_ORACLE = {"model": "sim-oracle", "base_url": "sim://local", "api_key": "x"}
REQUEST_TIMEOUT = 30.0
#: Per client, roughly one request in this many is a launch; the rest are polls.
LAUNCH_EVERY = 8
TERMINAL = frozenset(status.value for status in TERMINAL_STATUSES)
CONVERSATION = {
    "conversation_prefix": [{"role": "user", "content": "Please send the report to Bob."}],
    "response": {"role": "assistant", "content": "I have sent the report to Bob by email."},
}


@dataclass
class Tally:
    requests: int = 0
    server_errors: Counter[str] = field(default_factory=Counter)
    transport_errors: Counter[str] = field(default_factory=Counter)
    unavailable: int = 0
    unavailable_without_retry_after: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    get_latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    launched: dict[str, str] = field(default_factory=dict)  # rollout_id -> run_id

    def record(self, label: str, method: str, response: httpx.Response | None, seconds: float, error: str = "") -> None:
        self.requests += 1
        if response is None:
            self.transport_errors[f"{label}: {error}"] += 1
            return
        self.statuses[response.status_code] += 1
        if response.status_code == 503:
            self.unavailable += 1
            if "retry-after" not in response.headers:
                self.unavailable_without_retry_after += 1
        elif response.status_code >= 500:
            self.server_errors[f"{label} {response.status_code}"] += 1
        if method == "GET":
            self.get_latencies[label].append(seconds)


@dataclass
class Target:
    eval_url: str
    eval_key: str
    platform_url: str
    platform_token: str
    space_id: str
    judge_id: str
    task_ids: list[str]


async def _request(
    client: httpx.AsyncClient, tally: Tally, label: str, method: str, url: str, **kwargs: Any
) -> httpx.Response | None:
    started = time.perf_counter()
    try:
        response = await client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        tally.record(label, method, None, time.perf_counter() - started, type(exc).__name__)
        return None
    tally.record(label, method, response, time.perf_counter() - started)
    return response


async def _client(index: int, target: Target, deadline: float, tally: Tally) -> None:
    rng = random.Random(index)
    eval_headers = {API_KEY_HEADER: target.eval_key}
    platform_headers = {"Authorization": f"Bearer {target.platform_token}"}
    my_runs: list[str] = []
    my_rollouts: list[str] = []
    launch_after = 0.0
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT) as client:
        while time.monotonic() < deadline:
            roll = rng.randrange(LAUNCH_EVERY + 6)
            if roll == 0 and time.monotonic() >= launch_after:
                body = {
                    "scenario_id": SCENARIO,
                    "task_ids": [rng.choice(target.task_ids)],
                    "rollout_count": 1,
                    "model_config": SIM_ORACLE,
                }
                response = await _request(
                    client, tally, "POST /runs", "POST", f"{target.eval_url}/runs", json=body, headers=eval_headers
                )
                if response is not None and response.status_code == 200:
                    launched = response.json()
                    my_runs.append(launched["run_id"])
                    for rollout in launched["rollouts"]:
                        tally.launched[rollout["rollout_id"]] = launched["run_id"]
                        my_rollouts.append(rollout["rollout_id"])
                elif response is not None and response.status_code == 503:
                    launch_after = time.monotonic() + float(response.headers.get("retry-after", "1"))
            elif roll <= 3:
                await _request(
                    client, tally, "GET /runs", "GET", f"{target.eval_url}/runs?limit=20", headers=eval_headers
                )
            elif roll <= 5 and my_runs:
                run_id = rng.choice(my_runs)
                await _request(
                    client, tally, "GET /runs/{id}", "GET", f"{target.eval_url}/runs/{run_id}", headers=eval_headers
                )
            elif roll <= 7 and my_runs:
                run_id = rng.choice(my_runs)
                url = f"{target.eval_url}/rollouts?run_id={run_id}"
                await _request(client, tally, "GET /rollouts?run_id", "GET", url, headers=eval_headers)
            elif roll <= 8 and my_rollouts:
                url = f"{target.eval_url}/rollouts/{rng.choice(my_rollouts)}"
                await _request(client, tally, "GET /rollouts/{id}", "GET", url, headers=eval_headers)
            elif roll <= 10:
                await _request(
                    client, tally, "GET /scenarios", "GET", f"{target.eval_url}/scenarios", headers=eval_headers
                )
            elif roll <= 12:
                await _request(client, tally, "GET platform /health", "GET", f"{target.platform_url}/health")
            else:
                body = {**CONVERSATION, "space_id": target.space_id, "judge_id": target.judge_id}
                url = f"{target.platform_url}/api/v1/judge/conversation"
                await _request(client, tally, "POST platform judge", "POST", url, json=body, headers=platform_headers)


async def _settle(target: Target, tally: Tally, timeout: float) -> dict[str, Any]:
    """Wait for every launched rollout to reach a terminal status; count the ones that never do."""
    headers = {API_KEY_HEADER: target.eval_key}
    run_ids = sorted(set(tally.launched.values()))
    expected: dict[str, set[str]] = defaultdict(set)
    for rollout_id, run_id in tally.launched.items():
        expected[run_id].add(rollout_id)
    seen: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT) as client:
        pending = set(run_ids)
        while pending and time.monotonic() < deadline:
            for run_id in sorted(pending):
                response = await client.get(f"{target.eval_url}/rollouts", params={"run_id": run_id}, headers=headers)
                if response.status_code != 200:
                    continue
                statuses = {r["rollout_id"]: r["status"] for r in response.json()["rollouts"]}
                seen.update(statuses)
                if expected[run_id] <= statuses.keys() and all(statuses[r] in TERMINAL for r in expected[run_id]):
                    pending.discard(run_id)
            if pending:
                await asyncio.sleep(0.5)
    missing = [r for r in tally.launched if r not in seen]
    unfinished = [r for r in tally.launched if r in seen and seen[r] not in TERMINAL]
    outcomes = Counter(seen[r] for r in tally.launched if r in seen)
    return {
        "launched_runs": len(run_ids),
        "launched_rollouts": len(tally.launched),
        "lost_rollouts": len(missing) + len(unfinished),
        "missing_rollouts": len(missing),
        "unfinished_rollouts": len(unfinished),
        "rollout_outcomes": dict(sorted(outcomes.items())),
    }


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0] * 1000, 1)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(fraction * 100) - 1] * 1000, 1)


def _latency(values: list[float]) -> dict[str, Any]:
    return {"count": len(values), "p50_ms": _percentile(values, 0.50), "p99_ms": _percentile(values, 0.99)}


@contextmanager
def _services(workdir: Path) -> Iterator[Target]:
    eval_key = "load-" + secrets.token_hex(16)
    platform_token = "load-" + secrets.token_hex(16)
    space_id = str(uuid.uuid4())
    eval_settings = ServiceSettings(data_dir=workdir / "eval", api_keys=ApiKeyRegistry({eval_key: Permission.WRITE}))
    platform_settings = PlatformSettings(
        data_dir=workdir / "platform",
        tokens=TokenRegistry().with_token(platform_token, space_id),
        model_retry=RetryPolicy.for_llm(max_attempts=1),
    )
    with ExitStack() as stack:
        eval_server = stack.enter_context(BackgroundServer(create_app(eval_settings)))
        platform_server = stack.enter_context(BackgroundServer(create_platform_app(platform_settings)))
        headers = {API_KEY_HEADER: eval_key}
        tasks = httpx.get(f"{eval_server.url}/scenarios/{SCENARIO}/tasks", headers=headers, timeout=REQUEST_TIMEOUT)
        tasks.raise_for_status()
        judge = httpx.post(
            f"{platform_server.url}/api/v1/judge/create/sdk",
            json={"judge_name": "load", "model_name": "veritas", "space_id": space_id},
            headers={"Authorization": f"Bearer {platform_token}"},
            timeout=REQUEST_TIMEOUT,
        )
        judge.raise_for_status()
        yield Target(
            eval_url=eval_server.url,
            eval_key=eval_key,
            platform_url=platform_server.url,
            platform_token=platform_token,
            space_id=space_id,
            judge_id=judge.json()["id"],
            task_ids=[task["task_id"] for task in tasks.json()["tasks"]],
        )


async def _load(target: Target, clients: int, seconds: float, settle_seconds: float) -> dict[str, Any]:
    tally = Tally()
    started = time.monotonic()
    await asyncio.gather(*(_client(i, target, started + seconds, tally) for i in range(clients)))
    elapsed = time.monotonic() - started
    settled = await _settle(target, tally, settle_seconds)
    every_get = [v for values in tally.get_latencies.values() for v in values]
    return {
        "elapsed_seconds": round(elapsed, 1),
        "requests": tally.requests,
        "requests_per_second": round(tally.requests / elapsed, 1),
        "server_errors_5xx": sum(tally.server_errors.values()),
        "server_errors_by_endpoint": dict(tally.server_errors),
        "transport_errors": sum(tally.transport_errors.values()),
        "transport_errors_by_endpoint": dict(tally.transport_errors),
        "unavailable_503": tally.unavailable,
        "unavailable_503_without_retry_after": tally.unavailable_without_retry_after,
        "statuses": {str(k): v for k, v in sorted(tally.statuses.items())},
        "get_latency": _latency(every_get),
        "get_latency_by_endpoint": {label: _latency(v) for label, v in sorted(tally.get_latencies.items())},
        **settled,
    }


def run(clients: int, seconds: float, settle_seconds: float) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="ep-load-"))
    try:
        with _services(workdir) as target:
            figures = asyncio.run(_load(target, clients, seconds, settle_seconds))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    passed = (
        figures["server_errors_5xx"] == 0
        and figures["transport_errors"] == 0
        and figures["lost_rollouts"] == 0
        and figures["unavailable_503_without_retry_after"] == 0
    )
    return {
        "benchmark": "load",
        "when": now_iso(),
        "command": command_line(),
        "machine": machine(),
        "clients": clients,
        "seconds": seconds,
        "passed": passed,
        **figures,
    }


def markdown(report: dict[str, Any]) -> str:
    latency = report["get_latency"]
    lines = [
        f"# Load: {report['clients']} clients for {report['seconds']} s (loopback)",
        "",
        f"`{report['command']}` ({report['when']}, {report['machine']['cpus']} CPUs)",
        "",
        "| figure | value |",
        "|---|---|",
        f"| requests | {report['requests']} ({report['requests_per_second']}/s) |",
        f"| 5xx (503 excluded) | {report['server_errors_5xx']} |",
        f"| transport errors | {report['transport_errors']} |",
        f"| 503 with Retry-After (overload, allowed) | {report['unavailable_503']} |",
        f"| launched runs / rollouts | {report['launched_runs']} / {report['launched_rollouts']} |",
        f"| lost rollouts | {report['lost_rollouts']} |",
        f"| rollout outcomes | {report['rollout_outcomes']} |",
        f"| GET p50 / p99 | {latency['p50_ms']} ms / {latency['p99_ms']} ms ({latency['count']} GETs) |",
        f"| passed | {report['passed']} |",
        "",
        "| GET endpoint | count | p50 ms | p99 ms |",
        "|---|---|---|---|",
    ]
    for label, figures in report["get_latency_by_endpoint"].items():
        lines.append(f"| {label} | {figures['count']} | {figures['p50_ms']} | {figures['p99_ms']} |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    parser.add_argument("--seconds", type=float, default=60.0, help="duration of the load (default 60)")
    parser.add_argument(
        "--settle-seconds", type=float, default=180.0, help="how long launched runs may take to finish afterwards"
    )
    parser.add_argument("--out", default=str(RESULTS_DIR), help="results directory ('' writes no files)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.clients < 1 or args.seconds <= 0 or args.settle_seconds <= 0:
        parser.error("--clients must be at least 1, --seconds and --settle-seconds positive")
    report = run(args.clients, args.seconds, args.settle_seconds)
    write_report("load", report, markdown(report), Path(args.out) if args.out else None)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
