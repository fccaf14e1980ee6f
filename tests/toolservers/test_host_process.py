"""ToolServerProcess: the built-in tool servers in a child process, reached over loopback HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from eval_pipelines.toolservers import ToolServerAdmin
from eval_pipelines.toolservers.host import LISTEN_BACKLOG, ToolServerProcess

REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z")


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


async def test_serves_every_requested_server_and_workspaces() -> None:
    with ToolServerProcess(["email", "chat"]) as host:
        assert host.pid is not None and host.pid != os.getpid()
        health = httpx.get(f"{host.url}/health").json()
        assert health == {"status": "healthy", "servers": ["chat", "email"]}
        admin = ToolServerAdmin()
        try:
            email = {
                "id": "e-1",
                "from": "a@b.c",
                "to": ["d@e.f"],
                "subject": "hi",
                "body": "x",
                "timestamp": "2025-01-01T09:00:00Z",
            }
            url, state = await admin.create_seeded_workspace(host.base_url("email"), [{"emails": [email]}])
            assert state is not None and set(state["emails"]) == {"e-1"}
            assert await admin.snapshot(url) == state
            await admin.delete_workspace(url)
        finally:
            await admin.aclose()
        with pytest.raises(KeyError, match="not hosted here"):
            host.base_url("files")


def test_stop_ends_the_child_and_closes_the_port() -> None:
    host = ToolServerProcess(["email"]).start()
    pid, url = host.pid, host.url
    assert pid is not None
    host.stop()
    assert _wait_gone(pid, 10)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/health", timeout=1.0)
    with pytest.raises(RuntimeError, match="not started"):
        host.base_url("email")


def test_unknown_servers_are_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="fax"):
        ToolServerProcess(["email", "fax"])


@pytest.mark.slow
def test_the_child_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = textwrap.dedent(
        f"""
        import pathlib, time
        from eval_pipelines.toolservers.host import ToolServerProcess
        host = ToolServerProcess(["email"]).start()
        pathlib.Path({str(pid_file)!r}).write_text(str(host.pid))
        time.sleep(600)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        child = int(pid_file.read_text())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)  # no atexit, no cleanup: only the child's own watch can notice
        parent.wait(10)
        assert _wait_gone(child, 15), "the tool server process outlived its parent"
    finally:
        parent.kill()


def test_the_host_queues_a_thousand_connections_and_may_open_as_many_files_as_allowed() -> None:
    # A thousand rollouts whose model calls answer together connect at once: none may be dropped for a short
    # accept queue, and each holds a descriptor in the host.
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    with ToolServerProcess(["email"]) as host:
        listing = subprocess.run(
            ["ss", "-ltnH", f"sport = :{host.port}"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.split()
        limits = Path(f"/proc/{host.pid}/limits").read_text().splitlines()
    backlog = int(listing[2])  # State Recv-Q Send-Q ...: a listener's Send-Q is its backlog
    assert backlog == min(LISTEN_BACKLOG, somaxconn) and backlog >= 1000
    soft, hard = next(line.split()[3:5] for line in limits if line.startswith("Max open files"))
    assert soft == hard
