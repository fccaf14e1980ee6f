"""Launch, execute, cancel and resume runs over the store and the rollout engine.

The local HTTP service and the embedded pipeline backend both drive runs through this one class.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.lib.aio import startup_objects_frozen
from eval_pipelines.lib.open_files import open_files_needed, raise_open_files_limit
from eval_pipelines.lib.slots import SlotPool
from eval_pipelines.schemas.artifacts import RunArtifacts, UnreadableArtifacts
from eval_pipelines.schemas.limits import DEFAULT_MAX_ROLLOUTS_PER_RUN
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import (
    DEFAULT_ROLLOUT_TIMEOUT_SECONDS,
    DEFAULT_VERIFIER_TIMEOUT_SECONDS,
    MSG_CANCELLED,
    Rollout,
    RolloutLaunchItem,
    RolloutStatus,
    Run,
    RunLaunchRequest,
    RunLaunchResponse,
    TerminationReason,
)
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.service.layout import rollout_artifacts_path
from eval_pipelines.service.rollout_job import (
    InvalidRequest,
    ProgressBuffer,
    RolloutJob,
    RunSettings,
    apply_override,
)
from eval_pipelines.service.store import NewRollout, Runner, RunStore
from eval_pipelines.service.workers import WorkerJob, WorkerProcess, rollout_workers, split_parallel
from eval_pipelines.toolservers.admin import DEFAULT_MAX_CONNECTIONS, ToolServerAdmin
from eval_pipelines.verifiers.isolation import VerifierLease, VerifierPool

logger = logging.getLogger(__name__)

DEFAULT_MAX_PARALLEL = 8
#: How often an executing run looks for a cancel request made by another process.
CANCEL_POLL_SECONDS = 1.0
#: How often a run spread over worker processes reports the rollouts they finished.
PROGRESS_POLL_SECONDS = 0.5
#: How long a rollout's phase and step events may wait in memory before they are written.
PROGRESS_FLUSH_SECONDS = 0.25
#: The cyclic collector's thresholds in a process running rollouts. A rollout in flight holds its objects (its
#: transcript, its seeded state) for as long as its model calls take, seconds each, so they outlive the young
#: generations; at Python's default (a collection every 700 allocations) the collector re-scanned them over and
#: over and its full collections walked every rollout in flight: 5.5 of 19 CPU-ms a rollout at 500 in flight
#: with 2 s calls, 1.7 with these.
ROLLOUT_GC_THRESHOLDS = (20_000, 20, 20)


class NotFound(LookupError):
    """A run, rollout, scenario or task does not exist (404)."""


class ToolRuntime(Protocol):
    """Where a run's tool servers listen and how its model configs are resolved (`LocalRuntime`, or a
    rollout worker's copy of its parent's)."""

    def start(self) -> object: ...

    def tool_server_urls(self) -> dict[str, str]: ...

    def resolve(self, config: ModelConfig) -> ModelConfig: ...


def collect_less_often() -> None:
    """Raise the collector's thresholds to `ROLLOUT_GC_THRESHOLDS` for the rest of this process's life (never
    lower them: the process was tuned by someone else)."""
    if gc.get_threshold()[0] < ROLLOUT_GC_THRESHOLDS[0]:
        gc.set_threshold(*ROLLOUT_GC_THRESHOLDS)


async def _flush_periodically(progress: ProgressBuffer) -> None:
    while True:
        await asyncio.sleep(PROGRESS_FLUSH_SECONDS)
        progress.flush()


class _FinishedReporter:
    """Tells `on_rollout_done` of each rollout of a spread run once, whichever process finished it: this
    process's as they finish, the workers' by polling the store."""

    def __init__(self, store: RunStore, run_id: str, on_rollout_done: Callable[[Rollout], None] | None) -> None:
        self.store = store
        self.run_id = run_id
        self.on_rollout_done = on_rollout_done
        self.reported: set[str] = set()

    def report(self, rollout: Rollout) -> None:
        if rollout.rollout_id not in self.reported:
            self.reported.add(rollout.rollout_id)
            if self.on_rollout_done is not None:
                self.on_rollout_done(rollout)

    def report_finished(self) -> None:
        for rollout in self.store.finished_rollouts(self.run_id, exclude=self.reported):
            self.report(rollout)

    async def poll(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_POLL_SECONDS)
            self.report_finished()


class RunExecutor:
    def __init__(
        self,
        store: RunStore,
        catalog: ScenarioCatalog,
        runtime: ToolRuntime,
        artifacts_dir: Path,
        *,
        max_rollouts_per_run: int = DEFAULT_MAX_ROLLOUTS_PER_RUN,
        workers: int | None = None,
    ) -> None:
        self.store = store
        #: processes a run's rollouts are spread over; None decides by max_parallel (see service/workers.py).
        self.workers = workers
        self.max_rollouts_per_run = max_rollouts_per_run
        self.catalog = catalog
        self.runtime = runtime
        self.artifacts_dir = artifacts_dir
        self.runner = Runner.current()
        self._cancel_events: dict[str, asyncio.Event] = {}
        #: Contained verifier workers, one per package, shared by every run this executor runs (`close()`).
        self.verifiers = VerifierPool()

    # -- launch / resume / cancel -----------------------------------------------------------------------
    def scenario(self, scenario_id: str) -> ScenarioFiles:
        try:
            return self.catalog.get(scenario_id)
        except KeyError:
            self.catalog.refresh()
            try:
                return self.catalog.get(scenario_id)
            except KeyError:
                raise NotFound(f"scenario {scenario_id!r} not found") from None

    def launch(self, request: RunLaunchRequest) -> RunLaunchResponse:
        total = len(request.task_ids) * request.rollout_count
        if total > self.max_rollouts_per_run:
            raise InvalidRequest(
                f"the run would hold {total} rollouts (task_ids x rollout_count); the limit is "
                f"{self.max_rollouts_per_run}: split it into several runs"
            )
        scenario = self.scenario(request.scenario_id)
        tasks = scenario.tasks()
        unknown = [t for t in request.task_ids if t not in tasks]
        if unknown:
            raise InvalidRequest(f"task_ids not in scenario {scenario.scenario_id!r}: {unknown}")
        unrunnable = {t: reason for t in request.task_ids if (reason := tasks[t].unrunnable_reason)}
        if unrunnable:
            raise InvalidRequest(f"task_ids that cannot run here: {unrunnable}")
        for task_id in request.task_ids:
            task, _ = apply_override(tasks[task_id], request.task_overrides.get(task_id))  # validates task_json early
            if task_id in request.task_overrides:
                _check_override_seeds(scenario, task)
        run_id = f"run_{uuid.uuid4().hex}"
        config = request.model_config_
        new = [
            NewRollout(f"ro_{uuid.uuid4().hex}", task_id, index, config.max_steps)
            for task_id in request.task_ids
            for index in range(request.rollout_count)
        ]
        self.store.create_run(
            run_id=run_id,
            run_name=request.run_name,
            scenario_id=scenario.scenario_id,
            source=request.source.value,
            request=request.model_dump(mode="json", by_alias=True),
            model_config=config.echo(),
            rollouts=new,
        )
        run = self.store.get_run(run_id)
        assert run is not None
        items = [
            RolloutLaunchItem(
                rollout_id=r.rollout_id, scenario_id=scenario.scenario_id, task_id=r.task_id, run_id=run_id
            )
            for r in new
        ]
        return RunLaunchResponse(run_id=run_id, run_status=run, rollouts=items)

    def resume(self, run_id: str, *, retry_failed: bool = True) -> int:
        """Clear a cancel request and re-queue what did not complete; returns how many rollouts were re-queued."""
        if self.store.get_run(run_id) is None:
            raise NotFound(f"run {run_id!r} not found")
        self.store.request_cancel(run_id, requested=False)
        return self.store.requeue_unfinished(run_id, retry_failed=retry_failed)

    def cancel(self, run_id: str) -> int:
        """Signal active rollouts and fail pending ones; returns how many rollouts were cancelled.

        The request is also persisted, so an executor in another process stops the run within a second.
        """
        if self.store.get_run(run_id) is None:
            raise NotFound(f"run {run_id!r} not found")
        self.store.request_cancel(run_id)
        active = self.store.list_rollouts(run_id=run_id, status=RolloutStatus.RUNNING.value, with_events=False)
        event = self._cancel_events.get(run_id)
        if event is not None:
            event.set()
        pending = [r.rollout_id for r in self.store.pending_slots(run_id)]
        failed_pending = self.store.fail_pending(pending, TerminationReason.CANCELLED, MSG_CANCELLED)
        return len(active) + failed_pending

    def delete(self, run_id: str) -> int:
        """Remove the run, its rollouts and their artifact files; returns how many rollouts were removed."""
        deleted = self.store.delete_run(run_id)
        if deleted is None:
            raise NotFound(f"run {run_id!r} not found")
        shutil.rmtree(self.artifacts_dir / run_id, ignore_errors=True)
        return deleted

    def close(self) -> None:
        """Stop the verifier workers (blocking: each gets a moment to stop)."""
        self.verifiers.close()

    def fail_own_interrupted(self) -> int:
        """On shutdown: this executor's rollouts that were stopped mid-way are failed (resumable later)."""
        return self.store.fail_interrupted(runner=self.runner)

    # -- execution --------------------------------------------------------------------------------------
    @staticmethod
    def _verifiers_dir(scenario: ScenarioFiles) -> Path | None:
        """The scenario's verifier package, never imported here: verifier code runs only in contained workers."""
        directory = scenario.verifiers_dir
        return directory if (directory / "__init__.py").is_file() else None

    def artifacts_path(self, run_id: str, rollout_id: str) -> Path:
        return rollout_artifacts_path(self.artifacts_dir, run_id, rollout_id)

    async def execute(
        self,
        run_id: str,
        model_config: ModelConfig,
        *,
        max_parallel: int | None = None,
        timeout_seconds: float = DEFAULT_ROLLOUT_TIMEOUT_SECONDS,
        on_rollout_done: Callable[[Rollout], None] | None = None,
        user_model_config: ModelConfig | None = None,
        simulator_judge_config: ModelConfig | None = None,
    ) -> Run:
        """Execute every pending rollout of the run, at most `max_parallel` at once, and return the run.

        `user_model_config` plays the tasks' simulated users, `simulator_judge_config` judges whether they (and the
        NPCs) followed their instructions; the configs carry keys, so they are passed in
        (the store holds only their key-less echo). At high `max_parallel` the rollouts are spread over
        worker processes (see service/workers.py); `on_rollout_done` still hears of every one, here.
        """
        run = self.store.get_run(run_id)
        if run is None:
            raise NotFound(f"run {run_id!r} not found")
        request = self.store.run_request(run_id) or {}
        parallel = max_parallel or request.get("max_parallel") or DEFAULT_MAX_PARALLEL
        timeout_seconds = request.get("rollout_timeout_seconds") or timeout_seconds
        resolved = self.runtime.resolve(model_config)
        resolved_user = None if user_model_config is None else self.runtime.resolve(user_model_config)
        judge = None if simulator_judge_config is None else self.runtime.resolve(simulator_judge_config)
        shares = split_parallel(parallel, rollout_workers(parallel, self.workers))
        # Before any worker starts: they inherit it, and each needs room for its own share's sockets.
        raise_open_files_limit(open_files_needed(max(shares)))
        if len(shares) == 1:
            await self.execute_share(
                run, request, resolved, resolved_user, SlotPool(parallel), timeout_seconds, on_rollout_done, judge
            )
        else:
            await self._execute_spread(
                run, request, resolved, resolved_user, shares, timeout_seconds, on_rollout_done, judge
            )
        # The run's writes (several transactions per rollout) leave a log of whole pages; a finished run
        # leaves only its rows. On a thread of its own: emptying the log may wait a moment for readers, and the
        # run is done.
        self.store.checkpoint_soon()
        final = self.store.get_run(run_id)
        assert final is not None
        return final

    async def _execute_spread(
        self,
        run: Run,
        request: dict[str, Any],
        model_config: ModelConfig,
        user_model_config: ModelConfig | None,
        shares: list[int],
        timeout_seconds: float,
        on_rollout_done: Callable[[Rollout], None] | None,
        simulator_judge_config: ModelConfig | None = None,
    ) -> None:
        """One worker process per share after the first. This process starts at once with its own share; each
        worker gets its share when it is ready (or, should it exit first, this process takes the share), so the
        total never exceeds the run's `max_parallel`. Lending a starting worker's share to this process instead
        would hold it for whole rollouts: with model calls of seconds, a first wave of them all in this process,
        its loop saturated while the worker stood idle."""
        reporter = _FinishedReporter(self.store, run.run_id, on_rollout_done)
        slots = SlotPool(shares[0], capacity=sum(shares))

        async def hand_over_when_ready(worker: WorkerProcess, share: int) -> None:
            if await worker.ready():
                for _ in range(share):
                    worker.grant()
            else:
                slots.grant(share)

        urls = self.runtime.tool_server_urls()
        workers: list[WorkerProcess] = []
        background: list[asyncio.Task[None]] = []
        if on_rollout_done is not None:
            background.append(asyncio.create_task(reporter.poll()))
        try:
            for share in shares[1:]:
                job = WorkerJob(self.store.path, self.artifacts_dir, self.catalog.root, run.run_id, model_config,
                                user_model_config, share, timeout_seconds, urls, os.getpid(),
                                simulator_judge_config)  # fmt: skip
                worker = await WorkerProcess.start(job)
                workers.append(worker)
                background.append(asyncio.create_task(hand_over_when_ready(worker, share)))
            judge = simulator_judge_config
            await self.execute_share(
                run, request, model_config, user_model_config, slots, timeout_seconds, reporter.report, judge
            )
            for worker in workers:
                worker.no_more_grants()  # this process is done: each worker may use its whole share now
            for worker, code in zip(workers, await asyncio.gather(*(w.wait() for w in workers)), strict=True):
                if code != 0:
                    logger.warning("run %s: rollout worker %d exited with status %d", run.run_id, worker.pid, code)
        finally:
            for worker in workers:
                await worker.terminate()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            # A worker that died mid-rollout left it running: fail it with the reason (a resume re-queues it).
            if interrupted := self.store.fail_interrupted(run_id=run.run_id):
                logger.warning("run %s: %d rollouts failed with their worker process", run.run_id, interrupted)
            if on_rollout_done is not None:
                reporter.report_finished()

    async def execute_share(
        self,
        run: Run,
        request: dict[str, Any],
        resolved: ModelConfig,
        resolved_user: ModelConfig | None,
        slots: SlotPool,
        timeout_seconds: float,
        on_rollout_done: Callable[[Rollout], None] | None,
        simulator_judge_config: ModelConfig | None = None,
    ) -> None:
        """Run pending rollouts of the run in this process, each holding one of `slots` (a worker process's
        slots arrive from its parent). Another process may claim some of them first: those are skipped."""
        run_id = run.run_id
        parallel = max(slots.capacity, 1)
        scenario = self.scenario(run.scenario_id)
        collect_less_often()
        cancel = asyncio.Event()
        if self.store.cancel_requested(run_id):
            cancel.set()
        self._cancel_events[run_id] = cancel
        clients = ChatClientPool(max_concurrency=parallel)
        admin = ToolServerAdmin(max_connections=max(parallel, DEFAULT_MAX_CONNECTIONS))
        verifiers_dir = self._verifiers_dir(scenario)
        verifiers: VerifierLease | None = None
        if verifiers_dir is not None:
            timeout = request.get("verifier_timeout_seconds") or DEFAULT_VERIFIER_TIMEOUT_SECONDS
            verifiers = await asyncio.to_thread(self.verifiers.lease, verifiers_dir, timeout)
            if verifiers.needs_warming:
                # While the first rollouts provision and run their agents, not when their verdicts are due.
                threading.Thread(target=verifiers.warm, name="warm-verifier-worker", daemon=True).start()
        job = RolloutJob(
            run_id=run_id,
            scenario=scenario,
            settings=RunSettings.of(request),
            model_config=resolved,
            user_model_config=resolved_user,
            simulator_judge_config=simulator_judge_config,
            tool_server_urls=scenario.tool_server_urls(self.runtime.tool_server_urls()),
            verifiers_dir=verifiers_dir,
            timeout_seconds=timeout_seconds,
            store=self.store,
            runner=self.runner,
            engine=RolloutEngine(clients, admin, background_cleanup=True, verifier_pool=verifiers),
            progress=ProgressBuffer(self.store),
            slots=slots,
            cancel=cancel,
            artifacts_path=self.artifacts_path,
            on_rollout_done=on_rollout_done,
        )
        background = [
            asyncio.create_task(self._watch_for_cancel_request(run_id, cancel)),
            asyncio.create_task(_flush_periodically(job.progress)),
        ]
        pending = iter(self.store.pending_slots(run_id))

        async def drive() -> None:
            # One driver per slot, each taking the next pending rollout: a 10,000-rollout run holds a few
            # dozen coroutines, not 10,000.
            for rollout in pending:
                await job.run(rollout)

        try:
            with startup_objects_frozen():
                await asyncio.gather(*(drive() for _ in range(parallel)))
        finally:
            for task in background:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            job.progress.flush()
            await job.engine.drain()
            await clients.aclose()
            await admin.aclose()
            if verifiers is not None:
                verifiers.release()  # the worker stays up for the package's next run
            if self._cancel_events.get(run_id) is cancel:
                del self._cancel_events[run_id]

    async def _watch_for_cancel_request(self, run_id: str, cancel: asyncio.Event) -> None:
        """A cancel asked of another process (through the store) reaches this one within a poll."""
        while not cancel.is_set():
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            if self.store.cancel_requested(run_id):
                cancel.set()

    def load_artifacts(self, rollout_id: str) -> RunArtifacts:
        """Artifacts of a finished rollout; NotFound while it is unknown or still in progress, or when its file
        cannot be read."""
        found = self.store.artifacts_path(rollout_id)
        if found is None:
            raise NotFound(f"rollout {rollout_id!r} not found")
        status, path = found
        if not status.is_terminal or not path or not Path(path).is_file():
            raise NotFound(f"artifacts of rollout {rollout_id!r} are not available yet (status {status.value})")
        try:
            # Stored compressed (or as plain JSON before that); the wire carries the decompressed record.
            return RunArtifacts.load(path)
        except (OSError, UnreadableArtifacts) as exc:
            # An unreadable file answers as a missing one does (the collector records the rollout without a trace
            # rather than failing the whole step); the cause, which names a server path, stays in the log.
            logger.warning("artifacts of rollout %s cannot be read: %s", rollout_id, exc)
            message = f"artifacts of rollout {rollout_id!r} are stored but cannot be read (see the service log)"
            raise NotFound(message) from exc


def _check_override_seeds(scenario: ScenarioFiles, task: Task) -> None:
    """An overriding task's seed files resolve inside the scenario, as a scenario file's must: refused at launch
    (400 naming the field), not found out at provisioning as a retried tool-server error."""
    for server, names in task.seed_data.items():
        for index, name in enumerate(names):
            try:
                scenario.seed_path(name)
            except ValueError as exc:
                raise InvalidRequest(
                    f"task_overrides.{task.task_id}.task_json.seed_data.{server}[{index}]: {exc}"
                ) from None
