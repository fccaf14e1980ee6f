"""The local runtime's tool servers: one child process shared by every runtime, replaced if it dies."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.runtime.local import LocalRuntime, shared_tool_host


def test_runtimes_share_one_tool_server_process(tmp_path: Path) -> None:
    first = LocalRuntime(ScenarioCatalog())
    other = LocalRuntime(ScenarioCatalog(tmp_path))
    try:
        assert first.tool_host_pid == other.tool_host_pid != os.getpid()
        assert first.tool_server_urls() == other.tool_server_urls()
        assert httpx.get(first.tool_server_urls()["email"].rsplit("/", 1)[0] + "/health").status_code == 200
    finally:
        first.stop()
        other.stop()
    assert shared_tool_host().is_alive()  # stopping a runtime leaves the shared servers to the others


def test_a_dead_tool_server_process_is_replaced() -> None:
    runtime = LocalRuntime(ScenarioCatalog())
    try:
        dead = runtime.tool_host_pid
        assert dead is not None
        os.kill(dead, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while shared_tool_host().pid == dead and time.monotonic() < deadline:
            time.sleep(0.05)
        fresh = runtime.tool_host_pid
        assert fresh is not None and fresh != dead
        email = runtime.tool_server_urls()["email"]
        assert httpx.post(f"{email}/workspaces", json={"seed": []}).status_code == 201
    finally:
        runtime.stop()


@pytest.mark.slow
def test_a_tool_host_busy_for_seconds_is_kept_and_a_frozen_one_replaced() -> None:
    # Busy: a thousand rollouts' tool calls queued before its /health. Its workspaces must outlive that.
    runtime = LocalRuntime(ScenarioCatalog())
    host = runtime.tool_host_pid
    assert host is not None
    try:
        os.kill(host, signal.SIGSTOP)
        time.sleep(5.0)
        os.kill(host, signal.SIGCONT)
        time.sleep(1.0)
        assert shared_tool_host().pid == host
        os.kill(host, signal.SIGSTOP)
        deadline = time.monotonic() + 40
        while shared_tool_host().pid == host and time.monotonic() < deadline:
            time.sleep(0.1)
        assert shared_tool_host().pid != host
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(host, signal.SIGCONT)
        runtime.stop()
