"""Task-generation jobs: pending -> running -> completed/failed, progress, results 200/202/500/404."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from eval_pipelines.clients.errors import JobFailed, JobStillRunning, NotFound
from eval_pipelines.clients.evaluation import EvaluationClient
from eval_pipelines.schemas.taskgen import JobStatus, TaskGenJob, TaskGenRequest
from tests.service.eval_service_support import WRITE_KEY, GatedGenerator, running_service

REQUEST = TaskGenRequest.model_validate(
    {"toolset": [{"name": "send_email", "description": "send", "inputSchema": {"type": "object"}}], "num_tasks": 3}
)


async def _until_status(client: EvaluationClient, job_id: str, wanted: JobStatus) -> TaskGenJob:
    for _ in range(500):
        job = await client.get_task_gen_job(job_id)
        if job.status == wanted:
            return job
        await asyncio.sleep(0.02)
    raise AssertionError(f"job {job_id} never reached {wanted}")


async def test_job_runs_to_completion_with_progress_and_202_meanwhile(data_dir: Path) -> None:
    generator = GatedGenerator()
    with running_service(data_dir, task_generator=generator) as running:
        async with EvaluationClient(running.url, WRITE_KEY) as client:
            job = await client.submit_task_gen(REQUEST)
            assert job.status == JobStatus.PENDING and job.progress is None and job.created_at
            running_job = await _until_status(client, job.job_id, JobStatus.RUNNING)
            assert running_job.progress == "Step 1: Waiting for the gate"

            with pytest.raises(JobStillRunning) as still:
                await client.get_task_gen_results(job.job_id)
            assert still.value.status == 202 and still.value.job.job_id == job.job_id
            async with httpx.AsyncClient(base_url=running.url, headers={"API-Key": WRITE_KEY}) as http:
                raw = await http.get(f"/v1/task-gen/{job.job_id}/results")
            assert raw.status_code == 202 and raw.json()["status"] == "running"

            generator.gate.set()
            results = await client.wait_for_task_gen(job.job_id, deadline_seconds=30, poll_interval=0.02)
            assert results.job_id == job.job_id and len(results.tasks) == 3 and results.skills_md == "# skills"
            done = await client.get_task_gen_job(job.job_id)
            assert done.status == JobStatus.COMPLETED and done.completed_at and done.error is None
            assert done.progress == "Step 3: Generate tasks"
            # The bare path serves the same job.
            async with httpx.AsyncClient(base_url=running.url, headers={"API-Key": WRITE_KEY}) as http:
                assert (await http.get(f"/task-gen/{job.job_id}/results")).json()["job_id"] == job.job_id


async def test_failed_job_results_are_500_with_its_error(data_dir: Path) -> None:
    generator = GatedGenerator(fail_with="the toolset has no mutating tool")
    generator.gate.set()
    with running_service(data_dir, task_generator=generator) as running:
        async with EvaluationClient(running.url, WRITE_KEY) as client:
            job = await client.submit_task_gen(REQUEST)
            failed = await _until_status(client, job.job_id, JobStatus.FAILED)
            assert failed.error == "the toolset has no mutating tool"
            with pytest.raises(JobFailed) as error:
                await client.get_task_gen_results(job.job_id)
            assert error.value.status == 500 and error.value.error == "the toolset has no mutating tool"


async def test_default_engine_generates_and_unknown_jobs_are_404(data_dir: Path) -> None:
    from eval_pipelines.toolservers.calendar import CalendarServer

    calendar = TaskGenRequest.model_validate(
        {"toolset": [t.as_task_gen_tool() for t in CalendarServer().tools()], "num_tasks": 3, "model": "schema"}
    )
    with running_service(data_dir) as running:
        async with EvaluationClient(running.url, WRITE_KEY) as client:
            job = await client.submit_task_gen(calendar)
            results = await client.wait_for_task_gen(job.job_id, deadline_seconds=120, poll_interval=0.05)
            assert len(results.tasks) == 3 and results.verifiers and results.skills_md
            for call in (
                client.get_task_gen_job("00000000-0000-0000-0000-000000000000"),
                client.get_task_gen_results("00000000-0000-0000-0000-000000000000"),
            ):
                with pytest.raises(NotFound):
                    await call


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"toolset": []},
        {"toolset": [{"name": "t"}], "num_tasks": 201},
        {"toolset": [{"description": "no name"}]},
        {"toolset": [{"name": "t"}], "preset": "no_such_preset"},
        {"toolset": [{"name": "t"}], "diversity": {"vary": ["colour"]}},
    ],
)
async def test_invalid_requests_are_422(eval_service: object, body: dict[str, object]) -> None:
    """Refused at submit, naming the field: an unknown preset never becomes a job that fails later."""
    url = eval_service.url  # type: ignore[attr-defined]
    async with httpx.AsyncClient(base_url=url, headers={"API-Key": WRITE_KEY}) as http:
        response = await http.post("/v1/task-gen", json=body)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"][0] == "body"
    for field in ("preset", "diversity"):
        if field in body:
            assert response.json()["detail"][0]["loc"][1] == field, response.json()


async def test_the_fields_simlab_always_sends_are_accepted(eval_service: object) -> None:
    """SimLab sends every request key, nulls included, plus `filter` and `description`."""
    body = {
        "toolset": [{"name": "send_email", "description": "Send an email"}],
        "agent": None,
        "scenario": None,
        "categories": None,
        "workflows": None,
        "npcs": None,
        "workspace": None,
        "num_tasks": 1,
        "model": "schema",
        "complexity": None,
        "diversity": None,
        "filter": True,
        "preset": "customer_support",
        "description": "answer customers",
    }
    url = eval_service.url  # type: ignore[attr-defined]
    async with httpx.AsyncClient(base_url=url, headers={"API-Key": WRITE_KEY}) as http:
        response = await http.post("/v1/task-gen", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "pending"


async def test_jobs_interrupted_by_a_restart_fail(data_dir: Path) -> None:
    generator = GatedGenerator()  # never opened: the job is still running when the service stops
    with running_service(data_dir, task_generator=generator) as running:
        async with EvaluationClient(running.url, WRITE_KEY) as client:
            job = await client.submit_task_gen(REQUEST)
            await _until_status(client, job.job_id, JobStatus.RUNNING)
    generator.gate.set()
    with running_service(data_dir) as restarted:
        async with EvaluationClient(restarted.url, WRITE_KEY) as client:
            after = await client.get_task_gen_job(job.job_id)
    assert after.status == JobStatus.FAILED and after.error and "restarted" in after.error
