"""What one app instance of the evaluation service owns, and how a route gets it (`ServiceDep`)."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import Depends, Request

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.runtime.local import shared_runtime
from eval_pipelines.service.executor import RunExecutor
from eval_pipelines.service.layout import service_paths
from eval_pipelines.service.scheduler import RunScheduler
from eval_pipelines.service.settings import ServiceSettings
from eval_pipelines.service.store import RunStore
from eval_pipelines.service.taskgen_jobs import TaskGenJobs

logger = logging.getLogger(__name__)


class EvaluationService:
    """Everything one app instance owns: store, catalog, executor, scheduler, task-generation jobs."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        store_path, artifacts_dir = service_paths(settings.data_dir)
        self.catalog = ScenarioCatalog(settings.scenarios_dir)
        self.store = RunStore(store_path)
        self.runtime = shared_runtime(self.catalog)
        self.executor = RunExecutor(
            self.store,
            self.catalog,
            self.runtime,
            artifacts_dir,
            max_rollouts_per_run=settings.max_rollouts_per_run,
        )
        self.scheduler = RunScheduler(
            self.executor,
            max_active_runs=settings.max_active_runs,
            rollout_timeout_seconds=settings.rollout_timeout_seconds,
        )
        self.jobs = TaskGenJobs(self.store, settings.task_generator, runner=self.executor.runner)

    def begin_drain(self) -> None:
        """Shutdown has begun: new work gets 503 from now on."""
        self.scheduler.draining = True

    @property
    def draining(self) -> bool:
        return self.scheduler.draining

    def recover(self) -> None:
        rollouts = self.store.fail_interrupted()
        jobs = self.store.fail_interrupted_jobs()
        if rollouts or jobs:
            logger.warning(
                "recovered after a restart: %d interrupted rollouts and %d task-generation jobs marked failed",
                rollouts,
                jobs,
            )

    async def aclose(self) -> None:
        self.begin_drain()
        await self.jobs.aclose()
        await self.scheduler.aclose(self.settings.drain_seconds)

    def scenario(self, scenario_id: str) -> ScenarioFiles:
        return self.executor.scenario(scenario_id)


def current_service(request: Request) -> EvaluationService:
    """The service of the app serving `request` (a route's dependency)."""
    service = request.app.state.service
    assert isinstance(service, EvaluationService)
    return service


ServiceDep = Annotated[EvaluationService, Depends(current_service)]
