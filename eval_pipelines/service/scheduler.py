"""Runs executing inside the HTTP service: one background asyncio task per active run.

The model configuration of an active run (with its API key) is held here, in memory only: the store keeps
the key-less echo. After a restart the key is gone, so the caller resumes the run with its configuration
(`POST /runs/{run_id}/resume`). The number of active runs is bounded; beyond it, and while the service
drains for shutdown, launches get `Overloaded` (503 with Retry-After).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

import httpx

from eval_pipelines.lib.redact import redact_optional_url
from eval_pipelines.llm.errors import scrub_secrets, truncate
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import RunLaunchRequest, RunLaunchResponse, TerminationReason
from eval_pipelines.schemas.service_wire import ResumeRunResponse
from eval_pipelines.schemas.sweep import SIMULATED_BASE_URL
from eval_pipelines.service.executor import InvalidRequest, NotFound, RunExecutor

logger = logging.getLogger(__name__)

#: How long a delete waits for a cancelled run to wind down before removing its records anyway.
DELETE_WAIT_SECONDS = 30.0


class Overloaded(Exception):
    """The service cannot take more work right now (draining, or too many active runs)."""


class ConfigMismatch(ValueError):
    """A resume names a different model than the run was launched with (409)."""


@dataclass
class ActiveRun:
    run_id: str
    model_config: ModelConfig
    user_model_config: ModelConfig | None
    max_parallel: int | None
    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    simulator_judge_config: ModelConfig | None = None

    def __repr__(self) -> str:  # the configs hold keys; a debug print must not show them
        return f"ActiveRun(run_id={self.run_id!r}, cancelled={self.cancelled})"


def check_model_endpoint(config: ModelConfig, field: str) -> None:
    """Reject a base_url no client could ever reach, at launch rather than in every rollout."""
    if config.base_url is None:
        try:
            config.resolved_base_url()
        except ValueError as exc:
            raise InvalidRequest(f"{field}.base_url: {exc}") from None
        return
    if config.base_url == SIMULATED_BASE_URL:
        return
    try:
        url = httpx.URL(config.base_url)
    except (httpx.InvalidURL, ValueError, TypeError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise InvalidRequest(f"{field}.base_url must be an http(s) URL or {SIMULATED_BASE_URL!r}")


class RunScheduler:
    def __init__(self, executor: RunExecutor, *, max_active_runs: int, rollout_timeout_seconds: float) -> None:
        self.executor = executor
        self.store = executor.store
        self.max_active_runs = max_active_runs
        self.rollout_timeout_seconds = rollout_timeout_seconds
        self.draining = False
        self._active: dict[str, ActiveRun] = {}

    @property
    def active_runs(self) -> int:
        return len(self._active)

    def is_active(self, run_id: str) -> bool:
        return run_id in self._active

    def _ensure_capacity(self) -> None:
        if self.draining:
            raise Overloaded("the service is shutting down; retry against the restarted service")
        if len(self._active) >= self.max_active_runs:
            raise Overloaded(f"{len(self._active)} runs are active (the limit is {self.max_active_runs}); retry later")

    # -- launch / resume / cancel / delete -----------------------------------------------------------------
    def launch(self, request: RunLaunchRequest) -> RunLaunchResponse:
        check_model_endpoint(request.model_config_, "model_config")
        if request.user_model_config is not None:
            check_model_endpoint(request.user_model_config, "user_model_config")
        if request.simulator_judge_config is not None:
            check_model_endpoint(request.simulator_judge_config, "simulator_judge_config")
        self._ensure_capacity()
        response = self.executor.launch(request)
        active = ActiveRun(response.run_id, request.model_config_, request.user_model_config, request.max_parallel)
        active.simulator_judge_config = request.simulator_judge_config
        self._start(active)
        return response

    def resume(self, run_id: str, config: ModelConfig, *, retry_failed: bool) -> ResumeRunResponse:
        """Make sure the run's unfinished rollouts execute. Idempotent: a completed rollout is never re-queued,
        and resuming a run that is executing changes nothing, unless it is being cancelled (then the resume
        undoes the cancel: what was cancelled is re-queued for the same execution to pick up)."""
        stored = self.store.run_request(run_id)
        if stored is None:
            raise NotFound(f"run {run_id!r} not found")
        check_model_endpoint(config, "model_config")
        self._check_same_model(run_id, stored.get("model_config") or {}, config)
        active = self._active.get(run_id)
        if active is not None:
            requeued = 0
            if active.cancelled or self.store.cancel_requested(run_id):
                requeued = self.executor.resume(run_id, retry_failed=retry_failed)
                active.cancelled = False
        else:
            self._ensure_capacity()
            requeued = self.executor.resume(run_id, retry_failed=retry_failed)
            if self.store.pending_slots(run_id):
                user_config = self._stored_user_model_config(run_id, stored.get("user_model_config"))
                active = ActiveRun(run_id, config, user_config, stored.get("max_parallel"))
                active.simulator_judge_config = self._stored_judge_config(run_id, stored.get("simulator_judge_config"))
                self._start(active)
        run = self.store.get_run(run_id)
        if run is None:
            raise NotFound(f"run {run_id!r} not found")
        return ResumeRunResponse(
            run_id=run_id, requeued_rollouts=requeued, active=self.is_active(run_id), run_status=run
        )

    @staticmethod
    def _stored_user_model_config(run_id: str, stored: dict[str, Any] | None) -> ModelConfig | None:
        """The simulated-user model of a resumed run. Its key did not survive (keys are never stored), which
        only the local simulated models do without; any other endpoint falls back to the NPC default."""
        if not stored:
            return None
        if stored.get("base_url") == SIMULATED_BASE_URL:
            return ModelConfig.model_validate({**stored, "api_key": "not-needed-for-simulated-models"})
        logger.warning(
            "run %s: user_model_config needs its key again after a restart; NPCs use their default model", run_id
        )
        return None

    @staticmethod
    def _stored_judge_config(run_id: str, stored: dict[str, Any] | None) -> ModelConfig | None:
        """The simulator judge of a resumed run: as the user model, only a local simulated one survives a restart
        without its key; otherwise the rollouts still to run get the deterministic simulator checks only."""
        if not stored:
            return None
        if stored.get("base_url") == SIMULATED_BASE_URL:
            return ModelConfig.model_validate({**stored, "api_key": "not-needed-for-simulated-models"})
        logger.warning("run %s: simulator_judge_config needs its key again after a restart; not judged", run_id)
        return None

    @staticmethod
    def _check_same_model(run_id: str, launched: dict[str, Any], config: ModelConfig) -> None:
        for name in ("model", "provider", "base_url"):
            before, now = launched.get(name), getattr(config, name)
            now = getattr(now, "value", now)
            if name == "provider":
                before = before or "custom"
            if name == "base_url":
                now = redact_optional_url(now)  # the store keeps it without credentials
            if before != now:
                raise ConfigMismatch(
                    f"run {run_id} was launched with model_config.{name}={before!r}; resume it with the same model "
                    f"configuration (got {now!r}), or launch a new run"
                )

    def cancel(self, run_id: str) -> int:
        active = self._active.get(run_id)
        if active is not None:
            active.cancelled = True
        return self.executor.cancel(run_id)

    async def delete(self, run_id: str) -> int:
        """Cancel first when the run is active, wait for it to wind down, then remove it."""
        active = self._active.get(run_id)
        if active is not None:
            self.cancel(run_id)
            if active.task is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(DELETE_WAIT_SECONDS):
                        await asyncio.shield(active.task)
        return self.executor.delete(run_id)

    # -- execution -----------------------------------------------------------------------------------------
    def _start(self, active: ActiveRun) -> None:
        self._active[active.run_id] = active
        active.task = asyncio.create_task(self._drive(active), name=f"run:{active.run_id}")

    async def _drive(self, active: ActiveRun) -> None:
        run_id = active.run_id
        try:
            # The first run of a process starts the local tool servers and simulated models: off the loop.
            await asyncio.to_thread(self.executor.runtime.start)
            # A resume while the run executes re-queues rollouts behind the executor's back: go round again.
            while self._should_continue(active):
                await self.executor.execute(
                    run_id,
                    active.model_config,
                    max_parallel=active.max_parallel,
                    timeout_seconds=self.rollout_timeout_seconds,
                    user_model_config=active.user_model_config,
                    simulator_judge_config=active.simulator_judge_config,
                )
        except asyncio.CancelledError:
            raise
        except NotFound:
            logger.info("run %s disappeared while executing (deleted)", run_id)
        except Exception as exc:
            secrets = [active.model_config.reveal_api_key()]
            message = truncate(scrub_secrets(f"Run execution failed: {type(exc).__name__}: {exc}", secrets), 500)
            logger.error("run %s: %s", run_id, message)
            pending = [r.rollout_id for r in self.store.pending_slots(run_id)]
            self.store.fail_pending(pending, TerminationReason.INFRASTRUCTURE_ERROR, message)
        finally:
            if self._active.get(run_id) is active:
                del self._active[run_id]

    def _should_continue(self, active: ActiveRun) -> bool:
        if active.cancelled or self.draining or self.store.cancel_requested(active.run_id):
            return False
        return bool(self.store.pending_slots(active.run_id))

    async def wait_idle(self, timeout_seconds: float) -> bool:
        """Wait until no run is active; False when the timeout passed first."""
        tasks = [a.task for a in self._active.values() if a.task is not None]
        if not tasks:
            return True
        _, pending = await asyncio.wait(tasks, timeout=timeout_seconds)
        return not pending

    async def aclose(self, drain_seconds: float) -> None:
        """Drain for shutdown: no new work, active runs get `drain_seconds` to finish, then they are stopped.
        Rollouts stopped mid-way are failed (`server_restart`); a resume after the restart re-runs them."""
        self.draining = True
        if not await self.wait_idle(drain_seconds):
            tasks = [a.task for a in self._active.values() if a.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self.executor.fail_own_interrupted()
