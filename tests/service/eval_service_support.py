"""Shared pieces of the evaluation-service and client tests: settings, keys, a test task generator."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.runs import RunLaunchRequest
from eval_pipelines.schemas.taskgen import GeneratedFile, TaskGenRequest, TaskGenResults
from eval_pipelines.service.api import EvaluationService, create_app, service_of
from eval_pipelines.service.settings import ServiceSettings
from eval_pipelines.service.taskgen_jobs import ProgressFn, TaskGenerationError

WRITE_KEY = "test-write-key-7f3a9c"
READ_KEY = "test-read-key-41bd02"
#: The service reads its keys from configuration; the tests hand it this environment.
KEYS_ENV = {"EVAL_SERVICE_API_KEYS": f"{WRITE_KEY}:write,{READ_KEY}:read"}
SCENARIO = "email_ops:1.0.0"
SIM_ORACLE = {"model": "sim-oracle", "base_url": "sim://local", "api_key": "x"}


def settings_for(data_dir: Path, **overrides: Any) -> ServiceSettings:
    return ServiceSettings.from_environment(data_dir, environ=KEYS_ENV, **overrides)


def launch(task_ids: list[str], model_config: dict[str, Any] | None = None, **fields: Any) -> RunLaunchRequest:
    return RunLaunchRequest.model_validate(
        {"scenario_id": SCENARIO, "task_ids": task_ids, "model_config": model_config or SIM_ORACLE, **fields}
    )


def scripted_model(url: str) -> dict[str, Any]:
    """A ModelConfig for the scripted OpenAI-compatible stand-in (tests/support/scripted_llm.py)."""
    return {"model": "scripted", "base_url": f"{url}/v1", "api_key": "scripted-key-123456"}


@dataclass
class GatedGenerator:
    """A test TaskGenerator: waits for `gate` (so a job can be seen running), then completes or fails."""

    gate: threading.Event = field(default_factory=threading.Event)
    fail_with: str | None = None

    async def generate(self, request: TaskGenRequest, progress: ProgressFn) -> TaskGenResults:
        progress("Step 1: Waiting for the gate")
        # Polled on the loop rather than waited for on a thread: a stopping service can cancel it at once.
        for _ in range(3000):
            if self.gate.is_set():
                break
            await asyncio.sleep(0.01)
        else:
            raise TaskGenerationError("the test gate never opened")
        if self.fail_with is not None:
            raise TaskGenerationError(self.fail_with)
        progress("Step 3: Generate tasks")
        tools = [tool["name"] for tool in request.toolset]
        return TaskGenResults(
            job_id="ignored",
            tasks=[GeneratedFile(filename=f"task_{i}.json", content="{}") for i in range(request.num_tasks)],
            instructions=[GeneratedFile(filename="instructions.md", content=f"use {tools}")],
            skills_md="# skills",
        )


@dataclass
class RunningService:
    server: BackgroundServer
    service: EvaluationService

    @property
    def url(self) -> str:
        return self.server.url


@contextmanager
def running_service(data_dir: Path, **overrides: Any) -> Iterator[RunningService]:
    app = create_app(settings_for(data_dir, **overrides))
    with BackgroundServer(app) as server:
        yield RunningService(server, service_of(app))
