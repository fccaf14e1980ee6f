"""Task generation jobs: submit, poll, results."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from eval_pipelines.schemas.taskgen import (
    JobStatus,
    TaskGenJob,
    TaskGenRequest,
    TaskGenResults,
    with_simlab_filter_keys,
)
from eval_pipelines.service.executor import NotFound
from eval_pipelines.service.responses import (
    NOT_FOUND,
    UNAVAILABLE,
    error_doc,
    error_response,
)
from eval_pipelines.service.scheduler import Overloaded
from eval_pipelines.service.state import ServiceDep
from eval_pipelines.taskgen import TaskGenRequestError, check_toolset, resolve_request

logger = logging.getLogger(__name__)

router = APIRouter()


# -- task generation -----------------------------------------------------------------------------------
@router.post("/task-gen", response_model=TaskGenJob, tags=["task-gen"], responses=UNAVAILABLE, summary="Submit a job")
async def submit_task_gen(service: ServiceDep, body: TaskGenRequest) -> TaskGenJob:
    if service.draining:
        raise Overloaded("the service is shutting down; retry against the restarted service")
    try:
        # An unknown preset, a bad diversity or a toolset no server can serve is the caller's mistake: a 422
        # now, not a job failing later.
        resolve_request(body)
        check_toolset(body.toolset)
    except TaskGenRequestError as exc:
        loc = ("body", *exc.field.split("."))
        raise RequestValidationError([{"loc": loc, "msg": exc.message, "type": "value_error"}]) from None
    return service.jobs.submit(body)


@router.get(
    "/task-gen/{job_id}", response_model=TaskGenJob, tags=["task-gen"], responses=NOT_FOUND, summary="Job status"
)
def get_task_gen_job(service: ServiceDep, job_id: str) -> TaskGenJob:
    job = service.store.get_job(job_id)
    if job is None:
        raise NotFound(f"task generation job {job_id!r} not found")
    return job


@router.get(
    "/task-gen/{job_id}/results",
    response_model=TaskGenResults,
    tags=["task-gen"],
    responses={
        202: {"model": TaskGenJob, "description": "the job is still pending or running"},
        500: error_doc("the job failed; `detail` is its error"),
        **NOT_FOUND,
    },
    summary="Job results",
)
def get_task_gen_results(service: ServiceDep, job_id: str) -> Any:
    job = service.store.get_job(job_id)
    if job is None:
        raise NotFound(f"task generation job {job_id!r} not found")
    if job.status == JobStatus.FAILED:
        return error_response(500, job.error or "task generation failed")
    if job.status != JobStatus.COMPLETED:
        return JSONResponse(status_code=202, content=job.model_dump(mode="json"))
    results = service.store.job_results(job_id)
    if results is None:
        return error_response(500, "the job completed but its results are missing")
    # SimLab prints which tasks the filter dropped, and the funnel, from the hosted product's keys.
    return results.model_copy(update={"filter_summary": with_simlab_filter_keys(results.filter_summary)})
