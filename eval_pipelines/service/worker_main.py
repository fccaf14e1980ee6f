"""The rollout worker's entry point: `python -m eval_pipelines.service.worker_main`, started by `WorkerProcess`
(service/workers.py, which explains the protocol). Kept apart from workers.py because it runs the executor, and
the executor starts workers: one module each way, no import cycle."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib import aio
from eval_pipelines.lib.confine import make_undumpable
from eval_pipelines.lib.redact import install_log_redaction
from eval_pipelines.lib.slots import SlotPool
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.service.executor import NotFound, RunExecutor
from eval_pipelines.service.store import RunStore
from eval_pipelines.service.workers import GRANT, PARENT_WATCH_SECONDS, READY, WorkerJob

logger = logging.getLogger(__name__)


class StaticRuntime:
    """A child's view of the parent's runtime: the tool servers it already started, configs already resolved."""

    def __init__(self, tool_server_urls: dict[str, str]) -> None:
        self._urls = dict(tool_server_urls)

    def start(self) -> StaticRuntime:
        return self  # the parent started them

    def tool_server_urls(self) -> dict[str, str]:
        return dict(self._urls)

    def resolve(self, config: ModelConfig) -> ModelConfig:
        return config


async def _stdin_reader() -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def _receive_slots(reader: asyncio.StreamReader, slots: SlotPool, share: int) -> None:
    """One slot per grant line; at end of input (the parent is done) whatever is left of the share."""
    granted = 0
    while granted < share:
        line = await reader.readline()
        if not line:
            break
        if line.strip() == GRANT:
            slots.grant()
            granted += 1
    slots.grant(share - granted)


async def _run_job() -> None:
    reader = await _stdin_reader()
    job = WorkerJob.from_wire(await reader.readline())
    store = RunStore(job.store_path)
    executor = RunExecutor(store, ScenarioCatalog(job.scenarios_dir), StaticRuntime(job.tool_server_urls),
                           job.artifacts_dir, workers=1)  # fmt: skip
    run = store.get_run(job.run_id)
    if run is None:
        raise NotFound(f"run {job.run_id!r} not found")
    request = store.run_request(job.run_id) or {}
    slots = SlotPool(0, capacity=job.max_parallel)
    receiving = asyncio.ensure_future(_receive_slots(reader, slots, job.max_parallel))
    config, user_config = job.model_config, job.user_model_config
    share = asyncio.ensure_future(
        executor.execute_share(
            run, request, config, user_config, slots, job.timeout_seconds, None, job.simulator_judge_config
        )
    )
    sys.stdout.buffer.write(READY + b"\n")
    sys.stdout.buffer.flush()
    try:
        while not share.done():
            await asyncio.wait({share}, timeout=PARENT_WATCH_SECONDS)
            if not share.done() and os.getppid() != job.parent_pid:
                logger.warning("rollout worker %d: parent %d is gone; stopping", os.getpid(), job.parent_pid)
                share.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await share
    finally:
        receiving.cancel()
        executor.fail_own_interrupted()
        executor.close()


def main() -> int:
    # This process holds keys: nothing a model or verifier runs may read its memory or environment.
    make_undumpable()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_redaction()
    aio.run(_run_job())
    return 0


if __name__ == "__main__":
    sys.exit(main())
