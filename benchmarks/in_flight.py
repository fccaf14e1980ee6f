"""In flight: model calls that take seconds, with hundreds to a thousand rollouts waiting on them at once.

    .venv/bin/python benchmarks/in_flight.py      # 2 s calls at 200, 500 and 1,000 in flight, then 0.5-8 s at 1,000
    .venv/bin/python benchmarks/in_flight.py --in-flight 1000 --latency 2 --no-spread      # one row

Target: at 1,000 in flight with 2 s calls, at least 90% of ideal throughput, and memory per in-flight rollout
flat from 200 to 1,000.

The model endpoint (sim-oracle, a process of its own, reported apart) starts each chat-completion response a
delay after its request arrived: 2 s (`--latency`), or, for the spread row, a seeded draw (`--spread
uniform:0.5:8`, or `lognormal:MEDIAN:SIGMA`). It waits with asyncio, so a thousand slow requests cost it a
thousand sleeping coroutines, not threads; uvicorn's listen backlog (2,048) is above the largest in-flight
count, and it sets no concurrency limit. Each row runs in a fresh child process: `--waves` x in-flight rollouts
(at least `--min-rollouts`) of the benchmark task (5 tool calls and a final answer: 6 model calls) through our
pipeline (`run_and_collect` on the embedded service, max_parallel = in-flight), which spreads the run over
rollout worker processes as its concurrency asks (`service/workers.py`).

Figures, per row:
- throughput as a share of ideal: ideal = in_flight / (6 x mean latency), the mean of the delays the endpoint
  actually drew during the run; achieved = rollouts / seconds from launch to the last completion (the store's
  timestamps), and window by window: each `--window` (1,000) consecutive completions, so a slowdown after the
  first thousand shows as a falling window;
- CPU-ms per rollout of every process of ours (the runner, its rollout workers, the tool host, verifier
  workers); the endpoint's apart;
- memory: the summed RSS of all our processes, sampled every second, its median over the middle half of the
  run (the steady state), divided by the in-flight count; and the growth per extra in-flight rollout from the
  smallest to the largest row (RSS difference / in-flight difference), which is what a rollout in flight costs;
- file descriptors and TCP sockets held by our processes (from /proc), at the steady state and at the peak;
- the rollouts that passed, and for a row where some did not, the commonest reasons from the run store (a
  failed rollout ends early, so that row's throughput is no measure of latency hiding).

Results: JSON on stdout and in `benchmarks/results/in_flight.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import (
    CALLS_PER_ROLLOUT,
    REPO_ROOT,
    RESULTS_DIR,
    AsgiApp,
    OurPipeline,
    Receive,
    Scope,
    Send,
    command_line,
    load_average,
    machine,
    now_iso,
    process_cpu_seconds,
    write_bench_scenario,
    write_report,
)

DEFAULT_IN_FLIGHT = (200, 500, 1000)
DEFAULT_LATENCY_SECONDS = 2.0
DEFAULT_SPREAD = "uniform:0.5:8"
DEFAULT_SEED = 7
#: The least fraction of ideal throughput at 1,000 in flight with constant 2 s calls.
TARGET_FRACTION = 0.90
TARGET_IN_FLIGHT = 1000
SAMPLE_SECONDS = 1.0
CHILD_TIMEOUT_SECONDS = 3600.0
LATENCY_PATH = "/bench/latency"


# --- the endpoint: a seeded delay before each chat completion ---------------------------------------------------


@dataclass(frozen=True)
class Latency:
    """A model call's delay: `const:2`, `uniform:0.5:8` or `lognormal:MEDIAN:SIGMA` (seconds)."""

    kind: str
    params: tuple[float, ...]

    @classmethod
    def parse(cls, text: str) -> Latency:
        kind, *raw = text.split(":")
        expected = {"const": 1, "uniform": 2, "lognormal": 2}
        if kind not in expected or len(raw) != expected[kind]:
            raise ValueError(f"latency {text!r}: const:S, uniform:LOW:HIGH or lognormal:MEDIAN:SIGMA")
        params = tuple(float(x) for x in raw)
        if any(p < 0 for p in params) or (kind == "uniform" and params[0] > params[1]):
            raise ValueError(f"latency {text!r}: negative or inverted bounds")
        return cls(kind, params)

    @property
    def mean(self) -> float:
        if self.kind == "const":
            return self.params[0]
        if self.kind == "uniform":
            return (self.params[0] + self.params[1]) / 2
        median, sigma = self.params
        return median * math.exp(sigma**2 / 2)

    def sampler(self, seed: int) -> Callable[[], float]:
        rng = random.Random(seed)
        if self.kind == "const":
            value = self.params[0]
            return lambda: value
        if self.kind == "uniform":
            low, high = self.params
            return lambda: rng.uniform(low, high)
        median, sigma = self.params
        return lambda: rng.lognormvariate(math.log(median), sigma)

    def __str__(self) -> str:
        return ":".join([self.kind, *(f"{p:g}" for p in self.params)])


def with_drawn_latency(app: AsgiApp, draw: Callable[[], float]) -> AsgiApp:
    """Start each chat-completion response a drawn delay after its request arrived (the simulated model's own
    work inside it). `GET /bench/latency` reports the delays drawn so far and the most requests held at once."""
    drawn = {"count": 0, "seconds": 0.0, "held": 0, "most_held": 0}

    async def delayed(scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] == "http" and path == LATENCY_PATH:
            body = json.dumps(drawn).encode()
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": body})
            return
        if not (scope["type"] == "http" and path.endswith("/chat/completions")):
            await app(scope, receive, send)
            return
        seconds = draw()
        drawn["count"] += 1
        drawn["seconds"] += seconds
        drawn["held"] += 1
        drawn["most_held"] = max(drawn["most_held"], drawn["held"])
        due = time.monotonic() + seconds

        async def send_when_due(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            await send(message)

        try:
            await app(scope, receive, send_when_due)
        finally:
            drawn["held"] -= 1

    return delayed


def serve_endpoint(scenarios_dir: Path, port: int, latency: Latency, seed: int) -> None:
    from eval_pipelines.inputs.scenarios import ScenarioCatalog
    from eval_pipelines.lib.open_files import raise_open_files_limit
    from eval_pipelines.lib.serving import BackgroundServer
    from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app

    raise_open_files_limit(None)
    app = with_drawn_latency(
        create_sim_app(ReferenceBook.from_catalog(ScenarioCatalog(scenarios_dir))), latency.sampler(seed)
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with BackgroundServer(app, port=port):
        stop.wait()


class Endpoint:
    """The endpoint process: `with Endpoint(dir, Latency.parse("const:2"), 7) as e: e.url`."""

    def __init__(self, scenarios_dir: Path, latency: Latency, seed: int) -> None:
        from eval_pipelines.lib.serving import free_port

        self.port = free_port()
        self.args = ["--scenarios-dir", str(scenarios_dir), "--port", str(self.port), "--latency", str(latency),
                     "--seed", str(seed)]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Endpoint:
        command = [sys.executable, str(Path(__file__).resolve()), "endpoint", *self.args]
        self.process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the endpoint exited during start-up (status {self.process.returncode})")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise TimeoutError("the endpoint did not start within 60 s")

    def __exit__(self, *_: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


def endpoint_latency(url: str) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(url.removesuffix("/v1") + LATENCY_PATH, timeout=10.0).json()
    return answer


# --- /proc sampling of our process tree -------------------------------------------------------------------------


def process_tree(root: int) -> list[int]:
    """`root` and every live descendant (Linux)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[-1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    tree, frontier = [root], [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            tree.append(child)
            frontier.append(child)
    return tree


def tcp_inodes() -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        inodes.update(line.split()[9] for line in lines if len(line.split()) > 9)
    return inodes


#: What each of our processes is, by a word of its command line (the runner is the sampled root itself).
ROLES = (("worker_main", "rollout workers"), ("eval_pipelines.toolservers", "tool host"), ("isolation", "verifiers"))


def role(pid: int, root: int) -> str:
    if pid == root:
        return "runner"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    return next((name for word, name in ROLES if word in command), "other")


def sample_tree(root: int, roles: dict[int, str]) -> dict[str, Any]:
    """Summed RSS (MiB), open file descriptors and TCP sockets of `root`'s process tree, its process count,
    and each process's CPU seconds so far (`cpu`: pid -> seconds; `roles` remembers what each pid is)."""
    rss_kib, fds, sockets, processes = 0, 0, 0, 0
    cpu: dict[int, float] = {}
    tcp = tcp_inodes()
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in process_tree(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:  # exited meanwhile
            continue
        if pid not in roles:
            roles[pid] = role(pid, root)
        cpu[pid] = (int(stat[11]) + int(stat[12])) / ticks
        processes += 1
        rss_kib += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        fds += len(links)
        sockets += sum(1 for link in links if link.startswith("socket:[") and link[8:-1] in tcp)
    return {"rss_mib": rss_kib / 1024, "fds": fds, "tcp_sockets": sockets, "processes": processes, "cpu": cpu}


class Sampler:
    """Samples a process tree every `SAMPLE_SECONDS` on a thread of this process (outside the tree measured,
    so its own CPU is not counted as ours), each sample stamped with the wall-clock time."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.samples: list[dict[str, Any]] = []
        self.roles: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="in-flight-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            self.samples.append({"at": time.time(), **sample_tree(self.root, self.roles)})
            if self._stop.wait(SAMPLE_SECONDS):
                return

    def cpu_by_role(self, since: float) -> dict[str, float]:
        """CPU seconds each kind of process used from `since` (a process's first reading after it, or its
        first reading at all, to its last)."""
        first: dict[int, float] = {}
        last: dict[int, float] = {}
        for sample in self.samples:
            for pid, used in sample["cpu"].items():
                if sample["at"] >= since:
                    first.setdefault(pid, used)
                last[pid] = used
        totals: dict[str, float] = {}
        for pid, used in last.items():
            name = self.roles.get(pid, "other")
            totals[name] = round(totals.get(name, 0.0) + used - first.get(pid, used), 2)
        return totals


def steady_state(samples: list[dict[str, Any]], started_at: float, execute_seconds: float) -> dict[str, float]:
    """Medians over the middle half of the execution (all rollout slots busy), and the peaks of the whole run."""
    # A run shorter than the sampling period (the smoke test's) falls back to whatever was sampled.
    run = [s for s in samples if started_at <= s["at"] <= started_at + execute_seconds] or samples
    middle = [s for s in run if 0.25 * execute_seconds <= s["at"] - started_at <= 0.75 * execute_seconds] or run
    out: dict[str, float] = {}
    for key in ("rss_mib", "fds", "tcp_sockets", "processes"):
        out[key] = round(statistics.median(s[key] for s in middle), 1) if middle else 0.0
        out[f"peak_{key}"] = round(max((s[key] for s in run), default=0.0), 1)
    return out


def windows(offsets: list[float], size: int, ideal: float) -> list[dict[str, float]]:
    """Throughput of each `size` consecutive completions (the first from the launch), as rollouts/s and a
    fraction of ideal, with the window's first and last completion (seconds from the launch: with every slot
    started at once, a window is a wave, and its spread is how far its rollouts fell out of step); a trailing
    partial window is left out."""
    rows, previous = [], 0.0
    for end in range(size, len(offsets) + 1, size):
        span = offsets[end - 1] - previous
        rate = size / span if span > 0 else float("inf")
        rows.append(
            {
                "rollouts": end,
                "rollouts_per_second": round(rate, 2),
                "fraction_of_ideal": round(rate / ideal, 3),
                "first_at": round(offsets[end - size], 2),
                "last_at": round(offsets[end - 1], 2),
            }
        )
        previous = offsets[end - 1]
    return rows


# --- one row, in a fresh child ----------------------------------------------------------------------------------


def child(args: argparse.Namespace) -> dict[str, Any]:
    pipeline = OurPipeline(args.scenarios_dir, args.data_dir)
    task_ids = sorted(pipeline.scenario.tasks())
    pipeline.run(task_ids[:2], 1, 2, args.endpoint, model_key="warmup")
    drawn_before = endpoint_latency(args.endpoint)
    started_at = time.time()
    run = pipeline.run(task_ids[: args.rollouts], 1, args.in_flight, args.endpoint, endpoint_pid=args.endpoint_pid,
                       timeout_seconds=CHILD_TIMEOUT_SECONDS)  # fmt: skip
    drawn_after = endpoint_latency(args.endpoint)
    calls = drawn_after["count"] - drawn_before["count"]
    return {
        "rollouts": run.rollouts,
        "passed": run.passed,
        "status": run.by_status,
        "started_at": started_at,
        "execute_seconds": run.execute_seconds,
        "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds,
        "endpoint_cpu_seconds": run.endpoint_cpu_seconds,
        "model_calls": calls,
        "mean_latency_seconds": (drawn_after["seconds"] - drawn_before["seconds"]) / calls if calls else None,
        "endpoint_most_held": drawn_after["most_held"],
        "completion_offsets": run.completion_offsets,
        "failures": failure_reasons(args.data_dir) if run.passed < run.rollouts else [],
        "open_files_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    }


def failure_reasons(data_dir: Path, limit: int = 5) -> list[dict[str, Any]]:
    """The most frequent reasons rollouts did not complete, read from the run store (shown with the figures,
    so a row with failures says why)."""
    from eval_pipelines.service.layout import service_paths

    db = sqlite3.connect(f"file:{service_paths(data_dir)[0]}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "select termination_reason, substr(coalesce(json_extract(result_json, '$.message'), ''), 1, 300), count(*)"
            " from rollouts where status != 'completed' group by 1, 2 order by 3 desc limit ?",
            (limit,),
        ).fetchall()
    finally:
        db.close()
    return [{"reason": reason, "error": error, "rollouts": count} for reason, error, count in rows]


def run_sampled_child(child_args: list[str], in_process: bool) -> tuple[dict[str, Any], Sampler]:
    """The child's JSON answer, and the samples of its process tree taken from here while it ran."""
    if in_process:
        with Sampler(os.getpid()) as sampler:
            return child_main(child_args), sampler
    command = [sys.executable, str(Path(__file__).resolve()), *child_args]
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with Sampler(process.pid) as sampler:
        try:
            stdout, stderr = process.communicate(timeout=CHILD_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"the benchmark child exited {process.returncode}:\n{(stderr or stdout)[-3000:]}")
    return json.loads(lines[-1]), sampler


def child_main(argv: list[str]) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    args.in_flight = args.in_flight[0]
    return child(args)


def measure(in_flight: int, rollouts: int, latency: Latency, window: int, scenarios_dir: Path, endpoint: Endpoint,
            workdir: Path, in_process: bool) -> dict[str, Any]:  # fmt: skip
    assert endpoint.process is not None
    child_args = ["--child", "--scenarios-dir", str(scenarios_dir), "--data-dir", str(workdir), "--endpoint",
                  endpoint.url, "--endpoint-pid", str(endpoint.process.pid), "--in-flight", str(in_flight),
                  "--rollouts", str(rollouts)]  # fmt: skip
    load_before = load_average()
    endpoint_before = process_cpu_seconds(endpoint.process.pid)
    raw, sampler = run_sampled_child(child_args, in_process)
    endpoint_cpu = process_cpu_seconds(endpoint.process.pid) - endpoint_before
    mean_latency = raw["mean_latency_seconds"] or latency.mean
    ideal = in_flight / (CALLS_PER_ROLLOUT * mean_latency)
    achieved = raw["rollouts"] / raw["execute_seconds"]
    state = steady_state(sampler.samples, raw["started_at"], raw["execute_seconds"])
    return {
        "in_flight": in_flight,
        "latency": str(latency),
        "mean_latency_seconds": round(mean_latency, 3),
        "rollouts": raw["rollouts"],
        "passed": raw["passed"],
        "status": raw["status"],
        "failures": raw["failures"],
        "model_calls": raw["model_calls"],
        "ideal_rollouts_per_second": round(ideal, 2),
        "achieved_rollouts_per_second": round(achieved, 2),
        "fraction_of_ideal": round(achieved / ideal, 3),
        "windows": windows(raw["completion_offsets"], window, ideal),
        "execute_seconds": round(raw["execute_seconds"], 2),
        "end_to_end_seconds": round(raw["wall_seconds"], 2),
        "cpu_ms_per_rollout": round(1000 * raw["cpu_seconds"] / raw["rollouts"], 2),
        "cores_used": round(raw["cpu_seconds"] / raw["wall_seconds"], 2),
        "endpoint_cpu_ms_per_rollout": round(1000 * endpoint_cpu / raw["rollouts"], 2),
        "endpoint_most_held": raw["endpoint_most_held"],
        "cpu_seconds_by_role": sampler.cpu_by_role(raw["started_at"]),
        **state,
        "rss_kib_per_in_flight": round(1024 * state["rss_mib"] / in_flight, 1),
        "open_files_limit": raw["open_files_limit"],
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def memory_growth(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What one more rollout in flight costs: the steady-state RSS difference between the smallest and the
    largest constant-latency rows over their in-flight difference."""
    const = sorted((r for r in rows if r["latency"].startswith("const")), key=lambda r: r["in_flight"])
    if len(const) < 2 or const[0]["in_flight"] == const[-1]["in_flight"]:
        return None
    low, high = const[0], const[-1]
    extra = high["in_flight"] - low["in_flight"]
    return {
        "from": low["in_flight"],
        "to": high["in_flight"],
        "rss_mib_from": low["rss_mib"],
        "rss_mib_to": high["rss_mib"],
        "kib_per_extra_in_flight": round(1024 * (high["rss_mib"] - low["rss_mib"]) / extra, 1),
    }


def meets_target(rows: list[dict[str, Any]]) -> bool | None:
    target_latency = f"const:{DEFAULT_LATENCY_SECONDS:g}"
    checked = [
        r["fraction_of_ideal"] >= TARGET_FRACTION
        for r in rows
        if r["in_flight"] == TARGET_IN_FLIGHT and r["latency"] == target_latency
    ]
    return all(checked) if checked else None


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    plans = [(c, Latency("const", (args.latency,))) for c in args.in_flight]
    if args.spread:
        plans.append((max(args.in_flight), Latency.parse(args.spread)))
    counts = [max(args.waves * c, args.min_rollouts) for c, _ in plans]
    scenario = write_bench_scenario(workdir / "scenarios", max(counts))
    load_before = load_average()
    rows = []
    for (in_flight, latency), count in zip(plans, counts, strict=True):
        with Endpoint(scenario.scenarios_dir, latency, args.seed) as endpoint:
            folder = workdir / f"c{in_flight}-{latency.kind}"
            rows.append(measure(in_flight, count, latency, args.window, scenario.scenarios_dir, endpoint, folder,
                                args.in_process))  # fmt: skip
            shutil.rmtree(folder, ignore_errors=True)
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # a long run's rows as they come
    return {
        "benchmark": "in_flight",
        "command": command_line(),
        "calls_per_rollout": CALLS_PER_ROLLOUT,
        "seed": args.seed,
        "window": args.window,
        "target": f">= {TARGET_FRACTION:.0%} of ideal at {TARGET_IN_FLIGHT} in flight with "
        f"{DEFAULT_LATENCY_SECONDS:g} s calls",
        "meets_target": meets_target(rows),
        "memory_growth": memory_growth(rows),
        "results": rows,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "machine": machine(),
        "measured_at": now_iso(),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"In flight (`{report['command']}`; {report['calls_per_rollout']} model calls per rollout, seed "
        f"{report['seed']}, load {report['load_average_before'][0]} -> {report['load_average_after'][0]} on "
        f"{report['machine']['cpus']} CPUs, at {report['machine']['git_revision']})",
        "",
        "| in flight | latency (mean s) | rollouts (passed) | ideal/s | achieved/s | % of ideal | "
        "per 1,000-rollout window (first-last completion) | CPU-ms/rollout (endpoint) | "
        "RSS MiB (KiB per in flight) | processes | fds (peak) | TCP sockets (peak) | "
        "load before -> after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        per_window = (
            ", ".join(f"{w['fraction_of_ideal']:.0%} ({w['first_at']:g}-{w['last_at']:g} s)" for w in r["windows"])
            or "-"
        )
        lines.append(
            f"| {r['in_flight']} | {r['latency']} ({r['mean_latency_seconds']}) | {r['rollouts']} ({r['passed']}) | "
            f"{r['ideal_rollouts_per_second']} | {r['achieved_rollouts_per_second']} | "
            f"**{r['fraction_of_ideal']:.0%}** | "
            f"{per_window} | {r['cpu_ms_per_rollout']} ({r['endpoint_cpu_ms_per_rollout']}) | {r['rss_mib']} "
            f"({r['rss_kib_per_in_flight']}) | {r['processes']:g} | {r['fds']:g} ({r['peak_fds']:g}) | "
            f"{r['tcp_sockets']:g} ({r['peak_tcp_sockets']:g}) | {r['load_average_before'][0]} -> "
            f"{r['load_average_after'][0]} |"
        )
    growth = report["memory_growth"]
    if growth:
        lines += [
            "",
            f"Memory per extra rollout in flight ({growth['from']} -> {growth['to']}): "
            f"{growth['kib_per_extra_in_flight']} KiB ({growth['rss_mib_from']} -> {growth['rss_mib_to']} MiB).",
        ]
    if report["meets_target"] is not None:
        lines += ["", f"Target ({report['target']}): {'meets' if report['meets_target'] else 'MISSES'}."]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--in-flight", nargs="+", type=int, default=list(DEFAULT_IN_FLIGHT))
    parser.add_argument("--latency", type=float, default=DEFAULT_LATENCY_SECONDS, help="seconds per model call")
    parser.add_argument("--spread", default=DEFAULT_SPREAD, help="the spread row's latency, at the largest in-flight")
    parser.add_argument("--no-spread", dest="spread", action="store_const", const="", help="no spread row")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seeds the endpoint's latency draws")
    parser.add_argument("--waves", type=int, default=3, help="rollouts = waves x in-flight (at least --min-rollouts)")
    parser.add_argument("--min-rollouts", type=int, default=2000)
    parser.add_argument("--window", type=int, default=1000, help="rollouts per throughput window")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="where in_flight.{json,md} go ('' = nowhere)")
    parser.add_argument("--in-process", action="store_true", help="the rows in this process (smoke tests only)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenarios-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rollouts", type=int, help=argparse.SUPPRESS)
    return parser


def endpoint_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="serve the simulated models with a drawn latency until SIGTERM")
    parser.add_argument("--scenarios-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=Latency.parse, required=True)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    serve_endpoint(args.scenarios_dir, args.port, args.latency, args.seed)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["endpoint"]:
        return endpoint_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child:
        args.in_flight = args.in_flight[0]
        print(json.dumps(child(args)))
        return 0
    if min(args.in_flight) < 1 or args.waves < 1 or args.window < 1 or args.latency <= 0:
        parser.error("--in-flight, --waves and --window must be at least 1 and --latency positive")
    if args.spread:
        try:
            Latency.parse(args.spread)
        except ValueError as exc:
            parser.error(str(exc))
    workdir = Path(tempfile.mkdtemp(prefix="ep-in-flight-"))
    try:
        report = run(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    write_report("in_flight", report, markdown(report), Path(args.out) if args.out else None)
    return 0 if report["meets_target"] in (True, None) else 1


if __name__ == "__main__":
    sys.exit(main())
