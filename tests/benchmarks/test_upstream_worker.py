"""UpstreamWorker: JSON-lines requests to an upstream-style script, its op errors, timeouts, crashes and restarts,
its scrubbed environment, and nothing of it left after close."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from eval_pipelines.benchmarks.worker import UpstreamOpError, UpstreamWorker, WorkerError
from eval_pipelines.lib.confine import abi_version
from tests.benchmarks.upstream_fake import write_fake_script


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for every purpose here
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def worker(tmp_path: Path) -> UpstreamWorker:
    return UpstreamWorker(Path(sys.executable), write_fake_script(tmp_path), {"FAKE_SETTING": "on"})


def test_requests_are_answered_and_an_op_error_leaves_the_worker_running(worker: UpstreamWorker) -> None:
    async def scenario() -> None:
        try:
            assert await worker.request("create", workspace="w1", start=2) == {"state": {"counter": {"value": 2}}}
            answer = await worker.request("call", workspace="w1", name="add", arguments={"by": 3})
            assert answer["result"] == "5"
            pid = worker.pid
            with pytest.raises(UpstreamOpError, match="KeyError"):
                await worker.request("call", workspace="missing", name="add", arguments={})
            # upstream printing on stdout does not corrupt the protocol (the script moves it to stderr)
            assert await worker.request("chatty") == "answered"
            assert worker.pid == pid and worker.generation == 1
        finally:
            await worker.close()

    asyncio.run(scenario())


def test_the_worker_environment_is_scrubbed(worker: UpstreamWorker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")

    async def scenario() -> list[str]:
        try:
            names: list[str] = await worker.request("env")
            return names
        finally:
            await worker.close()

    names = asyncio.run(scenario())
    assert "OPENAI_API_KEY" not in names and "PYTHONPATH" not in names
    assert "FAKE_SETTING" in names


def test_a_timeout_kills_the_worker_and_the_next_request_restarts_it(worker: UpstreamWorker) -> None:
    async def scenario() -> None:
        try:
            await worker.request("create", workspace="w1")
            first = worker.pid
            assert first is not None
            with pytest.raises(WorkerError, match="took longer than"):
                await worker.request("call", workspace="w1", name="hang", arguments={}, timeout=0.5)
            assert _gone(first)
            # a fresh process, which no longer holds the old workspace
            with pytest.raises(UpstreamOpError):
                await worker.request("call", workspace="w1", name="add", arguments={})
            assert worker.generation == 2 and worker.pid != first
        finally:
            await worker.close()

    asyncio.run(scenario())


def test_a_crash_is_a_worker_error_quoting_stderr_and_the_worker_restarts(worker: UpstreamWorker) -> None:
    async def scenario() -> None:
        try:
            await worker.request("create", workspace="w1")
            with pytest.raises(WorkerError, match="the fake backend dies"):
                await worker.request("call", workspace="w1", name="crash", arguments={})
            assert await worker.request("create", workspace="w2", start=7) == {"state": {"counter": {"value": 7}}}
            assert worker.generation == 2
        finally:
            await worker.close()

    asyncio.run(scenario())


def test_close_leaves_no_process_behind(worker: UpstreamWorker) -> None:
    async def scenario() -> tuple[int, int]:
        child = await worker.request("spawn")
        pid = worker.pid
        assert pid is not None and _alive(child)
        await worker.close()
        assert not worker.is_running()
        return pid, child

    pid, child = asyncio.run(scenario())
    assert _gone(pid) and _gone(child)


@pytest.mark.skipif(abi_version() < 1, reason="no Landlock on this kernel: writes cannot be confined")
def test_the_worker_writes_only_in_its_temp_directory(worker: UpstreamWorker, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"

    async def scenario() -> str:
        try:
            with pytest.raises(UpstreamOpError, match="PermissionError"):
                await worker.request("write", path=str(outside))
            workdir: str = await worker.request("write", path="inside.txt")
            return workdir
        finally:
            await worker.close()

    workdir = asyncio.run(scenario())
    assert not outside.exists()
    assert not Path(workdir).exists()  # the temp directory goes with the worker
