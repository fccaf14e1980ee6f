"""Shared pieces of the benchmarks: the benchmark scenario, the zero-latency (or sleeping) model endpoint in its
own process, our pipeline's run of one partition, CPU/RSS accounting, and where results go.

The endpoint runs as a separate process (`python -m benchmarks._common endpoint ...`) because a real model is
never inside the orchestrator's process: its CPU is reported on its own line, not mixed into ours or Inspect's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
INSPECT_PYTHON = Path(__file__).resolve().parent / ".venv-inspect" / "bin" / "python"
#: The email task the benchmarks copy: 5 tool calls (get, search, get, reply, send) and a final answer.
SOURCE_SCENARIO = "email_ops"
SOURCE_TASK = "email_ops_011"
BENCH_SCENARIO_ID = "bench_email:1.0.0"
#: sim-oracle's model calls per rollout of the benchmark task: one per tool call, plus the final answer.
CALLS_PER_ROLLOUT = 6

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# --- measurement ------------------------------------------------------------------------------------------------


def cpu_seconds() -> float:
    """CPU time (user + system) of this process, all threads, plus its waited-for children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _stat_fields(pid: str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:  # exited meanwhile
        return None


def _descendants(stats: Mapping[str, list[str]], root: str) -> list[str]:
    children: dict[str, list[str]] = {}
    for pid, stat in stats.items():
        children.setdefault(stat[1], []).append(pid)
    found: list[str] = []
    frontier = [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.append(child)
            frontier.append(child)
    return found


def _process_stats() -> dict[str, list[str]]:
    return {
        entry.name: stat
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and (stat := _stat_fields(entry.name)) is not None
    }


def descendant_pids() -> list[int]:
    """Every live (or not yet reaped) process this one started, directly or not (Linux)."""
    return [int(pid) for pid in _descendants(_process_stats(), str(os.getpid()))]


def process_tree_cpu_seconds() -> float:
    """CPU time (user + system) of this process and every process it started, directly or not, alive or gone:
    its own, its waited-for children's (RUSAGE_CHILDREN), and each live (or not yet reaped) descendant's own plus
    that descendant's waited-for children's. A difference of two readings is the tree's CPU in between, however
    the processes came and went: one that exits is counted in its parent's children's time from then on.

    Helper processes that outlive a run (verifier workers stopping in the background, the tool-server process)
    are in it; reading only this process's rusage would miss whatever has not been waited for yet. Linux only."""
    stats = _process_stats()
    descendants = _descendants(stats, str(os.getpid()))
    ticks = sum(sum(int(x) for x in stats[pid][11:15]) for pid in descendants)  # utime stime cutime cstime
    return cpu_seconds() + ticks / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (all threads), from /proc/<pid>/stat (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib() -> float:
    """This process's peak resident set size, MiB (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def process_peak_rss_mib(pid: int) -> float:
    """Peak resident set size (VmHWM) of a live process, MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def git_revision() -> str:
    """The commit measured, with `+dirty` when the working tree differs from it (other engineers edit live)."""
    try:

        def git(*args: str) -> str:
            return subprocess.run(
                ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()

        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "eval_pipelines")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+dirty" if dirty else head


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": cpu_count(),
        "platform": platform.platform(),
        "git_revision": git_revision(),
    }


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def command_line() -> str:
    """How this benchmark was invoked, relative to the repository root, for the report."""
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(REPO_ROOT) if script.is_relative_to(REPO_ROOT) else script
    return " ".join([".venv/bin/python", str(shown), *sys.argv[1:]])


def write_report(name: str, report: dict[str, Any], markdown: str, out: Path | None) -> None:
    """JSON on stdout and `<out>/<name>.{json,md}` (git-ignored); `out=None` writes no files."""
    text = json.dumps(report, indent=2)
    print(text)
    print(markdown)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(text + "\n", encoding="utf-8")
        (out / f"{name}.md").write_text(markdown + "\n", encoding="utf-8")


def run_json_child(command: Sequence[str], *, timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a benchmark child process and return the JSON object it prints last."""
    completed = subprocess.run(
        list(command), capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO_ROOT, check=False
    )
    # Stripped: a child's console display (Inspect's, at default settings) can leave padding before the JSON.
    lines = [line.strip() for line in completed.stdout.splitlines() if line.strip().startswith("{")]
    if completed.returncode != 0 or not lines:
        tail = (completed.stderr or completed.stdout)[-3000:]
        raise RuntimeError(f"{' '.join(command[:3])}... exited {completed.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --- the benchmark scenario -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchScenario:
    scenarios_dir: Path
    scenario_dir: Path
    task_ids: list[str]


def write_bench_scenario(
    scenarios_dir: Path, task_count: int, source: Path | None = None, source_task: str = SOURCE_TASK
) -> BenchScenario:
    """A catalog folder holding one scenario, `bench_email`, whose `task_count` tasks are copies of the source task
    (same instruction, seed, reference actions and verifier), so N tasks x k rollouts mirrors N samples x k epochs.
    """
    from eval_pipelines.inputs.paths import builtin_scenarios_dir

    source = source or builtin_scenarios_dir() / SOURCE_SCENARIO
    # A unique folder name: the verifier loader names a package by its folder and content, so two copies with the
    # same name in one process (the in-process smoke tests) would share the first copy's, possibly deleted, path.
    target = scenarios_dir / f"bench_email_{uuid.uuid4().hex[:8]}"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "tasks"))
    template = json.loads((target / "template.json").read_text(encoding="utf-8"))
    template.update(scenario_id=BENCH_SCENARIO_ID, name="Benchmark: email, 5 tool calls")
    (target / "template.json").write_text(json.dumps(template, indent=2), encoding="utf-8")
    task = json.loads((source / "tasks" / f"{source_task}.json").read_text(encoding="utf-8"))
    (target / "tasks").mkdir()
    task_ids = []
    for index in range(task_count):
        task_id = f"bench_{index:05d}"
        task["task_id"] = task_id
        if isinstance(task.get("rubric"), dict):
            task["rubric"]["task_id"] = task_id
        (target / "tasks" / f"{task_id}.json").write_text(json.dumps(task, indent=2), encoding="utf-8")
        task_ids.append(task_id)
    return BenchScenario(scenarios_dir, target, task_ids)


# --- the model endpoint, in its own process ---------------------------------------------------------------------


#: The endpoint's count of chat completions served, so a report can show each side really called it.
COMPLETIONS_PATH = "/bench/chat-completions"


def with_latency(app: AsgiApp, seconds: float) -> AsgiApp:
    """Start each chat-completion response `seconds` after its request arrived, as a remote model with that
    latency would: the simulated model's own work happens inside the latency, not on top of it (other routes
    are immediate). Also counts the completions it served (`GET /bench/chat-completions`)."""
    served = 0

    async def delayed(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal served
        path = str(scope.get("path", ""))
        if scope["type"] == "http" and path == COMPLETIONS_PATH:
            body = json.dumps({"chat_completions": served}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if not (scope["type"] == "http" and path.endswith("/chat/completions")):
            await app(scope, receive, send)
            return
        served += 1
        due = time.monotonic() + seconds

        async def send_when_due(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and seconds > 0:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            await send(message)

        await app(scope, receive, send_when_due)

    return delayed


def endpoint_app(scenarios_dir: Path, latency_seconds: float) -> AsgiApp:
    """The simulated models (sim-oracle replays the reference actions), answering after `latency_seconds`."""
    from eval_pipelines.inputs.scenarios import ScenarioCatalog
    from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app

    app: AsgiApp = create_sim_app(ReferenceBook.from_catalog(ScenarioCatalog(scenarios_dir)))
    return with_latency(app, latency_seconds)


def serve_endpoint(scenarios_dir: Path, port: int, latency_seconds: float) -> None:
    """Serve the endpoint app until SIGTERM (the body of the endpoint process)."""
    from eval_pipelines.lib.serving import BackgroundServer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with BackgroundServer(endpoint_app(scenarios_dir, latency_seconds), port=port):
        stop.wait()


class ModelEndpoint:
    """`with ModelEndpoint(scenarios_dir, latency_seconds=0.2) as endpoint: endpoint.url` (the `/v1` base URL).

    A separate process on a loopback port; `cpu_seconds()` reads its CPU time so each side can report it.
    `in_process=True` serves it from a thread of this process instead (the smoke tests: no process start-up,
    but its CPU is then this process's).
    """

    def __init__(
        self,
        scenarios_dir: Path,
        latency_seconds: float = 0.0,
        startup_timeout: float = 60.0,
        in_process: bool = False,
    ) -> None:
        from eval_pipelines.lib.serving import free_port

        self.port = free_port()
        self.latency_seconds = latency_seconds
        self.scenarios_dir = scenarios_dir
        self.startup_timeout = startup_timeout
        self.in_process = in_process
        self._process: subprocess.Popen[bytes] | None = None
        self._thread_server: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int:
        if self.in_process:
            return os.getpid()
        assert self._process is not None
        return self._process.pid

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.pid)

    def chat_completions(self) -> int:
        """How many chat completions the endpoint has served so far."""
        base = self.url.removesuffix("/v1")
        return int(httpx.get(f"{base}{COMPLETIONS_PATH}", timeout=10.0).json()["chat_completions"])

    def start(self) -> ModelEndpoint:
        if self.in_process:
            from eval_pipelines.lib.serving import BackgroundServer

            app = endpoint_app(self.scenarios_dir, self.latency_seconds)
            self._thread_server = BackgroundServer(app, port=self.port).start()
            return self
        command = [sys.executable, "-m", "benchmarks._common", "endpoint", "--scenarios-dir", str(self.scenarios_dir),
                   "--port", str(self.port), "--latency", str(self.latency_seconds)]  # fmt: skip
        self._process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the model endpoint exited during startup (status {self._process.returncode})")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"the model endpoint did not start within {self.startup_timeout:g}s")

    def stop(self) -> None:
        if self._thread_server is not None:
            self._thread_server.stop()
            self._thread_server = None
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=15)
        self._process = None

    def __enter__(self) -> ModelEndpoint:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextmanager
def patched_environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of an in-process child, then restore them."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_child(
    script: Path,
    child_args: list[str],
    child_main: Callable[[list[str]], dict[str, Any]],
    *,
    in_process: bool,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One measurement: `script --child ...` in a fresh interpreter (imports and earlier runs do not leak into
    its CPU and RSS), or `child_main` in this process when `in_process` (the smoke tests)."""
    if in_process:
        with patched_environ(env or {}):
            return child_main(child_args)
    full_env = {**os.environ, **env} if env else None
    return run_json_child([sys.executable, str(script), *child_args], timeout=timeout, env=full_env)


def ensure_bytecode() -> None:
    """Compile the project's modules to bytecode, as installing a package does. The processes a run starts
    (verifier and rollout workers) import the project; with PYTHONDONTWRITEBYTECODE set, or sources edited
    since their bytecode was written, each of them would compile it again inside the measurement, a cost no
    installed deployment pays (Inspect's side runs from an installed, compiled package)."""
    import compileall

    import eval_pipelines

    compileall.compile_dir(Path(eval_pipelines.__file__).parent, quiet=1, workers=1)


# --- our side: one partition through the embedded service, as the `rollouts` asset runs it ----------------------


@dataclass
class OurRun:
    rollouts: int
    passed: int
    by_status: dict[str, int]
    wall_seconds: float
    cpu_seconds: float
    endpoint_cpu_seconds: float | None
    #: from the start to the last rollout's completion: execution alone, before the traces and Parquet are written.
    execute_seconds: float
    #: each finished rollout's completion time (the store's, seconds since the run was launched), in order.
    completion_offsets: list[float] = field(default_factory=list)


def _sim_model_config(model: str, endpoint_url: str) -> dict[str, Any]:
    return {
        "model": model,
        "provider": "custom",
        "base_url": endpoint_url,
        "api_key": "benchmark-key-not-secret",
        "temperature": 0.0,
    }


class OurPipeline:
    """The embedded default (the local evaluation service on a loopback port, through its client) and the
    warehouse under one data directory: the path the `eval_run` and `rollouts` assets take
    (`pipeline.steps.run_and_collect`), without Dagster.

    Each run: launch (POST /runs; SQLite run store) -> execute every rollout (RolloutEngine: workspaces on the real
    HTTP email server, the reference agent against the model endpoint, state snapshots and diffs, the scenario's
    verifiers, artifacts JSON) -> poll until done -> write rollouts/messages/tool_calls Parquet from the artifacts.
    """

    def __init__(self, scenarios_dir: Path, data_dir: Path, scenario_id: str = BENCH_SCENARIO_ID) -> None:
        ensure_bytecode()
        from eval_pipelines.inputs.scenarios import ScenarioCatalog
        from eval_pipelines.local.services import local_evaluation_service
        from eval_pipelines.runtime.local import shared_runtime
        from eval_pipelines.warehouse.store import Warehouse

        self.catalog = ScenarioCatalog(scenarios_dir)
        self.scenario = self.catalog.get(scenario_id)
        self.data_dir = data_dir
        # Held for the process's life, as the CLI holds it for a whole sweep.
        self._held = contextlib.ExitStack()
        self.backend = self._held.enter_context(local_evaluation_service(data_dir, scenarios_dir)).backend()
        self.warehouse = Warehouse(data_dir / "warehouse")
        # The runtime the local service executes on (one per scenario folder per process).
        self.runtime = shared_runtime(self.catalog)
        self.runtime.start()  # tool servers listening before anything is timed
        self._runs = 0

    def close(self) -> None:
        """Stop the service and the worker processes it keeps (verifier workers), as the CLI does after a sweep."""
        self._held.close()

    def run(
        self,
        task_ids: Sequence[str],
        rollout_count: int,
        max_parallel: int,
        endpoint_url: str,
        *,
        endpoint_pid: int | None = None,
        model_key: str = "sim-oracle",
        user_model: str | None = None,
        max_steps: int | None = None,
        timeout_seconds: float = 600.0,
        on_rollout_done: Callable[[], None] | None = None,
    ) -> OurRun:
        from eval_pipelines.pipeline.steps import run_and_collect
        from eval_pipelines.schemas.runs import RolloutStatus, RunLaunchRequest
        from eval_pipelines.warehouse.rows import RolloutContext

        self._runs += 1
        run_name = f"bench-{os.getpid()}-{self._runs}"
        request = RunLaunchRequest.model_validate(
            {
                "scenario_id": self.scenario.scenario_id,
                "task_ids": list(task_ids),
                "model_config": _sim_model_config("sim-oracle", endpoint_url)
                | ({"max_steps": max_steps} if max_steps else {}),
                "rollout_count": rollout_count,
                "max_parallel": max_parallel,
                "run_name": run_name,
            }
            # A multi-turn task's user is played by this model on the same endpoint (a benchmark's sim-user).
            | ({"user_model_config": _sim_model_config(user_model, endpoint_url)} if user_model else {})
        )
        ctx = RolloutContext("bench", run_name, model_key, self.scenario.key, "sim-oracle", True, endpoint_url)
        last_done = 0.0

        def progress(_: Any) -> None:
            nonlocal last_done
            last_done = time.perf_counter()
            if on_rollout_done is not None:
                on_rollout_done()

        endpoint_before = process_cpu_seconds(endpoint_pid) if endpoint_pid else None
        cpu_before = process_tree_cpu_seconds()
        started_at = time.time()
        started = time.perf_counter()
        summary = run_and_collect(
            self.backend,
            request,
            ctx,
            self.scenario,
            self.warehouse,
            self.data_dir / "artifacts",
            timeout_seconds=timeout_seconds,
            progress=progress,
        )
        wall = time.perf_counter() - started
        # Ours is every process of the pipeline: this one, its rollout workers, the verifier workers (which stop
        # in the background after the run) and the tool-server process.
        cpu = process_tree_cpu_seconds() - cpu_before
        endpoint_cpu = None if endpoint_before is None else process_cpu_seconds(endpoint_pid or 0) - endpoint_before
        passed, last_finished = 0, None
        finish_times: list[float] = []
        # A page at a time, as the pipeline reads them: holding a 10,000-rollout run here would be measured too.
        for page in self.backend.rollout_pages(summary.run_id, 500):
            for r in page:
                passed += r.status == RolloutStatus.COMPLETED and bool(r.result and r.result.success)
                if r.completed_at:
                    # Rollouts finished in worker processes are reported by polling, so the callback's clock can
                    # lag: the store's completion times are exact.
                    finished = dt.datetime.fromisoformat(r.completed_at).timestamp()
                    finish_times.append(finished - started_at)
                    last_finished = finished if last_finished is None else max(last_finished, finished)
        execute = (last_finished - started_at) if last_finished else (last_done or time.perf_counter()) - started
        return OurRun(
            summary.rollouts, passed, summary.by_status, wall, cpu, endpoint_cpu, execute, sorted(finish_times)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="benchmark helpers")
    sub = parser.add_subparsers(dest="command", required=True)
    endpoint = sub.add_parser("endpoint", help="serve the simulated models until SIGTERM")
    endpoint.add_argument("--scenarios-dir", type=Path, required=True)
    endpoint.add_argument("--port", type=int, required=True)
    endpoint.add_argument("--latency", type=float, default=0.0, help="seconds before each chat completion")
    args = parser.parse_args(argv)
    serve_endpoint(args.scenarios_dir, args.port, args.latency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
