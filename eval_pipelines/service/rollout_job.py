"""One rollout of a run as the service executes it: claim it, honour the cost ceiling and a cancel, run it with
error retries, write its artifacts and record its outcome. `RunExecutor.execute_share` drives many of these.

Errors and failures are kept apart here: a retryable *error* (the endpoint, a tool server, an NPC model) runs the
rollout again, up to the run's `error_retries`; a failure by the agent is final at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from eval_pipelines.engine.rollout import RolloutEngine, RolloutOutcome, RolloutSpec
from eval_pipelines.inputs.hosted import scenario_guidance
from eval_pipelines.inputs.scenarios import ScenarioError, ScenarioFiles
from eval_pipelines.lib.slots import SlotPool
from eval_pipelines.schemas._base import utc_now_iso
from eval_pipelines.schemas.agent_environment import AgentEnvironment
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import (
    DEFAULT_ERROR_RETRIES,
    DEFAULT_ERROR_RETRY_BACKOFF_SECONDS,
    MSG_COST_CEILING,
    AttemptError,
    ErrorClass,
    Rollout,
    RolloutPhase,
    RolloutResult,
    RolloutStatus,
    TaskOverride,
    TerminationReason,
)
from eval_pipelines.schemas.scenarios import NpcProfile, Task
from eval_pipelines.service.store import NewRollout, ProgressEvent, Runner, RunStore

logger = logging.getLogger(__name__)

#: Characters of an errored attempt's message kept in the rollout's `attempt_errors`.
ATTEMPT_MESSAGE_CHARS = 500


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


def failed_outcome(
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


async def wait_unless_cancelled(seconds: float, cancel: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(cancel.wait(), timeout=seconds)


def npc_profiles_of(scenario: ScenarioFiles, task: Task) -> tuple[NpcProfile, ...]:
    """The scenario's full profiles (with public_info) of the task's NPCs, which the listing of a task omits."""
    full = {npc.profile_id: npc for npc in scenario.npcs}
    return tuple(full.get(p.profile_id, p) for p in task.npc_profiles)


class ProgressBuffer:
    """Phase and step events of this process's rollouts, written together: one transaction per flush instead
    of one per event keeps the store's write lock (shared with worker processes) off the rollouts' path.
    Each event keeps the time it happened; readers see it within the executor's flush interval."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._events: list[ProgressEvent] = []

    def add(self, event: ProgressEvent) -> None:
        self._events.append(event)

    def take(self) -> list[ProgressEvent]:
        """The buffered events, removed from the buffer: the caller writes them (see `RunStore.finish`)."""
        events, self._events = self._events, []
        return events

    def flush(self) -> None:
        self.store.record_progress(self.take())


class RollingObserver:
    """Records the engine's phases and steps as status events (through the process's `ProgressBuffer`)."""

    def __init__(self, progress: ProgressBuffer, rollout_id: str) -> None:
        self.progress = progress
        self.rollout_id = rollout_id

    def phase(self, phase: RolloutPhase, detail: str | None = None) -> None:
        self.progress.add(ProgressEvent.of_phase(self.rollout_id, phase, detail))

    def step(self, steps_taken: int) -> None:
        self.progress.add(ProgressEvent.of_step(self.rollout_id, steps_taken))


@dataclass(frozen=True)
class RunSettings:
    """What a run's stored launch request says about executing each of its rollouts."""

    overrides: dict[str, TaskOverride]
    agent_path: str | None
    agent_environment: AgentEnvironment | None
    max_cost_usd: float | None
    error_retries: int
    error_retry_backoff_seconds: float

    @classmethod
    def of(cls, request: dict[str, Any]) -> RunSettings:
        retries = request.get("error_retries")
        backoff = request.get("error_retry_backoff_seconds")
        agent = request.get("agent")
        agent_environment = request.get("agent_environment")
        return cls(
            overrides={k: TaskOverride.model_validate(v) for k, v in (request.get("task_overrides") or {}).items()},
            agent_path=agent if isinstance(agent, str) else None,
            agent_environment=None if agent_environment is None else AgentEnvironment.model_validate(agent_environment),
            max_cost_usd=request.get("max_cost_usd"),
            error_retries=DEFAULT_ERROR_RETRIES if retries is None else int(retries),
            error_retry_backoff_seconds=DEFAULT_ERROR_RETRY_BACKOFF_SECONDS if backoff is None else float(backoff),
        )


@dataclass
class RolloutJob:
    """Everything one process needs to execute the rollouts of one run it holds slots for."""

    run_id: str
    scenario: ScenarioFiles
    settings: RunSettings
    model_config: ModelConfig
    user_model_config: ModelConfig | None
    #: the judge of the NPCs' and simulated users' replies (`engine/simulator_judge.py`); None: not judged
    simulator_judge_config: ModelConfig | None
    tool_server_urls: dict[str, str]
    verifiers_dir: Path | None
    timeout_seconds: float
    store: RunStore
    runner: Runner
    engine: RolloutEngine
    progress: ProgressBuffer
    slots: SlotPool
    cancel: asyncio.Event
    artifacts_path: Callable[[str, str], Path]
    on_rollout_done: Callable[[Rollout], None] | None = None

    @cached_property
    def scenario_guidance(self) -> str | None:
        """The scenario's guidance, which an imported SimLab task's instruction carries; read once per run."""
        return scenario_guidance(self.scenario.root, self.scenario.template)

    async def run(self, rollout: NewRollout) -> None:
        """Execute one pending rollout holding one slot, unless the run was cancelled, its cost ceiling is
        reached, or another process claimed the rollout first."""
        async with self.slots:
            if self.cancel.is_set() or self._refused_by_ceiling(rollout):
                return
            if not self.store.claim(rollout.rollout_id, self.runner):
                return
            task, extra = apply_override(
                self.scenario.task(rollout.task_id), self.settings.overrides.get(rollout.task_id)
            )
            outcome = await self._attempts(rollout, task, extra)
            if "rubric_markdown" in extra:
                outcome.artifacts.metadata["rubric_markdown"] = extra["rubric_markdown"]
            outcome, path = await self._write_artifacts(rollout, task, outcome)
            # The buffered events go first, in the same transaction: the rollout's last phases before its status.
            self.store.finish(
                rollout.rollout_id,
                outcome.status,
                outcome.result,
                outcome.termination_reason.value,
                path,
                progress=self.progress.take(),
            )
            if self.on_rollout_done is not None and (done := self.store.get_rollout(rollout.rollout_id)) is not None:
                self.on_rollout_done(done)

    def _refused_by_ceiling(self, rollout: NewRollout) -> bool:
        ceiling = self.settings.max_cost_usd
        if ceiling is None or (spent := self.store.run_cost_usd(self.run_id)) < ceiling:
            return False
        message = MSG_COST_CEILING.format(ceiling=ceiling, spent=spent)
        if self.store.fail_pending([rollout.rollout_id], TerminationReason.COST_CEILING, message):
            logger.warning("run %s: %s", self.run_id, message)
        return True

    async def _write_artifacts(
        self, rollout: NewRollout, task: Task, outcome: RolloutOutcome
    ) -> tuple[RolloutOutcome, str | None]:
        target = self.artifacts_path(self.run_id, rollout.rollout_id)
        try:
            # Handed over: this process's collector reads the file back moments later (`RunArtifacts.dump`).
            await asyncio.to_thread(outcome.artifacts.dump, target, hand_over=True)
        except OSError as exc:
            # Without its trace the rollout cannot be verified or audited: record why, keep the others going.
            return failed_outcome(
                task,
                RolloutStatus.FAILED,
                TerminationReason.INFRASTRUCTURE_ERROR,
                f"could not write artifacts to {target}: {exc.strerror or exc}",
                ErrorClass.INTERNAL,
            ), None
        return outcome, str(target)

    async def _attempts(self, rollout: NewRollout, task: Task, extra: dict[str, Any]) -> RolloutOutcome:
        """Run the rollout; while it ends in a retryable error, wait and run it again, up to the run's
        `error_retries`. A failure by the agent is final at once: retrying it would flatter the model."""
        failed_attempts: list[AttemptError] = []
        while True:
            started_at = utc_now_iso()
            outcome = await self._attempt_once(rollout, task, extra)
            error_class = outcome.error_class
            if (
                error_class is None
                or not error_class.is_retryable
                or len(failed_attempts) >= self.settings.error_retries
                or self.cancel.is_set()
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
            self.progress.add(
                ProgressEvent.of_phase(
                    rollout.rollout_id,
                    RolloutPhase.BUILDING_ENVIRONMENT,
                    f"attempt {len(failed_attempts) + 1} after a {error_class.value} error",
                )
            )
            delay = retry_delay(self.settings.error_retry_backoff_seconds, len(failed_attempts))
            await wait_unless_cancelled(delay, self.cancel)
        outcome.result.attempts = len(failed_attempts) + 1
        outcome.result.attempt_errors = failed_attempts
        return outcome

    async def _attempt_once(self, rollout: NewRollout, task: Task, extra: dict[str, Any]) -> RolloutOutcome:
        try:
            seed = {ts.name: self.scenario.seed_payload(task, ts.name) for ts in task.tool_servers}
        except ScenarioError as exc:  # a broken seed file costs the tasks that use it, not the run
            return failed_outcome(
                task,
                RolloutStatus.WORKSPACE_ERROR,
                TerminationReason.WORKSPACE_ERROR,
                f"Workspace provisioning failed: {exc}",
                ErrorClass.TOOL_SERVER,
            )
        spec = RolloutSpec(
            rollout_id=rollout.rollout_id,
            run_id=self.run_id,
            scenario_id=self.scenario.scenario_id,
            task=task,
            model_config=self.model_config,
            tool_server_urls=self.tool_server_urls,
            seed=seed,
            verifiers_dir=self.verifiers_dir,
            timeout_seconds=self.timeout_seconds,
            rollout_index=rollout.rollout_index,
            client_context=extra.get("client_context"),
            agent_path=self.settings.agent_path,
            agent_environment=self.settings.agent_environment,
            user_model_config=self.user_model_config,
            simulator_judge_config=self.simulator_judge_config,
            npc_profiles=npc_profiles_of(self.scenario, task),
            scenario_guidance=self.scenario_guidance if task.simlab_origin else None,
        )
        try:
            return await self.engine.execute(spec, RollingObserver(self.progress, rollout.rollout_id), self.cancel)
        except Exception as exc:  # an engine bug must cost one rollout, not the run
            logger.exception("rollout %s crashed in the engine", rollout.rollout_id)
            return failed_outcome(
                task,
                RolloutStatus.FAILED,
                TerminationReason.INFRASTRUCTURE_ERROR,
                f"Agent execution failed: {type(exc).__name__}: {exc}",
                ErrorClass.INTERNAL,
            )
