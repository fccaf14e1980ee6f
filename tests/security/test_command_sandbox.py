"""`run_command`, as a model reaches it (the files server over HTTP), sees only its workspace and the system's
programs: no file of the host beside them, no other process, no network. Where the kernel refuses the
namespaces, the server says so and falls back to Landlock and limits."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from eval_pipelines.cli import main as cli_main
from eval_pipelines.lib.confine import confined_argv
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.toolservers import create_app
from eval_pipelines.toolservers.files import (
    COMMAND_FILE_BYTES,
    COMMAND_MEMORY_BYTES,
    COMMAND_WRAPPER_ENV,
    SANDBOX_LANDLOCK_ONLY,
    SANDBOX_NAMESPACES,
    FilesServer,
    command_sandbox,
)
from eval_pipelines.toolservers.host import ToolServerHost, ToolServerProcess
from tests.security.support_sandbox import refusing_wrapper
from tests.toolservers._helpers import new_workspace, step

pytestmark = pytest.mark.skipif(
    command_sandbox().mode != SANDBOX_NAMESPACES, reason=f"no namespaces here: {command_sandbox().reason}"
)


def _canary() -> str:
    return f"canary-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def files_url() -> Iterator[str]:
    with BackgroundServer(create_app(FilesServer())) as server:
        yield server.url


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60.0) as http:
        yield http


@pytest.fixture
def workspace(client: httpx.Client, files_url: str) -> str:
    return new_workspace(client, files_url, [{"files": [{"path": "notes.txt", "content": "inside\n"}]}])


def run(client: httpx.Client, workspace: str, command: str) -> str:
    observation: str = step(client, workspace, "run_command", command=command)["observation"]
    return observation


@pytest.fixture
def canary_process() -> Iterator[tuple[int, str]]:
    """Another process of this host with a canary in its command line and in its environment."""
    canary = _canary()
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", f"--api-key={canary}"],
        stdin=subprocess.PIPE,
        env={**os.environ, "OPENAI_API_KEY": canary},
    )
    yield process.pid, canary
    process.kill()
    process.wait()


def test_files_beside_the_workspace_are_out_of_sight(client: httpx.Client, workspace: str, tmp_path: Path) -> None:
    canary = _canary()
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text(f"OPENAI_API_KEY={canary}\n")
    workspace_dir = run(client, workspace, "pwd").splitlines()[3]

    seen = run(client, workspace, f"cat {project}/.env; cat notes.txt; ls -a /tmp {project} {Path.home()} /")
    assert canary not in seen
    assert "No such file or directory" in seen and "inside" in seen  # the command ran, and sees its own files
    assert (Path(workspace_dir) / "notes.txt").is_file()  # the command's cwd is the workspace's path on the host
    listing = run(client, workspace, f"ls {Path(workspace_dir).parent}")
    assert listing.splitlines()[3:5] == [Path(workspace_dir).name, "stderr:"]  # no other workspace beside it


def test_no_other_process_is_visible(client: httpx.Client, workspace: str, canary_process: tuple[int, str]) -> None:
    pid, canary = canary_process
    # Filtered, because the output a model gets is capped: the whole host's `ps` would overflow it.
    listing = run(client, workspace, "ps e -ww -eo pid,args | grep -F -e api-key= -e OPENAI_API_KEY=")
    read = run(client, workspace, f"cat /proc/{pid}/cmdline /proc/{pid}/environ /proc/1/environ /proc/1/cmdline")
    assert "ps e -ww -eo pid,args" in listing  # ps ran and listed the command's own processes
    assert "eval_pipelines.lib.confine" in read  # pid 1 is the sandbox's own init
    seen = listing + read
    assert canary not in seen


def test_no_connection_leaves_the_sandbox(client: httpx.Client, workspace: str) -> None:
    canary = _canary()
    accepted: list[socket.socket] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            listener.settimeout(0.5)
            while listener.fileno() != -1:
                try:
                    connection, _ = listener.accept()
                except (TimeoutError, OSError):
                    continue
                accepted.append(connection)
                connection.sendall(f"HTTP/1.0 200 OK\r\n\r\n{canary}".encode())
                connection.close()

        threading.Thread(target=serve, daemon=True).start()
        attempts = [
            f"curl -sS -m 3 http://127.0.0.1:{port}/",
            f"python3 -c \"import socket; print(socket.create_connection(('127.0.0.1', {port}), 3).recv(999))\"",
            f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; cat <&3'",
        ]
        seen = [run(client, workspace, attempt) for attempt in attempts]
    assert all(canary not in observation and "exit code: 0" not in observation for observation in seen), seen
    assert accepted == []
    # Its own loopback works: a command may still run a server and a client of its own.
    own = run(
        client,
        workspace,
        "python3 -c \"import socket; s = socket.create_server(('127.0.0.1', 0)); "
        "c = socket.create_connection(s.getsockname()); s.accept()[0].sendall(b'pong'); print(c.recv(4))\"",
    )
    assert "b'pong'" in own


def test_the_workspace_stays_writable_and_the_system_read_only(client: httpx.Client, workspace: str) -> None:
    seen = run(
        client,
        workspace,
        "echo made > made.txt && echo scratch > /tmp/scratch && cat /tmp/scratch; touch /usr/x /etc/x /x;"
        " cat /etc/shadow; ls /etc/ssh | wc -l",
    )
    lines = seen.splitlines()
    assert lines[3:5] == ["scratch", "0"], seen
    assert seen.count("Read-only file system") == 3
    assert "root:" not in seen  # the password hashes are hidden


def test_without_namespaces_the_host_says_so_and_falls_back(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    canary_process: tuple[int, str],
) -> None:
    monkeypatch.setenv(COMMAND_WRAPPER_ENV, str(refusing_wrapper(tmp_path)))
    with caplog.at_level(logging.WARNING), ToolServerHost(["files"]) as host, httpx.Client(timeout=60.0) as client:
        health = client.get(f"{host.url}/health").json()
        seen = run(client, new_workspace(client, host.base_url("files")), f"cat /proc/{canary_process[0]}/cmdline")
    assert health["command_sandbox"] == SANDBOX_LANDLOCK_ONLY
    assert any("NOT sandboxed" in record.getMessage() for record in caplog.records)
    assert cli_main(["sandbox"]) == 1
    assert capsys.readouterr().out == (
        "run_command sandbox: landlock-only (sandbox: unshare: Operation not permitted)\n"
    )
    # The fallback runs the command through the wrapper without namespaces: the host's processes are in view.
    assert "exit code: 0" in seen and canary_process[1] in seen


def test_a_tool_host_process_warns_in_the_sweeps_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # The host a sweep starts is a child process with an allow-listed environment: the wrapper must reach it,
    # and its warning must reach the sweep's stderr.
    monkeypatch.setenv(COMMAND_WRAPPER_ENV, str(refusing_wrapper(tmp_path)))
    with ToolServerProcess(["files"]) as host:
        health = httpx.get(f"{host.url}/health").json()
    assert health["command_sandbox"] == SANDBOX_LANDLOCK_ONLY
    assert "run_command is NOT sandboxed in namespaces" in capfd.readouterr().err


def test_the_host_and_the_cli_report_the_sandbox(capsys: pytest.CaptureFixture[str]) -> None:
    with ToolServerHost(["files"]) as host:
        assert httpx.get(f"{host.url}/health").json()["command_sandbox"] == SANDBOX_NAMESPACES
    assert cli_main(["sandbox"]) == 0
    assert capsys.readouterr().out == "run_command sandbox: namespaces\n"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_a_host_that_is_not_root_sandboxes_through_a_user_namespace() -> None:
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if subprocess.run([*nobody, sys.executable, "-I", "-c", "import eval_pipelines"], check=False).returncode:
        pytest.skip("this interpreter is out of an unprivileged user's reach")
    with tempfile.TemporaryDirectory() as parent:  # pytest's tmp_path is private to root
        workspace = Path(parent) / "ws"
        workspace.mkdir()
        os.chmod(parent, 0o755)
        os.chown(workspace, 65534, 65534)
        _check_unprivileged_sandbox(nobody, workspace)


def _check_unprivileged_sandbox(nobody: list[str], workspace: Path) -> None:
    launcher = confined_argv(
        ["/bin/sh", "-c", "ps -eo pid= | wc -l; echo made > made.txt; cat /proc/1/cmdline"],
        writable=workspace,
        memory_bytes=COMMAND_MEMORY_BYTES,
        cpu_seconds=5,
        file_bytes=COMMAND_FILE_BYTES,
        sandbox=True,
    )
    done = subprocess.run([*nobody, *launcher], cwd=workspace, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].strip() in {"3", "4"}  # init, sh, ps (and wc): nothing of the host
    assert (workspace / "made.txt").stat().st_uid == 65534  # root inside is that user outside
