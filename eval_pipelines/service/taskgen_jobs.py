"""Task-generation jobs (spec 000 `/v1/task-gen`): pending -> running -> completed | failed, with progress.

The job mechanics live here; the generation engine is pluggable (`TaskGenerator`); the service's default is
`eval_pipelines.taskgen.DefaultTaskGenerator` (schema-driven offline, LLM-driven when configured).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Protocol

from eval_pipelines.llm.errors import scrub_secrets, truncate
from eval_pipelines.schemas.taskgen import TaskGenJob, TaskGenRequest, TaskGenResults
from eval_pipelines.service.store import Runner, RunStore
from eval_pipelines.taskgen.errors import TaskGenFailed

logger = logging.getLogger(__name__)

DEFAULT_JOB_TIMEOUT_SECONDS = 3600.0
MAX_ERROR_CHARS = 2000

ProgressFn = Callable[[str], None]


class TaskGenerationError(Exception):
    """A generator's way to fail a job with a message meant for the caller (it becomes the job's `error`)."""


class TaskGenerator(Protocol):
    async def generate(self, request: TaskGenRequest, progress: ProgressFn) -> TaskGenResults:
        """Produce the job's results; call `progress("Step 3: Generate tasks")` as the work advances."""
        ...


class TaskGenJobs:
    """Runs jobs as background tasks of the service's event loop; state lives in the store."""

    def __init__(
        self,
        store: RunStore,
        generator: TaskGenerator,
        *,
        runner: Runner | None = None,
        job_timeout_seconds: float = DEFAULT_JOB_TIMEOUT_SECONDS,
    ) -> None:
        self.store = store
        self.generator = generator
        self.runner = runner or Runner.current()
        self.job_timeout_seconds = job_timeout_seconds
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def submit(self, request: TaskGenRequest) -> TaskGenJob:
        job_id = str(uuid.uuid4())
        job = self.store.create_job(job_id, request.model_dump(mode="json"), self.runner)
        task = asyncio.create_task(self._run(job_id, request), name=f"taskgen:{job_id}")
        self._tasks[job_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job_id, None))
        return job

    async def _run(self, job_id: str, request: TaskGenRequest) -> None:
        if not self.store.start_job(job_id, self.runner):
            return

        def progress(text: str) -> None:
            self.store.set_job_progress(job_id, truncate(str(text), 500))

        try:
            async with asyncio.timeout(self.job_timeout_seconds):
                results = await self.generator.generate(request, progress)
        except (TaskGenerationError, TaskGenFailed) as exc:
            self.store.fail_job(job_id, self._error_text(str(exc)))
        except TimeoutError:
            self.store.fail_job(job_id, f"task generation did not finish within {self.job_timeout_seconds:g}s")
        except Exception as exc:  # a generator bug fails its job, never the service
            logger.exception("task-generation job %s crashed", job_id)
            self.store.fail_job(job_id, self._error_text(f"task generation failed: {type(exc).__name__}: {exc}"))
        else:
            self.store.complete_job(job_id, results.model_copy(update={"job_id": job_id}))

    @staticmethod
    def _error_text(text: str) -> str:
        return truncate(scrub_secrets(text), MAX_ERROR_CHARS) or "task generation failed"

    async def aclose(self, timeout_seconds: float = 5.0) -> None:
        """Stop running jobs on shutdown; they are failed, since their results would never arrive."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_seconds):
                    await asyncio.gather(*tasks, return_exceptions=True)
        self.store.fail_interrupted_jobs(runner=self.runner)
