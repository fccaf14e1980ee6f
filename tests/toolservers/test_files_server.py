"""The files/coding tool server over real HTTP: file tools, confinement (safety), run_command, seeding, diffs."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.tools import StateDiff, ToolDefinition
from eval_pipelines.toolservers import create_app
from eval_pipelines.toolservers.files import MIRROR_CONTENT_BYTES, FilesServer

from ._helpers import new_workspace, state, step

EXPECTED_TOOLS = {"read_file": False, "write_file": True, "list_dir": False, "run_command": True}
FILES_SEED: dict[str, Any] = {
    "files": [
        {"path": "README.md", "content": "# Demo\n"},
        {"path": "src/app.py", "content": "print('hello')\n"},
    ]
}
OUTSIDE_SECRET = "top secret outside the workspace"


@pytest.fixture(scope="module")
def files_server() -> FilesServer:
    return FilesServer()


@pytest.fixture(scope="module")
def files_url(files_server: FilesServer) -> Iterator[str]:
    with BackgroundServer(create_app(files_server)) as server:
        yield server.url


@pytest.fixture
def seeded(client: httpx.Client, files_url: str) -> str:
    return new_workspace(client, files_url, [FILES_SEED])


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to (not inside) any workspace, holding a file the file tools must never reach."""
    (tmp_path / "secret.txt").write_text(OUTSIDE_SECRET)
    return tmp_path


def _workspace_dir(client: httpx.Client, url: str) -> Path:
    return Path(step(client, url, "run_command", command="pwd")["observation"].splitlines()[3])


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


def _unique_sleep() -> str:
    """A `sleep` whose argument no other process has: the command runs in a PID namespace of its own, so the
    pids it reports mean nothing here, and its processes are found by their command line instead."""
    return f"sleep 300.{uuid.uuid4().int % 10**9:09d}"


def _running(command_line: str) -> bool:
    """Some live process of this host has `command_line` within its arguments."""
    for proc in Path("/proc").iterdir():
        try:
            if command_line.encode() in (proc / "cmdline").read_bytes().replace(b"\0", b" ") and _alive(int(proc.name)):
                return True
        except (OSError, ValueError):
            continue
    return False


def _eventually(condition: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        gc.collect()
        time.sleep(0.05)
    return bool(condition())


# -- listing, seeding, snapshots ---------------------------------------------------------------------------


def test_tool_listing(client: httpx.Client, files_url: str, seeded: str) -> None:
    tools = client.get(f"{files_url}/tools").json()["tools"]
    assert client.get(f"{seeded}/tools").json()["tools"] == tools
    assert {t["name"]: t["mutates_state"] for t in tools} == EXPECTED_TOOLS
    for tool in tools:
        ToolDefinition.model_validate(tool)
        Draft202012Validator.check_schema(tool["parameters"])
        assert tool["description"] and set(tool["parameters"]["required"]) <= set(tool["parameters"]["properties"])
        assert all(p["type"] and p["description"] for p in tool["parameters"]["properties"].values())
    run = next(t for t in tools if t["name"] == "run_command")["parameters"]["properties"]["timeout_seconds"]
    assert run["default"] == 10 and run["maximum"] == 60


def test_seed_lands_on_disk_and_in_the_snapshot(client: httpx.Client, files_url: str, seeded: str) -> None:
    snapshot = client.get(f"{seeded}/snapshot").json()
    files = snapshot["state"]["files"]
    assert sorted(files) == ["README.md", "src/app.py"]
    assert files["src/app.py"] == {
        "path": "src/app.py",
        "type": "file",
        "size": 15,
        "sha256": hashlib.sha256(b"print('hello')\n").hexdigest(),
        "content": "print('hello')\n",
        "truncated": False,
        "binary": False,
    }
    assert "src/app.py (15 bytes" in snapshot["text"] and "    | print('hello')" in snapshot["text"]
    assert step(client, seeded, "run_command", command="cat src/app.py")["observation"].splitlines()[3] == (
        "print('hello')"
    )
    # The engine's path: create empty, then seed.
    late = new_workspace(client, files_url)
    assert state(client, late) == {"files": {}}
    assert client.post(f"{late}/seed", json={"seed": [FILES_SEED]}).status_code == 200
    assert step(client, late, "read_file", path="README.md")["observation"] == "# Demo\n"


@pytest.mark.parametrize(
    ("seed", "fragment"),
    [
        (["x"], "seed file 0"),
        ([{"paths": []}], "unknown key"),
        ([{"files": {"a": "b"}}], "files: expected a list"),
        ([{"files": [{"path": "../evil", "content": "x"}]}], "files[0]: path"),
        ([{"files": [{"path": "/etc/evil", "content": "x"}]}], "files[0]: path"),
        ([{"files": [{"path": "ok.txt", "content": 5}]}], "files[0]: content"),
        ([{"files": [{"path": "ok.txt", "content": "x", "mode": 7}]}], "files[0]: unknown field"),
        ([FILES_SEED, {"files": [{"path": "", "content": "x"}]}], "seed file 1: files[0]: path"),
    ],
)
def test_malformed_seed_is_400_and_writes_nothing(
    client: httpx.Client, files_url: str, files_server: FilesServer, seed: list[Any], fragment: str
) -> None:
    before = sorted(files_server.root.iterdir())
    response = client.post(f"{files_url}/workspaces", json={"workspace_id": "bad-seed", "seed": seed})
    assert response.status_code == 400, response.text
    assert fragment in response.json()["detail"]
    assert client.get(f"{files_url}/workspaces/bad-seed/snapshot").status_code == 404
    assert _eventually(lambda: sorted(files_server.root.iterdir()) == before)


# -- file tools ------------------------------------------------------------------------------------------


def test_write_read_and_list(client: httpx.Client, seeded: str) -> None:
    created = step(client, seeded, "write_file", path="docs/notes/todo.txt", content="ship it\n")
    assert created["observation"] == "Wrote 8 bytes to 'docs/notes/todo.txt' (new file)."
    diff = StateDiff.model_validate(created["state_diff"])
    assert diff.summary == "+1 file(s) added" and diff.tool_name == "write_file"
    assert diff.after["files"]["docs/notes/todo.txt"]["content"] == "ship it\n"
    replaced = step(client, seeded, "write_file", path="./README.md", content="# Demo v2\n")
    assert replaced["observation"] == "Wrote 10 bytes to 'README.md' (replaced 7 bytes)."
    assert replaced["state_diff"]["summary"] == "~1 file(s) changed"
    assert replaced["state_diff"]["before"]["files"]["README.md"]["content"] == "# Demo\n"
    same = step(client, seeded, "write_file", path="README.md", content="# Demo v2\n")
    assert "state_diff" not in same  # identical content: nothing to report
    assert step(client, seeded, "read_file", path="docs/../README.md")["observation"] == "# Demo v2\n"
    root = step(client, seeded, "list_dir")
    assert "state_diff" not in root
    assert root["observation"] == "'.' has 3 entries:\nREADME.md (10 bytes)\ndocs/\nsrc/"
    assert step(client, seeded, "list_dir", path="docs/notes")["observation"] == (
        "'docs/notes' has 1 entry:\ntodo.txt (8 bytes)"
    )
    step(client, seeded, "run_command", command="mkdir empty")
    assert step(client, seeded, "list_dir", path="empty")["observation"] == "'empty' is empty."


@pytest.mark.parametrize(
    ("tool", "parameters", "fragment"),
    [
        ("read_file", {"path": "missing.txt"}, "Parameter 'path': 'missing.txt' does not exist"),
        ("read_file", {"path": "src"}, "'src' is a directory; use list_dir"),
        ("read_file", {"path": ""}, "Parameter 'path': the path is empty"),
        ("read_file", {}, "'path' is a required property"),
        ("write_file", {"path": "src", "content": "x"}, "'src' is a directory"),
        ("write_file", {"path": "README.md/x", "content": "x"}, "cannot write 'README.md/x'"),
        ("write_file", {"path": ".", "content": "x"}, "is the workspace root"),
        ("write_file", {"path": "a.txt"}, "'content' is a required property"),
        ("write_file", {"path": "a.txt", "content": 5}, "parameter 'content'"),
        ("list_dir", {"path": "README.md"}, "'README.md' is not a directory; use read_file"),
        ("list_dir", {"path": "nope"}, "'nope' does not exist"),
        ("run_command", {"command": "  "}, "Parameter 'command': must not be empty"),
        ("run_command", {"command": "ls", "timeout_seconds": 0}, "parameter 'timeout_seconds'"),
        ("run_command", {"command": "ls", "timeout_seconds": 61}, "parameter 'timeout_seconds'"),
        ("run_command", {"command": "ls", "cwd": "/"}, "unexpected parameter(s) 'cwd'"),
        ("delete_file", {"path": "README.md"}, "Unknown tool 'delete_file'"),
    ],
)
def test_errors_name_the_problem_and_change_nothing(
    client: httpx.Client, seeded: str, tool: str, parameters: dict[str, Any], fragment: str
) -> None:
    before = state(client, seeded)
    result = step(client, seeded, tool, **parameters)
    assert result["is_error"] is True and "state_diff" not in result
    assert fragment in result["observation"]
    assert state(client, seeded) == before


def test_binary_and_large_files_in_the_mirror(client: httpx.Client, seeded: str) -> None:
    big = "a" * (MIRROR_CONTENT_BYTES + 10)
    step(client, seeded, "write_file", path="big.txt", content=big)
    result = step(client, seeded, "run_command", command="printf 'x\\000y' > blob.bin")
    assert result["state_diff"]["summary"] == "+1 file(s) added"
    files = state(client, seeded)["files"]
    assert files["big.txt"]["truncated"] is True and files["big.txt"]["size"] == len(big)
    assert len(files["big.txt"]["content"]) == MIRROR_CONTENT_BYTES
    assert files["big.txt"]["sha256"] == hashlib.sha256(big.encode()).hexdigest()
    assert files["blob.bin"]["binary"] is True and files["blob.bin"]["content"] is None
    assert "binary file (3 bytes)" in step(client, seeded, "read_file", path="blob.bin")["observation"]
    assert "[... truncated: showing the first 65536" in step(client, seeded, "read_file", path="big.txt")["observation"]


# -- confinement: the safety acceptance test ------------------------------------------------------------


def test_file_tools_refuse_dotdot_absolute_and_nul(
    client: httpx.Client, seeded: str, outside: Path, files_server: FilesServer
) -> None:
    workspace = _workspace_dir(client, seeded)
    relative_escape = Path("..", "..", *outside.parts[1:], "secret.txt").as_posix()
    attempts = [
        ("read_file", {"path": "../secret.txt"}, "is outside the workspace"),
        ("read_file", {"path": relative_escape}, "is outside the workspace"),
        ("read_file", {"path": "src/../../x"}, "is outside the workspace"),
        ("read_file", {"path": str(outside / "secret.txt")}, "absolute paths are not allowed"),
        ("read_file", {"path": "/etc/passwd"}, "absolute paths are not allowed"),
        ("read_file", {"path": "README.md\x00.txt"}, "NUL byte"),
        ("list_dir", {"path": ".."}, "is outside the workspace"),
        ("list_dir", {"path": str(outside)}, "absolute paths are not allowed"),
        ("write_file", {"path": "../escape.txt", "content": "x"}, "is outside the workspace"),
        ("write_file", {"path": str(outside / "escape.txt"), "content": "x"}, "absolute paths are not allowed"),
        ("write_file", {"path": "x\x00y", "content": "x"}, "NUL byte"),
    ]
    for tool, parameters, fragment in attempts:
        result = step(client, seeded, tool, **parameters)
        assert result["is_error"] is True, (tool, parameters, result)
        assert fragment in result["observation"] and "Parameter 'path'" in result["observation"]
        assert OUTSIDE_SECRET not in result["observation"]
        assert str(files_server.root) not in result["observation"]  # the host layout is not leaked
    assert not (workspace.parent / "escape.txt").exists() and not (outside / "escape.txt").exists()


def test_file_tools_refuse_symlinks_that_leave_the_workspace(client: httpx.Client, seeded: str, outside: Path) -> None:
    made = step(
        client,
        seeded,
        "run_command",
        command=(
            f"ln -s '{outside}/secret.txt' leak && ln -s '{outside}' outdir && ln -s '{outside}/new.txt' dangling "
            "&& ln -s src/app.py inner"
        ),
    )
    assert "exit code: 0" in made["observation"]
    links = {k: v for k, v in state(client, seeded)["files"].items() if v["type"] == "symlink"}
    assert links["leak"]["target"] == f"{outside}/secret.txt" and set(links) == {"leak", "outdir", "dangling", "inner"}
    attempts = [
        ("read_file", {"path": "leak"}),
        ("read_file", {"path": "outdir/secret.txt"}),
        ("list_dir", {"path": "outdir"}),
        ("write_file", {"path": "leak", "content": "overwritten"}),
        ("write_file", {"path": "outdir/new.txt", "content": "x"}),
        ("write_file", {"path": "dangling", "content": "x"}),
    ]
    for tool, parameters in attempts:
        result = step(client, seeded, tool, **parameters)
        assert result["is_error"] is True and "is outside the workspace" in result["observation"], (tool, result)
        assert OUTSIDE_SECRET not in result["observation"]
    assert (outside / "secret.txt").read_text() == OUTSIDE_SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    # A link that stays inside the workspace is an ordinary path.
    assert step(client, seeded, "read_file", path="inner")["observation"] == "print('hello')\n"
    listing = step(client, seeded, "list_dir")["observation"]
    assert f"leak -> {outside}/secret.txt (symlink)" in listing


def test_file_tools_refuse_hard_links(client: httpx.Client, seeded: str, outside: Path) -> None:
    # A command cannot see `outside` (its sandbox holds only the workspace), so the host makes that link.
    try:
        (_workspace_dir(client, seeded) / "hard").hardlink_to(outside / "secret.txt")
    except OSError as exc:
        pytest.skip(f"cannot hard-link across these directories: {exc}")
    made = step(client, seeded, "run_command", command="ln src/app.py twin")
    assert "exit code: 0" in made["observation"], made
    for tool, parameters in [
        ("read_file", {"path": "hard"}),
        ("write_file", {"path": "hard", "content": "overwritten"}),
        ("read_file", {"path": "twin"}),  # both links inside: still refused, the tool cannot tell
    ]:
        result = step(client, seeded, tool, **parameters)
        assert result["is_error"] is True and "hard links" in result["observation"], (tool, result)
        assert OUTSIDE_SECRET not in result["observation"]
    assert (outside / "secret.txt").read_text() == OUTSIDE_SECRET


def test_special_files_are_refused_instead_of_blocking(client: httpx.Client, seeded: str) -> None:
    step(client, seeded, "run_command", command="mkfifo pipe")
    for tool, parameters in [("read_file", {"path": "pipe"}), ("write_file", {"path": "pipe", "content": "x"})]:
        result = step(client, seeded, tool, **parameters)
        assert result["is_error"] is True and "'pipe' is not a regular file" in result["observation"]
    assert "pipe (special file)" in step(client, seeded, "list_dir")["observation"]


# -- run_command -------------------------------------------------------------------------------------------


def test_run_command_output_exit_code_and_diff(client: httpx.Client, seeded: str) -> None:
    result = step(client, seeded, "run_command", command="echo out; echo err >&2; echo data > made.txt; exit 3")
    assert result["observation"].splitlines() == [
        "$ echo out; echo err >&2; echo data > made.txt; exit 3",
        "exit code: 3",  # a failing command is an observation, not a tool error
        "stdout:",
        "out",
        "stderr:",
        "err",
    ]
    assert "is_error" not in result
    assert result["state_diff"]["summary"] == "+1 file(s) added"
    assert result["state_diff"]["after"]["files"]["made.txt"]["content"] == "data\n"
    removed = step(client, seeded, "run_command", command="rm README.md && echo changed > src/app.py")
    assert removed["state_diff"]["summary"] == "~1 file(s) changed; -1 file(s) removed"
    quiet = step(client, seeded, "run_command", command="true")
    assert "state_diff" not in quiet
    noisy = step(client, seeded, "run_command", command="head -c 100000 /dev/zero | tr '\\0' y")
    assert "more byte(s) not shown]" in noisy["observation"] and len(noisy["observation"]) < 20_000


def test_run_command_gets_a_minimal_environment(
    client: httpx.Client, seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVAL_TEST_API_KEY", "sk-should-never-leak")
    workspace = _workspace_dir(client, seeded)
    output = step(client, seeded, "run_command", command="env; pwd")["observation"]
    assert "sk-should-never-leak" not in output and "EVAL_TEST_API_KEY" not in output
    assert f"HOME={workspace}" in output and "PATH=/usr/local/bin:/usr/bin:/bin" in output


def test_run_command_past_its_timeout_is_killed(client: httpx.Client, seeded: str) -> None:
    started = time.monotonic()
    sleep = _unique_sleep()
    result = step(
        client,
        seeded,
        "run_command",
        command=f"{sleep} & echo $! > bg.pid; echo $$ > sh.pid; echo started; {sleep}",
        timeout_seconds=1,
    )
    elapsed = time.monotonic() - started
    assert elapsed < 30, "the command was not stopped at its timeout"
    lines = result["observation"].splitlines()
    assert lines[1] == "timed out after 1 s; the command and its process group were killed"
    assert lines[3] == "started"
    assert "is_error" not in result and result["state_diff"]["summary"] == "+2 file(s) added"  # partial work kept
    assert _eventually(lambda: not _running(sleep)), "a process of the command is still alive"


def test_background_processes_do_not_outlive_the_call(client: httpx.Client, seeded: str) -> None:
    sleep = _unique_sleep()
    result = step(client, seeded, "run_command", command=f"{sleep} & echo launched")
    assert "exit code: 0" in result["observation"] and "launched" in result["observation"]
    assert _eventually(lambda: not _running(sleep))


# -- workspaces --------------------------------------------------------------------------------------------


def test_workspace_directory_is_created_lazily_and_removed_with_the_workspace(client: httpx.Client) -> None:
    server = FilesServer()
    with BackgroundServer(create_app(server)) as running:
        url = new_workspace(client, running.url)
        assert list(server.root.iterdir()) == []  # nothing on disk before the first use
        step(client, url, "write_file", path="a.txt", content="a")
        (directory,) = list(server.root.iterdir())
        assert (directory / "a.txt").read_text() == "a"
        assert client.delete(url).status_code == 200
        assert _eventually(lambda: not directory.exists()), "the workspace directory outlived its workspace"


async def test_concurrent_workspaces_are_isolated(files_url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:

        async def act(url: str, tool: str, **parameters: Any) -> dict[str, Any]:
            response = await http.post(f"{url}/step", json={"action": {"tool_name": tool, "parameters": parameters}})
            body: dict[str, Any] = response.json()
            return body

        async def drive(n: int) -> tuple[int, str, dict[str, Any]]:
            created = await http.post(f"{files_url}/workspaces", json={"seed": [FILES_SEED]})
            url = f"{files_url}{created.json()['path']}"
            await act(url, "write_file", path="mine.txt", content=f"workspace {n}\n")
            await act(url, "run_command", command=f"echo {n} >> mine.txt; ls")
            listing = (await act(url, "run_command", command="cat mine.txt; ls"))["observation"]
            snapshot = (await http.get(f"{url}/snapshot")).json()["state"]
            await http.delete(url)
            return n, listing, snapshot

        results = await asyncio.gather(*(drive(n) for n in range(8)))
    for n, listing, snapshot in results:
        assert f"workspace {n}\n{n}\n" in listing
        assert sorted(snapshot["files"]) == ["README.md", "mine.txt", "src/app.py"]
        assert snapshot["files"]["mine.txt"]["content"] == f"workspace {n}\n{n}\n"


async def test_a_long_command_does_not_stall_other_workspaces() -> None:
    """run_command waits off the event loop: another workspace's calls are answered meanwhile."""
    import asyncio
    import time

    import httpx

    from eval_pipelines.lib.serving import BackgroundServer
    from eval_pipelines.toolservers.app import create_app
    from eval_pipelines.toolservers.files import FilesServer

    with BackgroundServer(create_app(FilesServer())) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            slow = (await http.post("/workspaces", json={"seed": []})).json()["path"]
            fast = (await http.post("/workspaces", json={"seed": []})).json()["path"]
            sleeper = asyncio.ensure_future(
                http.post(
                    f"{slow}/step",
                    json={
                        "action": {
                            "tool_name": "run_command",
                            "parameters": {"command": "sleep 2", "timeout_seconds": 5},
                        }
                    },
                )
            )
            await asyncio.sleep(0.3)
            started = time.monotonic()
            listing = await http.post(f"{fast}/step", json={"action": {"tool_name": "list_dir", "parameters": {}}})
            answered_after = time.monotonic() - started
            assert listing.status_code == 200 and not sleeper.done()
            assert answered_after < 1.0  # answered while the other workspace's command still runs
            assert "exit code: 0" in (await sleeper).json()["observation"]
