"""Rollout worker processes: one run's rollouts spread over several processes, so a run at high concurrency
uses every core instead of queueing behind one interpreter lock.

The executor that starts a run keeps a share of `max_parallel` for itself and starts `workers - 1` children
(`python -m eval_pipelines.service.worker_main`) with the rest. Every process walks the run's pending rollouts
and claims each one in the store before running it (`pending -> running` is atomic), so none runs twice and
whoever has a free slot takes the next. A child gets its job, model keys included, on stdin: the keys are
never on a command line, in the environment or on disk. It exits when its share is done, when the run is
cancelled (it reads the store's cancel flag) or when its parent is gone; a rollout a dead child left
`running` is failed with `server_restart` by the parent, and a resume re-queues it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipelines.schemas.model_config import ModelConfig

logger = logging.getLogger(__name__)

#: Environment variable that fixes the number of processes a run uses (1 = everything in this process).
WORKERS_ENV = "EVAL_PIPELINES_ROLLOUT_WORKERS"
#: Concurrent rollouts one process serves comfortably before a second one pays for its start-up. Measured on
#: benchmarks/latency_hiding.py (200 ms per model call): at 50 in flight one process hid more latency than two
#: and spent less CPU per rollout, since a worker's start-up and the parent's polling of it cost more than the
#: second core gave.
ROLLOUTS_PER_WORKER = 64
#: How often a child checks that the process that started it is still alive.
PARENT_WATCH_SECONDS = 1.0
READY = b"ready"
#: The worker's entry point (a module of its own: it imports the executor, which imports this module).
WORKER_MODULE = "eval_pipelines.service.worker_main"
GRANT = b"+"


def available_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def rollout_workers(max_parallel: int, configured: int | None = None) -> int:
    """How many processes run a run of `max_parallel` concurrent rollouts.

    `configured` (or the `EVAL_PIPELINES_ROLLOUT_WORKERS` environment variable) wins; otherwise one process
    per `ROLLOUTS_PER_WORKER` concurrent rollouts, at most one per CPU.
    """
    if configured is None:
        raw = os.environ.get(WORKERS_ENV, "").strip()
        if raw:
            try:
                configured = int(raw)
            except ValueError:
                raise ValueError(f"{WORKERS_ENV} must be a whole number, got {raw!r}") from None
            if configured < 1:
                raise ValueError(f"{WORKERS_ENV} must be at least 1, got {configured}")
    if configured is not None:
        return max(1, min(configured, max_parallel))
    return max(1, min(available_cpus(), max_parallel // ROLLOUTS_PER_WORKER))


def split_parallel(max_parallel: int, workers: int) -> list[int]:
    """`max_parallel` slots over `workers` processes, as evenly as possible, every share at least 1."""
    base, extra = divmod(max_parallel, workers)
    return [base + (1 if index < extra else 0) for index in range(workers) if base + (1 if index < extra else 0)]


@dataclass(frozen=True)
class WorkerJob:
    """Everything a child needs to run its share of a run. Holds keys: it only ever travels over a pipe."""

    store_path: Path
    artifacts_dir: Path
    scenarios_dir: Path
    run_id: str
    model_config: ModelConfig
    user_model_config: ModelConfig | None
    max_parallel: int
    timeout_seconds: float
    tool_server_urls: dict[str, str]
    parent_pid: int
    simulator_judge_config: ModelConfig | None = None

    def to_wire(self) -> bytes:
        def config(value: ModelConfig | None) -> dict[str, Any] | None:
            if value is None:
                return None
            return {**value.model_dump(mode="json", by_alias=True), "api_key": value.reveal_api_key()}

        return json.dumps(
            {
                "store_path": str(self.store_path),
                "artifacts_dir": str(self.artifacts_dir),
                "scenarios_dir": str(self.scenarios_dir),
                "run_id": self.run_id,
                "model_config": config(self.model_config),
                "user_model_config": config(self.user_model_config),
                "simulator_judge_config": config(self.simulator_judge_config),
                "max_parallel": self.max_parallel,
                "timeout_seconds": self.timeout_seconds,
                "tool_server_urls": self.tool_server_urls,
                "parent_pid": self.parent_pid,
            }
        ).encode()

    @classmethod
    def from_wire(cls, raw: bytes) -> WorkerJob:
        data = json.loads(raw)
        user = data["user_model_config"]
        judge = data.get("simulator_judge_config")
        return cls(
            store_path=Path(data["store_path"]),
            artifacts_dir=Path(data["artifacts_dir"]),
            scenarios_dir=Path(data["scenarios_dir"]),
            run_id=data["run_id"],
            model_config=ModelConfig.model_validate(data["model_config"]),
            user_model_config=None if user is None else ModelConfig.model_validate(user),
            max_parallel=int(data["max_parallel"]),
            timeout_seconds=float(data["timeout_seconds"]),
            tool_server_urls=dict(data["tool_server_urls"]),
            parent_pid=int(data["parent_pid"]),
            simulator_judge_config=None if judge is None else ModelConfig.model_validate(judge),
        )


class WorkerProcess:
    """A started child. The protocol over its pipes, one line each: the job (JSON) on stdin; `ready` on stdout
    once it can take rollouts; then `+` on stdin for every slot its parent hands over, and end of input when
    the parent is done (the worker may then use its whole share)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, job: WorkerJob) -> WorkerProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            WORKER_MODULE,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdin is not None
        process.stdin.write(job.to_wire() + b"\n")
        await process.stdin.drain()
        return cls(process)

    @property
    def pid(self) -> int:
        return self.process.pid

    async def ready(self) -> bool:
        """True once the worker reports it is ready; False if it exited first."""
        assert self.process.stdout is not None
        return (await self.process.stdout.readline()).strip() == READY

    def grant(self) -> None:
        """Hand the worker one more slot."""
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.write(GRANT + b"\n")

    def no_more_grants(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()

    async def wait(self) -> int:
        return await self.process.wait()

    async def terminate(self, grace_seconds: float = 5.0) -> None:
        if self.process.returncode is not None:
            return
        self.process.terminate()
        try:
            await asyncio.wait_for(self.process.wait(), grace_seconds)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
