"""Rollout worker processes: a run spread over processes runs each rollout once, within max_parallel, hears of
every rollout, survives a worker's death, and hands the worker its key over a pipe only."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import resource
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib import aio
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.runtime.local import shared_runtime
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import Rollout, RolloutStatus, Run, RunLaunchRequest, TerminationReason
from eval_pipelines.service.executor import RunExecutor
from eval_pipelines.service.layout import service_paths
from eval_pipelines.service.store import RunStore
from eval_pipelines.service.workers import (
    WORKER_MODULE,
    WORKERS_ENV,
    WorkerJob,
    rollout_workers,
    split_parallel,
)
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from tests.support.collector import is_frozen
from tests.support.stored_files import plain_bytes

SCENARIO = "email_ops:1.0.0"
CANARY = "sk-worker-canary-5d1e7a"
MODEL_LATENCY_SECONDS = 0.15


def _with_latency(app: Any, seconds: float) -> Any:
    """A model endpoint that takes `seconds` per chat completion, so rollouts overlap."""

    async def delayed(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and str(scope.get("path", "")).endswith("/chat/completions"):
            await asyncio.sleep(seconds)
        await app(scope, receive, send)

    return delayed


@pytest.fixture(scope="module")
def slow_model() -> Iterator[str]:
    book = ReferenceBook.from_catalog(ScenarioCatalog())
    with BackgroundServer(_with_latency(create_sim_app(book), MODEL_LATENCY_SECONDS)) as server:
        yield f"{server.url}/v1"


def _request(url: str, tasks: int, rollout_count: int, max_parallel: int, name: str) -> RunLaunchRequest:
    task_ids = sorted(ScenarioCatalog().get(SCENARIO).tasks())[:tasks]
    return RunLaunchRequest.model_validate(
        {
            "scenario_id": SCENARIO,
            "task_ids": task_ids,
            "model_config": {"model": "sim-oracle", "provider": "custom", "base_url": url, "api_key": CANARY},
            "rollout_count": rollout_count,
            "max_parallel": max_parallel,
            "run_name": name,
        }
    )


class SpreadRun:
    """The service's executor driven directly (no HTTP, no scheduler): what these tests examine is how one
    `execute` call spreads a run over worker processes."""

    def __init__(self, data_dir: Path) -> None:
        store_path, artifacts_dir = service_paths(data_dir)
        catalog = ScenarioCatalog()
        self.store = RunStore(store_path)
        self.executor = RunExecutor(self.store, catalog, shared_runtime(catalog), artifacts_dir)
        self.executor.workers = 2

    def complete_run(
        self, run_id: str, request: RunLaunchRequest, *, progress: Callable[[Rollout], None] | None = None
    ) -> Run:
        return aio.run(
            self.executor.execute(
                run_id, request.model_config_, max_parallel=request.max_parallel, on_rollout_done=progress
            )
        )

    def list_rollouts(self, run_id: str) -> list[Rollout]:
        return self.store.list_rollouts(run_id=run_id)


def _launch_spread(data_dir: Path, url: str, tasks: int, name: str) -> tuple[SpreadRun, RunLaunchRequest, str]:
    """A launched run of `tasks` x 2 rollouts, max_parallel 4, on an executor that always uses 2 processes."""
    service = SpreadRun(data_dir)
    request = _request(url, tasks=tasks, rollout_count=2, max_parallel=4, name=name)
    return service, request, service.executor.launch(request).run_id


def _rows(data_dir: Path, run_id: str) -> list[sqlite3.Row]:
    db = sqlite3.connect(service_paths(data_dir)[0])
    db.row_factory = sqlite3.Row
    try:
        return db.execute("select * from rollouts where run_id = ?", (run_id,)).fetchall()
    finally:
        db.close()


def _running_events(data_dir: Path, run_id: str) -> dict[str, int]:
    db = sqlite3.connect(service_paths(data_dir)[0])
    try:
        rows = db.execute(
            "select e.rollout_id, count(*) from rollout_events e join rollouts r using (rollout_id)"
            " where r.run_id = ? and e.status = 'running' group by e.rollout_id",
            (run_id,),
        ).fetchall()
    finally:
        db.close()
    return dict(rows)


def _peak_overlap(rows: list[sqlite3.Row]) -> int:
    edges: list[tuple[float, int]] = []
    for row in rows:
        edges.append((dt.datetime.fromisoformat(row["started_at"]).timestamp(), 1))
        edges.append((dt.datetime.fromisoformat(row["completed_at"]).timestamp(), -1))
    peak = current = 0
    for _, change in sorted(edges, key=lambda edge: (edge[0], edge[1])):
        current += change
        peak = max(peak, current)
    return peak


def _worker_children() -> list[int]:
    """This process's rollout worker children, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[-1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if ppid == os.getpid() and WORKER_MODULE.encode() in cmdline:
            found.append(int(entry.name))
    return found


def test_worker_count_follows_concurrency_cpus_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    monkeypatch.setattr("eval_pipelines.service.workers.available_cpus", lambda: 2)
    assert [rollout_workers(p) for p in (1, 8, 50, 63, 64, 128, 200)] == [1, 1, 1, 1, 1, 2, 2]
    assert rollout_workers(50, 3) == 3 and rollout_workers(2, 8) == 2  # never more processes than slots
    monkeypatch.setenv(WORKERS_ENV, "1")
    assert rollout_workers(200) == 1
    monkeypatch.setenv(WORKERS_ENV, "two")
    with pytest.raises(ValueError, match=f"{WORKERS_ENV} must be a whole number"):
        rollout_workers(50)
    monkeypatch.setenv(WORKERS_ENV, "0")
    with pytest.raises(ValueError, match=f"{WORKERS_ENV} must be at least 1"):
        rollout_workers(50)


def test_a_worker_process_starts_without_the_web_stack() -> None:
    """A rollout worker serves no HTTP: importing FastAPI (through the simulated endpoint) was a fifth of its start,
    which every rollout of a run's first wave in that worker waits for."""
    import subprocess
    import sys

    web = "('fastapi', 'uvicorn', 'starlette')"
    code = f"import sys, {WORKER_MODULE}; print(sorted(m for m in {web} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()

    assert loaded == "[]"


def test_slots_are_split_evenly_and_every_share_is_used() -> None:
    assert split_parallel(50, 2) == [25, 25]
    assert split_parallel(5, 2) == [3, 2]
    assert split_parallel(7, 3) == [3, 2, 2]
    assert sum(split_parallel(200, 3)) == 200


def test_a_job_keeps_its_keys_on_the_wire_and_out_of_its_repr(tmp_path: Path) -> None:
    # A worker calls the endpoint as given: credentials in the base_url travel with the job, like the key.
    config = ModelConfig(model="m", provider="custom", base_url="http://u:pw-77@127.0.0.1:1/v1?k=q", api_key=CANARY)
    job = WorkerJob(tmp_path / "s.sqlite3", tmp_path, tmp_path, "run_x", config, config, 3, 30.0,
                    {"email": "http://127.0.0.1:2/email"}, 123)  # fmt: skip
    assert CANARY not in repr(job)
    back = WorkerJob.from_wire(job.to_wire())
    assert back.model_config.reveal_api_key() == CANARY and back.user_model_config is not None
    assert back.model_config.base_url == config.base_url and "pw-77" not in repr(job)
    assert (back.max_parallel, back.tool_server_urls, back.parent_pid) == (3, job.tool_server_urls, 123)


@pytest.mark.slow
def test_a_spread_run_runs_each_rollout_once_within_max_parallel(tmp_path: Path, slow_model: str) -> None:
    service, request, run_id = _launch_spread(tmp_path, slow_model, tasks=6, name="spread")
    reported: list[Rollout] = []
    seen_children: list[int] = []
    exposed: list[str] = []

    def watch() -> None:
        # While the run lasts, the key must not be visible on a worker's command line or in its environment.
        while not finished.is_set():
            seen_children.extend(pid for pid in _worker_children() if pid not in seen_children)
            for pid in seen_children:
                for name in ("cmdline", "environ"):
                    with contextlib.suppress(OSError):
                        if CANARY.encode() in (Path(f"/proc/{pid}") / name).read_bytes():
                            exposed.append(f"{pid}/{name}")
            time.sleep(0.05)

    finished = threading.Event()
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run = service.complete_run(run_id, request, progress=reported.append)
    finally:
        finished.set()
        watcher.join(10)

    assert (run.total, run.completed) == (12, 12)
    rollouts = service.list_rollouts(run_id)
    assert all(r.status == RolloutStatus.COMPLETED and r.result and r.result.success for r in rollouts)
    assert sorted(r.rollout_id for r in reported) == sorted(r.rollout_id for r in rollouts)  # each heard once
    assert set(_running_events(tmp_path, run_id).values()) == {1}  # each claimed (and run) exactly once
    rows = _rows(tmp_path, run_id)
    assert os.getpid() in {row["runner_pid"] for row in rows} and len({row["runner_pid"] for row in rows}) == 2
    assert seen_children, "no worker process was started"
    assert exposed == []
    assert _peak_overlap(rows) <= 4
    assert not [path for path in tmp_path.rglob("*") if path.is_file() and CANARY.encode() in plain_bytes(path)]


@pytest.mark.slow
def test_a_worker_killed_mid_run_costs_only_its_rollouts(tmp_path: Path, slow_model: str) -> None:
    service, request, run_id = _launch_spread(tmp_path, slow_model, tasks=5, name="killed")
    killed: list[int] = []

    def kill_a_busy_worker() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            busy = {row["runner_pid"] for row in _rows(tmp_path, run_id) if row["status"] == "running"}
            victims = [pid for pid in _worker_children() if pid in busy]
            if victims:
                os.kill(victims[0], signal.SIGKILL)
                killed.append(victims[0])
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_a_busy_worker)
    killer.start()
    run = service.complete_run(run_id, request)
    killer.join(30)

    assert killed, "no worker was seen running a rollout"
    rows = _rows(tmp_path, run_id)
    assert all(row["status"] in {"completed", "failed"} for row in rows)  # nothing left running or pending
    lost = [row for row in rows if row["status"] == "failed"]
    assert lost and all(row["runner_pid"] == killed[0] for row in lost)
    assert {row["termination_reason"] for row in lost} == {TerminationReason.SERVER_RESTART.value}
    assert run.completed == 10 - len(lost)

    # A resume re-queues what the dead worker lost; the same run then completes in full.
    assert service.executor.resume(run_id) == len(lost)
    again = service.complete_run(run_id, request)
    assert (again.total, again.completed) == (10, 10)


def test_a_run_s_rollouts_run_with_what_was_alive_at_its_start_out_of_the_collector_s_scans(
    tmp_path: Path, slow_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipelines.service.rollout_job import RolloutJob

    service, request, run_id = _launch_spread(tmp_path, slow_model, tasks=1, name="frozen")
    service.executor.workers = 1
    alive_at_start = [["before the run"]]
    frozen_while_running: list[bool] = []
    run_one = RolloutJob.run

    async def spying(self: RolloutJob, rollout: Any) -> None:
        frozen_while_running.append(is_frozen(alive_at_start))
        await run_one(self, rollout)

    monkeypatch.setattr(RolloutJob, "run", spying)
    # The module's model server is an outer block; earlier tests' runs may have used its nested freezes.
    monkeypatch.setattr(aio, "MAX_NESTED_FREEZES", 1_000_000)
    run = asyncio.run(service.executor.execute(run_id, request.model_config_, max_parallel=request.max_parallel))
    assert run.completed == 2
    # Frozen by the run itself (plain asyncio.run here; the model server froze only what was alive before it).
    assert frozen_while_running == [True, True]


def _soft_open_files_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError(f"no open-file limit for {pid}")


def test_this_process_runs_only_its_share_while_a_worker_starts_and_the_worker_inherits_the_raised_limit(
    tmp_path: Path, slow_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long rollouts lent to this process while the worker started would stay here for their whole length.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(soft + 64, hard)
    monkeypatch.setattr("eval_pipelines.service.executor.open_files_needed", lambda concurrency: wanted)
    service, request, run_id = _launch_spread(tmp_path, slow_model, tasks=6, name="own-share")
    limits: dict[int, int] = {}
    finished = threading.Event()

    def watch() -> None:
        while not finished.is_set():
            for pid in _worker_children():
                with contextlib.suppress(OSError, AssertionError):
                    limits.setdefault(pid, _soft_open_files_limit(pid))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run = service.complete_run(run_id, request)
    finally:
        finished.set()
        watcher.join(10)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert (run.total, run.completed) == (12, 12)
    rows = _rows(tmp_path, run_id)
    mine = [row for row in rows if row["runner_pid"] == os.getpid()]
    assert mine and len(mine) < len(rows)  # the worker ran the rest
    assert _peak_overlap(mine) <= 2  # this process's share of max_parallel 4 over 2 processes
    assert _peak_overlap(rows) <= 4
    assert limits and set(limits.values()) == {wanted}


def test_a_worker_that_never_starts_leaves_its_share_to_this_process(
    tmp_path: Path, slow_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("eval_pipelines.service.workers.WORKER_MODULE", "eval_pipelines.no_such_worker_module")
    service, request, run_id = _launch_spread(tmp_path, slow_model, tasks=4, name="no-worker")
    run = service.complete_run(run_id, request)
    assert (run.total, run.completed) == (8, 8)
    rows = _rows(tmp_path, run_id)
    assert {row["runner_pid"] for row in rows} == {os.getpid()}
    assert 2 < _peak_overlap(rows) <= 4  # the share the worker never took, used here


def test_a_run_s_connection_pools_and_limiter_follow_its_max_parallel(
    tmp_path: Path, slow_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipelines.engine.clients import ChatClientPool
    from eval_pipelines.toolservers.admin import DEFAULT_MAX_CONNECTIONS, ToolServerAdmin

    seen: dict[str, int] = {}

    class RecordingClients(ChatClientPool):
        def for_model(self, config: ModelConfig) -> Any:
            client = super().for_model(config)
            seen["limiter"] = client.limiter.stats().maximum
            seen["chat_connections"] = client._pool._transport.max_connections if client._pool else 0
            return client

    class RecordingAdmin(ToolServerAdmin):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            seen["tool_connections"] = self.max_connections

    monkeypatch.setattr("eval_pipelines.service.executor.ChatClientPool", RecordingClients)
    monkeypatch.setattr("eval_pipelines.service.executor.ToolServerAdmin", RecordingAdmin)
    service = SpreadRun(tmp_path)
    service.executor.workers = 1
    parallel = DEFAULT_MAX_CONNECTIONS + 3
    request = _request(slow_model, tasks=1, rollout_count=1, max_parallel=parallel, name="pools")
    run = service.complete_run(service.executor.launch(request).run_id, request)
    assert run.completed == 1
    assert seen == {"limiter": parallel, "chat_connections": parallel, "tool_connections": parallel}


def test_a_process_running_rollouts_collects_cycles_less_often_and_never_lowers_a_tuned_threshold(
    tmp_path: Path, slow_model: str
) -> None:
    import gc

    from eval_pipelines.service.executor import ROLLOUT_GC_THRESHOLDS

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        service = SpreadRun(tmp_path)
        service.executor.workers = 1
        request = _request(slow_model, tasks=1, rollout_count=1, max_parallel=2, name="gc")
        assert service.complete_run(service.executor.launch(request).run_id, request).completed == 1
        assert gc.get_threshold() == ROLLOUT_GC_THRESHOLDS
        tuned = (ROLLOUT_GC_THRESHOLDS[0] * 2, 5, 5)
        gc.set_threshold(*tuned)
        again = _request(slow_model, tasks=1, rollout_count=1, max_parallel=2, name="gc-tuned")
        assert service.complete_run(service.executor.launch(again).run_id, again).completed == 1
        assert gc.get_threshold() == tuned
    finally:
        gc.set_threshold(*before)
