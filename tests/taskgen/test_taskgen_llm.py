"""The LLM-driven generator end to end against an OpenAI-compatible endpoint (the simulated task-generation
model over real HTTP), including malformed model output: each bad item ends as a counted FAILED item, and a job
with nothing usable fails with its reason (also through the service's job API)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipelines.clients.errors import JobFailed
from eval_pipelines.clients.evaluation import EvaluationClient
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.llm import ChatClient
from eval_pipelines.llm.types import ChatRequest
from eval_pipelines.schemas.taskgen import JobStatus, TaskGenRequest
from eval_pipelines.sim.taskgen import SIM_TASKGEN, prompt_context
from eval_pipelines.taskgen import (
    DefaultTaskGenerator,
    LLMEndpoint,
    LLMTaskGenerator,
    TaskGenFailed,
    write_bundle,
)
from tests.service.eval_service_support import WRITE_KEY, running_service
from tests.taskgen.conftest import calendar_toolset

BROKEN_JSON = '{"tasks": [{"name": "half a task", "reference_actions": [{"tool_name": '
NOT_IMPORTABLE = "```python\nimport no_such_module_for_taskgen\n\n\ndef verify(run_artifacts):\n    return True\n```"


def _request(num_tasks: int, **fields: object) -> TaskGenRequest:
    return TaskGenRequest.model_validate({"toolset": calendar_toolset(), "num_tasks": num_tasks, **fields})


async def test_llm_generator_writes_a_gated_scenario(taskgen_llm: Callable[..., str], tmp_path: Path) -> None:
    progress: list[str] = []
    async with ChatClient(taskgen_llm(), "any-key") as client:
        results = await LLMTaskGenerator(client, SIM_TASKGEN).generate(_request(6), progress.append)

    summary = results.filter_summary
    assert summary is not None and summary["generator"] == "llm" and summary["model"] == SIM_TASKGEN
    assert summary["failed_items"] == {"skills": 0, "tasks": 0, "instructions": 0, "rubrics": 0, "verifiers": 0}
    assert summary["produced"]["complexity"] == {"easy": 2, "medium": 3, "hard": 1}
    assert summary["verifiers"]["passed"] == 6 and summary["dropped_tasks"] == []
    assert results.skills_md.startswith("# Skills")
    assert sorted(f.filename for f in results.verifiers) == [f"calendar_{i:03d}_check.py" for i in range(1, 7)]
    for step in range(1, 7):
        assert any(p.startswith(f"Step {step}/6: ") for p in progress), step
    rubric = json.loads(results.tasks[0].content)["rubric"]
    assert rubric["success_criteria"] and rubric["title"]

    folder = write_bundle(results, tmp_path / "scenarios", "calendar_llm")
    assert len(ScenarioCatalog(folder.parent).get("calendar_llm").tasks()) == 6


def _faulty(request: ChatRequest, reply: str, state: dict[str, bool]) -> str:
    context = prompt_context(request) or {}
    step = context.get("step")
    if step == "tasks" and context.get("difficulty") == "easy":
        return BROKEN_JSON
    if step == "tasks" and context.get("difficulty") == "hard" and not state.get("bad_params"):
        state["bad_params"] = True
        tasks = json.loads(reply)
        tasks["tasks"][0]["reference_actions"][0]["parameters"] = {"no_such_parameter": 5}
        return json.dumps(tasks)
    task_id = context.get("task_id") or (context.get("task") or {}).get("task_id")
    if step == "verifiers" and task_id == "calendar_001":
        return NOT_IMPORTABLE
    if step == "instructions" and task_id == "calendar_002":
        return "Please sort out the calendar."
    if step == "rubrics" and task_id == "calendar_003":
        return "{'title': not json"
    return reply


async def test_malformed_model_output_ends_as_counted_failed_items(taskgen_llm: Callable[..., str]) -> None:
    state: dict[str, bool] = {}
    url = taskgen_llm(lambda request, reply: _faulty(request, reply, state))
    complexity = {"easy": 0.2, "medium": 0.5, "hard": 0.3}
    async with ChatClient(url, "any-key") as client:
        generator = LLMTaskGenerator(client, SIM_TASKGEN)
        results = await generator.generate(_request(10, complexity=complexity), lambda _text: None)

    summary = results.filter_summary
    assert summary is not None
    details = summary["failed_item_details"]
    # Broken JSON: every easy item failed, cleanly, with the parse error as its reason.
    easy_failures = [d for d in details if d["step"] == "tasks" and d["item"].startswith("easy")]
    assert len(easy_failures) >= 2 and all("not valid JSON" in d["reason"] for d in easy_failures)
    assert summary["produced"]["complexity"]["easy"] == 0
    # A call with a parameter the tool does not take is a failed task item; the batch is topped up.
    assert any(d["step"] == "tasks" and "invalid parameters" in d["reason"] for d in details)
    # An instruction leaving out a checked value fails, and its task is dropped before the gates.
    assert any(d["step"] == "instructions" and d["item"] == "calendar_002" for d in details)
    # A rubric that is not JSON falls back to the derived rubric; the task stays.
    assert any(d["step"] == "rubrics" and d["item"] == "calendar_003" for d in details)
    assert summary["failed_items"]["rubrics"] == 1 and summary["failed_items"]["instructions"] == 1

    # The verifier that does not import is kept as .FAILED.py, and its task is dropped.
    files = {f.filename: f.content for f in results.verifiers}
    assert "calendar_001_check.FAILED.py" in files and "calendar_001_check.py" not in files
    failed = {f["filename"]: f for f in summary["failed_verifiers"]}
    assert failed["calendar_001_check.FAILED.py"]["gate"] == "import"
    assert "no_such_module_for_taskgen" in failed["calendar_001_check.FAILED.py"]["reason"]
    dropped = {d["task_id"]: d["reason"] for d in summary["dropped_tasks"]}
    assert set(dropped) == {"calendar_001", "calendar_002"}
    assert "no verifier passed" in dropped["calendar_001"] and "instruction" in dropped["calendar_002"]

    kept = {json.loads(f.content)["task_id"] for f in results.tasks}
    assert "calendar_001" not in kept and "calendar_002" not in kept and "calendar_003" in kept
    assert summary["produced"]["num_tasks"] == len(kept) == 6
    assert summary["produced"]["complexity"] == {"easy": 0, "medium": 3, "hard": 3}


async def test_nothing_usable_fails_the_job_with_its_reason(taskgen_llm: Callable[..., str]) -> None:
    url = taskgen_llm(lambda _request, _reply: "Sorry, here you go: {not json")
    async with ChatClient(url, "any-key") as client:
        with pytest.raises(TaskGenFailed) as failure:
            await LLMTaskGenerator(client, SIM_TASKGEN).generate(_request(3), lambda _text: None)
    assert "no usable task" in str(failure.value) and "not valid JSON" in str(failure.value)


async def test_service_jobs_complete_and_fail_through_the_http_api(
    taskgen_llm: Callable[..., str], tmp_path: Path
) -> None:
    good = DefaultTaskGenerator(LLMEndpoint(base_url=taskgen_llm(), default_model=SIM_TASKGEN))
    with running_service(tmp_path / "ok", task_generator=good) as running:
        async with EvaluationClient(running.url, WRITE_KEY) as client:
            job = await client.submit_task_gen(_request(3))
            assert job.status == JobStatus.PENDING
            results = await client.wait_for_task_gen(job.job_id, deadline_seconds=60, poll_interval=0.1)
            done = await client.get_task_gen_job(job.job_id)
    assert results.job_id == job.job_id and len(results.tasks) == 3
    assert done.status == JobStatus.COMPLETED and done.progress == "Step 6/6: running quality gates (3/3)"

    broken_url = taskgen_llm(lambda _request, _reply: "{{{")
    broken = DefaultTaskGenerator(LLMEndpoint(base_url=broken_url, default_model=SIM_TASKGEN))
    with running_service(tmp_path / "broken", task_generator=broken) as running:
        async with EvaluationClient(running.url, WRITE_KEY) as client:
            job = await client.submit_task_gen(_request(2))
            with pytest.raises(JobFailed) as failure:
                await client.wait_for_task_gen(job.job_id, deadline_seconds=60, poll_interval=0.1)
    assert "no usable task" in str(failure.value)


async def test_a_description_reaches_the_prompts_that_decide_what_is_generated(
    taskgen_llm: Callable[..., str],
) -> None:
    """SimLab's `--describe` text is what the user wants generated: the skills and task prompts carry it."""
    seen: dict[str, set[object]] = {}

    def record(request: ChatRequest, reply: str) -> str:
        context = prompt_context(request) or {}
        seen.setdefault(str(context.get("step")), set()).add(context.get("what_to_generate"))
        return reply

    description = "quarterly planning for the finance team"
    async with ChatClient(taskgen_llm(record), "any-key") as client:
        await LLMTaskGenerator(client, SIM_TASKGEN).generate(_request(2, description=description), lambda _t: None)
    assert seen["skills"] == seen["tasks"] == {description}
