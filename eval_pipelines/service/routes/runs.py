"""Runs: launch, list, get, cancel, delete, resume (a local extension)."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Query

from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    MIN_LIST_LIMIT,
    CancelRunResponse,
    DeleteRunResponse,
    Run,
    RunLaunchRequest,
    RunLaunchResponse,
    RunList,
    RunSource,
)
from eval_pipelines.schemas.service_wire import (
    ResumeRunResponse,
)
from eval_pipelines.service.executor import NotFound
from eval_pipelines.service.responses import (
    BAD_REQUEST,
    CONFLICT,
    NOT_FOUND,
    UNAVAILABLE,
)
from eval_pipelines.service.routes.rollouts import MAX_LIST_OFFSET
from eval_pipelines.service.state import ServiceDep

logger = logging.getLogger(__name__)

router = APIRouter()


def _expand_values(expand: list[str]) -> set[str]:
    # Accept both `expand=rollouts&expand=x` and `expand=rollouts,x`.
    return {part.strip() for value in expand for part in value.split(",") if part.strip()}


# -- runs ------------------------------------------------------------------------------------------
@router.post(
    "/runs",
    response_model=RunLaunchResponse,
    tags=["runs"],
    responses={**BAD_REQUEST, **NOT_FOUND, **CONFLICT, **UNAVAILABLE},
    summary="Launch a run",
)
async def launch_run(service: ServiceDep, body: RunLaunchRequest) -> RunLaunchResponse:
    return service.scheduler.launch(body)


@router.get("/runs", response_model=RunList, tags=["runs"], summary="List runs")
def list_runs(
    service: ServiceDep,
    scenario_id: str | None = None,
    source: Annotated[RunSource, Query(description="`all` means no filter")] = RunSource.RL_GYM,
    limit: Annotated[int, Query(ge=MIN_LIST_LIMIT, le=MAX_LIST_LIMIT)] = DEFAULT_LIST_LIMIT,
    offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    expand: Annotated[list[str] | None, Query(description="`rollouts` fills `rollout_ids`")] = None,
    run_name: Annotated[str | None, Query(description="local extension: only the run with this name")] = None,
) -> RunList:
    total, runs = service.store.list_runs(
        scenario_id=scenario_id,
        source=None if source == RunSource.ALL else source.value,
        limit=limit,
        offset=offset,
        expand_rollouts="rollouts" in _expand_values(expand or []),
        run_name=run_name,
    )
    return RunList(total=total, runs=runs)


@router.get("/runs/{run_id}", response_model=Run, tags=["runs"], responses=NOT_FOUND, summary="Get a run")
def get_run(service: ServiceDep, run_id: str) -> Run:
    run = service.store.get_run(run_id)
    if run is None:
        raise NotFound(f"run {run_id!r} not found")
    return run


@router.post(
    "/runs/{run_id}/cancel", response_model=CancelRunResponse, tags=["runs"], responses=NOT_FOUND, summary="Cancel"
)
async def cancel_run(service: ServiceDep, run_id: str) -> CancelRunResponse:
    return CancelRunResponse(run_id=run_id, cancelled_rollouts=service.scheduler.cancel(run_id))


@router.delete("/runs/{run_id}", response_model=DeleteRunResponse, tags=["runs"], responses=NOT_FOUND, summary="Delete")
async def delete_run(service: ServiceDep, run_id: str) -> DeleteRunResponse:
    return DeleteRunResponse(run_id=run_id, deleted_rollouts=await service.scheduler.delete(run_id))


@router.post(
    "/runs/{run_id}/resume",
    response_model=ResumeRunResponse,
    tags=["runs"],
    responses={**BAD_REQUEST, **NOT_FOUND, **CONFLICT, **UNAVAILABLE},
    summary="Resume a run (local extension)",
)
async def resume_run(
    service: ServiceDep,
    run_id: str,
    body: ModelConfig,
    retry_failed: Annotated[
        bool, Query(description="also re-run failed rollouts (rollouts interrupted by a restart always are)")
    ] = True,
) -> ResumeRunResponse:
    return service.scheduler.resume(run_id, body, retry_failed=retry_failed)
