"""What one app instance of the evaluation service owns, and how a route gets it (`ServiceDep`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import APIKeyHeader

from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.runtime.local import shared_runtime
from eval_pipelines.service.auth import API_KEY_HEADER, Permission
from eval_pipelines.service.caller_workspaces import CallerWorkspaces
from eval_pipelines.service.catalog import ReusingScenarioCatalog
from eval_pipelines.service.executor import RunExecutor
from eval_pipelines.service.layout import service_paths
from eval_pipelines.service.scheduler import RunScheduler
from eval_pipelines.service.settings import ServiceSettings
from eval_pipelines.service.store import RunStore
from eval_pipelines.service.taskgen_jobs import TaskGenJobs

logger = logging.getLogger(__name__)


class EvaluationService:
    """Everything one app instance owns: store, catalog, executor, scheduler, task-generation jobs, the workspaces
    of task listings."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        store_path, artifacts_dir = service_paths(settings.data_dir)
        self.catalog = ReusingScenarioCatalog(settings.scenarios_dir)
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
        #: the workspaces behind the `tool_server_url`s of task listings, one per listing, task and server
        self.caller_workspaces = CallerWorkspaces()

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
        await self.caller_workspaces.aclose()
        await asyncio.to_thread(self.executor.close)

    def scenario(self, scenario_id: str) -> ScenarioFiles:
        return self.executor.scenario(scenario_id)


def service_of(request: Request) -> EvaluationService:
    """The service of the app serving `request`."""
    service = request.app.state.service
    assert isinstance(service, EvaluationService)
    return service


async def current_service(request: Request) -> EvaluationService:
    """`service_of`, as a route's dependency. Dependencies are `async` because FastAPI runs a plain function
    dependency on a worker thread: a thread hop per dependency per request, for work that never blocks."""
    return service_of(request)


ServiceDep = Annotated[EvaluationService, Depends(current_service)]


# Module level: with postponed annotations, FastAPI resolves parameter annotations in the module's globals.
API_KEY_SCHEME = APIKeyHeader(
    name=API_KEY_HEADER,
    auto_error=False,
    description="The account's API key. `read` keys may GET; POST and DELETE need a `write` key.",
)


async def authenticate(request: Request, api_key: Annotated[str | None, Security(API_KEY_SCHEME)]) -> Permission:
    """The key's permission (every route's dependency): 401 without a known key, 403 for a read-only key on a
    request that changes something."""
    permission = service_of(request).settings.api_keys.permission(api_key)
    if permission is None:
        raise HTTPException(
            status_code=401,
            detail=f"missing or invalid API key (send it in the {API_KEY_HEADER} header)",
            headers={"WWW-Authenticate": API_KEY_HEADER},
        )
    if not permission.allows(request.method):
        raise HTTPException(
            status_code=403, detail=f"this API key is read-only; {request.method} needs a key with write permission"
        )
    return permission
