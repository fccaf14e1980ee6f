"""Launch, execute, cancel and resume runs over the store and the rollout engine.

The local HTTP service and the embedded pipeline backend both drive runs through this one class.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutOutcome, RolloutSpec
from eval_pipelines.lib.slots import SlotPool
from eval_pipelines.scenarios.catalog import ScenarioCatalog, ScenarioError, ScenarioFiles
from eval_pipelines.schemas._base import utc_now_iso
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import (
    DEFAULT_ERROR_RETRIES,
    DEFAULT_ERROR_RETRY_BACKOFF_SECONDS,
    DEFAULT_ROLLOUT_TIMEOUT_SECONDS,
    DEFAULT_VERIFIER_TIMEOUT_SECONDS,
    MSG_CANCELLED,
    MSG_COST_CEILING,
    AttemptError,
    ErrorClass,
    Rollout,
    RolloutLaunchItem,
    RolloutPhase,
    RolloutResult,
    RolloutStatus,
    Run,
    RunLaunchRequest,
    RunLaunchResponse,
    TaskOverride,
    TerminationReason,
)
from eval_pipelines.schemas.scenarios import NpcProfile, Task
from eval_pipelines.service.layout import rollout_artifacts_path
from eval_pipelines.service.store import NewRollout, ProgressEvent, Runner, RunStore
from eval_pipelines.service.workers import WorkerJob, WorkerProcess, rollout_workers, split_parallel
from eval_pipelines.toolservers.admin import DEFAULT_MAX_CONNECTIONS, ToolServerAdmin
from eval_pipelines.verifiers.isolation import VerifierPool

logger = logging.getLogger(__name__)

DEFAULT_MAX_PARALLEL = 8
#: len(task_ids) x rollout_count of one run; a larger launch is refused before anything is allocated.
DEFAULT_MAX_ROLLOUTS_PER_RUN = 10_000
#: How often an executing run looks for a cancel request made by another process.
CANCEL_POLL_SECONDS = 1.0
#: How often a run spread over worker processes reports the rollouts they finished.
PROGRESS_POLL_SECONDS = 0.5
#: Characters of an errored attempt's message kept in the rollout's `attempt_errors`.
ATTEMPT_MESSAGE_CHARS = 500
#: How long a rollout's phase and step events may wait in memory before they are written.
PROGRESS_FLUSH_SECONDS = 0.25


class NotFound(LookupError):
    """A run, rollout, scenario or task does not exist (404)."""


class InvalidRequest(ValueError):
    """The request is well-formed but refers to things that do not exist or do not fit (400)."""


def apply_override(task: Task, override: TaskOverride | None) -> tuple[Task, dict[str, Any]]:
    """The task as this rollout runs it, plus metadata the override carries into the artifacts."""
    if override is None:
        return task, {}
    if override.task_json is not None:
        try:
            task = Task.model_validate({**override.task_json, "task_id": task.task_id})
        except ValidationError as exc:
            raise InvalidRequest(f"task_overrides.{task.task_id}.task_json: {exc.errors()[0]['msg']}") from exc
    updates = {k: v for k, v in (("name", override.name), ("description", override.description)) if v is not None}
    if updates:
        task = task.model_copy(update=updates)
    extra: dict[str, Any] = {}
    if override.rubric_markdown is not None:
        extra["rubric_markdown"] = override.rubric_markdown
    if override.client_context is not None:
        extra["client_context"] = override.client_context
    return task, extra


def _failed_outcome(
    task: Task, status: RolloutStatus, reason: TerminationReason, message: str, error_class: ErrorClass
) -> RolloutOutcome:
    """The outcome of a rollout that could not run (or be recorded), with the reason in its artifacts."""
    artifacts = RunArtifacts(task_id=task.task_id, task=task.description)
    artifacts.set_error(message)
    result = RolloutResult(message=message, termination_reason=reason.value, error_class=error_class)
    return RolloutOutcome(status, reason, result, artifacts)


def retry_delay(backoff_seconds: float, attempt: int) -> float:
    """Wait before attempt `attempt + 1`: exponential in the attempts made, with half of it jittered so that
    rollouts that failed together (one endpoint outage) do not come back together."""
    delay = backoff_seconds * 2 ** (attempt - 1)
    return delay / 2 + random.uniform(0, delay / 2)


async def _wait_unless_cancelled(seconds: float, cancel: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(cancel.wait(), timeout=seconds)


def npc_profiles_of(scenario: ScenarioFiles, task: Task) -> tuple[NpcProfile, ...]:
    """The scenario's full profiles (with public_info) of the task's NPCs, which the listing of a task omits."""
    full = {npc.profile_id: npc for npc in scenario.npcs}
    return tuple(full.get(p.profile_id, p) for p in task.npc_profiles)


class ToolRuntime(Protocol):
    """Where a run's tool servers listen and how its model configs are resolved (`LocalRuntime`, or a
    rollout worker's copy of its parent's)."""

    def start(self) -> object: ...

    def tool_server_urls(self) -> dict[str, str]: ...

    def resolve(self, config: ModelConfig) -> ModelConfig: ...


class ProgressBuffer:
    """Phase and step events of this process's rollouts, written together: one transaction per flush instead
    of one per event keeps the store's write lock (shared with worker processes) off the rollouts' path.
    Each event keeps the time it happened; readers see it within `PROGRESS_FLUSH_SECONDS`."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._events: list[ProgressEvent] = []

    def add(self, event: ProgressEvent) -> None:
        self._events.append(event)

    def flush(self) -> None:
        events, self._events = self._events, []
        self.store.record_progress(events)


class RollingObserver:
    """Records the engine's phases and steps as status events (through the process's `ProgressBuffer`)."""

    def __init__(self, progress: ProgressBuffer, rollout_id: str) -> None:
        self.progress = progress
        self.rollout_id = rollout_id

    def phase(self, phase: RolloutPhase, detail: str | None = None) -> None:
        self.progress.add(ProgressEvent.of_phase(self.rollout_id, phase, detail))

    def step(self, steps_taken: int) -> None:
        self.progress.add(ProgressEvent.of_step(self.rollout_id, steps_taken))


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
        for task_id in request.task_ids:
            apply_override(tasks[task_id], request.task_overrides.get(task_id))  # validates task_json early
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
        active = self.store.list_rollouts(run_id=run_id, status=RolloutStatus.RUNNING.value)
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
    ) -> Run:
        """Execute every pending rollout of the run, at most `max_parallel` at once, and return the run.

        `user_model_config` plays the tasks' simulated users; the configs carry keys, so they are passed in
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
        shares = split_parallel(parallel, rollout_workers(parallel, self.workers))
        if len(shares) == 1:
            await self.execute_share(
                run, request, resolved, resolved_user, SlotPool(parallel), timeout_seconds, on_rollout_done
            )
        else:
            await self._execute_spread(run, request, resolved, resolved_user, shares, timeout_seconds, on_rollout_done)
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
    ) -> None:
        """One worker process per share after the first. This process starts with every slot and hands each
        worker its share once the worker is ready, so start-up costs no concurrency and the total never
        exceeds the run's `max_parallel`."""
        reported: set[str] = set()

        def report(rollout: Rollout) -> None:
            if rollout.rollout_id not in reported:
                reported.add(rollout.rollout_id)
                if on_rollout_done is not None:
                    on_rollout_done(rollout)

        def report_finished() -> None:
            for rollout in self.store.finished_rollouts(run.run_id, exclude=reported):
                report(rollout)

        async def report_workers_progress() -> None:
            while True:
                await asyncio.sleep(PROGRESS_POLL_SECONDS)
                report_finished()

        slots = SlotPool(sum(shares))

        async def hand_over_when_ready(worker: WorkerProcess, share: int) -> None:
            if await worker.ready():
                slots.hand_over(share, worker.grant)

        urls = self.runtime.tool_server_urls()
        workers: list[WorkerProcess] = []
        background: list[asyncio.Task[None]] = []
        if on_rollout_done is not None:
            background.append(asyncio.create_task(report_workers_progress()))
        try:
            for share in shares[1:]:
                job = WorkerJob(self.store.path, self.artifacts_dir, self.catalog.root, run.run_id, model_config,
                                user_model_config, share, timeout_seconds, urls, os.getpid())  # fmt: skip
                worker = await WorkerProcess.start(job)
                workers.append(worker)
                background.append(asyncio.create_task(hand_over_when_ready(worker, share)))
            await self.execute_share(run, request, model_config, user_model_config, slots, timeout_seconds, report)
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
                report_finished()

    async def execute_share(
        self,
        run: Run,
        request: dict[str, Any],
        resolved: ModelConfig,
        resolved_user: ModelConfig | None,
        slots: SlotPool,
        timeout_seconds: float,
        on_rollout_done: Callable[[Rollout], None] | None,
    ) -> None:
        """Run pending rollouts of the run in this process, each holding one of `slots` (a worker process's
        slots arrive from its parent). Another process may claim some of them first: those are skipped."""
        run_id = run.run_id
        parallel = max(slots.capacity, 1)
        overrides = {k: TaskOverride.model_validate(v) for k, v in (request.get("task_overrides") or {}).items()}
        scenario = self.scenario(run.scenario_id)
        verifiers_dir = self._verifiers_dir(scenario)
        agent_path = request.get("agent")
        urls = self.runtime.tool_server_urls()
        cancel = asyncio.Event()
        if self.store.cancel_requested(run_id):
            cancel.set()
        self._cancel_events[run_id] = cancel
        clients = ChatClientPool(max_concurrency=parallel)
        admin = ToolServerAdmin(max_connections=max(parallel, DEFAULT_MAX_CONNECTIONS))
        verifiers = VerifierPool(request.get("verifier_timeout_seconds") or DEFAULT_VERIFIER_TIMEOUT_SECONDS)
        engine = RolloutEngine(clients, admin, background_cleanup=True, verifier_pool=verifiers)

        ceiling = request.get("max_cost_usd")
        progress = ProgressBuffer(self.store)
        retries = request.get("error_retries")
        retries = DEFAULT_ERROR_RETRIES if retries is None else int(retries)
        backoff = request.get("error_retry_backoff_seconds")
        backoff = DEFAULT_ERROR_RETRY_BACKOFF_SECONDS if backoff is None else float(backoff)

        async def one(rollout: NewRollout) -> None:
            async with slots:
                if cancel.is_set():
                    return
                if ceiling is not None and (spent := self.store.run_cost_usd(run_id)) >= ceiling:
                    message = MSG_COST_CEILING.format(ceiling=ceiling, spent=spent)
                    if self.store.fail_pending([rollout.rollout_id], TerminationReason.COST_CEILING, message):
                        logger.warning("run %s: %s", run_id, message)
                    return
                if not self.store.claim(rollout.rollout_id, self.runner):
                    return
                task, extra = apply_override(scenario.task(rollout.task_id), overrides.get(rollout.task_id))
                outcome = await attempts(rollout, task, extra)
                if "rubric_markdown" in extra:
                    outcome.artifacts.metadata["rubric_markdown"] = extra["rubric_markdown"]
                target = self.artifacts_path(run_id, rollout.rollout_id)
                path: str | None = str(target)
                try:
                    await asyncio.to_thread(outcome.artifacts.dump, target)
                except OSError as exc:
                    # Without its trace the rollout cannot be verified or audited: record why, keep the others going.
                    outcome = _failed_outcome(
                        task,
                        RolloutStatus.FAILED,
                        TerminationReason.INFRASTRUCTURE_ERROR,
                        f"could not write artifacts to {target}: {exc.strerror or exc}",
                        ErrorClass.INTERNAL,
                    )
                    path = None
                progress.flush()  # the rollout's last phases land before its final status
                self.store.finish(
                    rollout.rollout_id,
                    outcome.status,
                    outcome.result,
                    outcome.termination_reason.value,
                    path,
                )
                if on_rollout_done is not None:
                    done = self.store.get_rollout(rollout.rollout_id)
                    if done is not None:
                        on_rollout_done(done)

        async def attempts(rollout: NewRollout, task: Task, extra: dict[str, Any]) -> RolloutOutcome:
            """Run the rollout; while it ends in a retryable error, wait and run it again, up to the run's
            `error_retries`. A failure by the agent is final at once: retrying it would flatter the model."""
            failed_attempts: list[AttemptError] = []
            while True:
                started_at = utc_now_iso()
                outcome = await attempt_once(rollout, task, extra)
                error_class = outcome.error_class
                if (
                    error_class is None
                    or not error_class.is_retryable
                    or len(failed_attempts) >= retries
                    or cancel.is_set()
                ):
                    break
                failed_attempts.append(
                    AttemptError(
                        attempt=len(failed_attempts) + 1,
                        error_class=error_class,
                        message=outcome.result.message[:ATTEMPT_MESSAGE_CHARS],
                        termination_reason=outcome.termination_reason.value,
                        started_at=started_at,
                        completed_at=utc_now_iso(),
                    )
                )
                progress.add(
                    ProgressEvent.of_phase(
                        rollout.rollout_id,
                        RolloutPhase.BUILDING_ENVIRONMENT,
                        f"attempt {len(failed_attempts) + 1} after a {error_class.value} error",
                    )
                )
                await _wait_unless_cancelled(retry_delay(backoff, len(failed_attempts)), cancel)
            outcome.result.attempts = len(failed_attempts) + 1
            outcome.result.attempt_errors = failed_attempts
            return outcome

        async def attempt_once(rollout: NewRollout, task: Task, extra: dict[str, Any]) -> RolloutOutcome:
            try:
                seed = {ts.name: scenario.seed_payload(task, ts.name) for ts in task.tool_servers}
            except ScenarioError as exc:  # a broken seed file costs the tasks that use it, not the run
                return _failed_outcome(
                    task,
                    RolloutStatus.WORKSPACE_ERROR,
                    TerminationReason.WORKSPACE_ERROR,
                    f"Workspace provisioning failed: {exc}",
                    ErrorClass.TOOL_SERVER,
                )
            spec = RolloutSpec(
                rollout_id=rollout.rollout_id,
                run_id=run_id,
                scenario_id=scenario.scenario_id,
                task=task,
                model_config=resolved,
                tool_server_urls=urls,
                seed=seed,
                verifiers_dir=verifiers_dir,
                timeout_seconds=timeout_seconds,
                rollout_index=rollout.rollout_index,
                client_context=extra.get("client_context"),
                agent_path=agent_path if isinstance(agent_path, str) else None,
                user_model_config=resolved_user,
                npc_profiles=npc_profiles_of(scenario, task),
            )
            try:
                return await engine.execute(spec, RollingObserver(progress, rollout.rollout_id), cancel)
            except Exception as exc:  # an engine bug must cost one rollout, not the run
                logger.exception("rollout %s crashed in the engine", rollout.rollout_id)
                return _failed_outcome(
                    task,
                    RolloutStatus.FAILED,
                    TerminationReason.INFRASTRUCTURE_ERROR,
                    f"Agent execution failed: {type(exc).__name__}: {exc}",
                    ErrorClass.INTERNAL,
                )

        async def watch_for_cancel_request() -> None:
            while not cancel.is_set():
                await asyncio.sleep(CANCEL_POLL_SECONDS)
                if self.store.cancel_requested(run_id):
                    cancel.set()

        async def flush_progress() -> None:
            while True:
                await asyncio.sleep(PROGRESS_FLUSH_SECONDS)
                progress.flush()

        watcher = asyncio.create_task(watch_for_cancel_request())
        flusher = asyncio.create_task(flush_progress())
        pending = iter(self.store.pending_slots(run_id))

        async def drive() -> None:
            # One driver per slot, each taking the next pending rollout: a 10,000-rollout run holds a few
            # dozen coroutines, not 10,000.
            for rollout in pending:
                await one(rollout)

        try:
            await asyncio.gather(*(drive() for _ in range(parallel)))
        finally:
            watcher.cancel()
            flusher.cancel()
            for task in (watcher, flusher):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            progress.flush()
            await engine.drain()
            await clients.aclose()
            await admin.aclose()
            # The verifier workers stop on their own time: the run is over, and its caller must not wait for them.
            threading.Thread(target=verifiers.close, name="close-verifier-workers", daemon=True).start()
            if self._cancel_events.get(run_id) is cancel:
                del self._cancel_events[run_id]

    def load_artifacts(self, rollout_id: str) -> RunArtifacts:
        """Artifacts of a finished rollout; NotFound while it is unknown or still in progress."""
        found = self.store.artifacts_path(rollout_id)
        if found is None:
            raise NotFound(f"rollout {rollout_id!r} not found")
        status, path = found
        if not status.is_terminal or not path or not Path(path).is_file():
            raise NotFound(f"artifacts of rollout {rollout_id!r} are not available yet (status {status.value})")
        return RunArtifacts.model_validate_json(Path(path).read_text(encoding="utf-8"))
