"""ContainedChild: a confined child with a scrubbed environment in a private workdir, its stderr tail, and
nothing of it (its own children, its workdir) left after close."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from eval_pipelines.lib.child import ChildLimits, ContainedChild, StderrTail

LIMITS = ChildLimits(
    memory_bytes=2 * 1024**3,
    cpu_seconds=60,
    file_bytes=16 * 1024**2,
    max_tasks=64,
    stderr_bytes=64,
    line_bytes=1024**2,
)

# Reports its environment and a grandchild's pid on stdout, writes more stderr than the tail keeps, then waits.
SCRIPT = """
import json, os, subprocess, sys
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
sys.stderr.write("x" * 200 + "last words")
sys.stderr.flush()
print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "grandchild": grandchild.pid}), flush=True)
sys.stdin.readline()
"""


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_stderr_tail_keeps_only_the_last_bytes() -> None:
    tail = StderrTail(5)
    for chunk in (b"abc", b"defg", b"hij"):
        tail.add(chunk)
    assert tail.text() == "hij"  # whole chunks are dropped while what is kept exceeds the limit
    tail.add(b"0123456789")
    assert tail.text() == "56789"


async def test_child_is_scrubbed_in_its_workdir_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "child.py"
    script.write_text(SCRIPT)
    monkeypatch.setenv("PYTHONPATH", "/somewhere/of/ours")
    monkeypatch.setenv("SOME_API_KEY", "secret-value")
    child = await ContainedChild.start(
        [sys.executable, "-I", str(script)],
        limits=LIMITS,
        family="test-children",
        workdir_prefix="child-test-",
        env={"A_SETTING": "on"},
    )
    try:
        assert child.process.stdout is not None
        report = json.loads(await asyncio.wait_for(child.process.stdout.readline(), 30))
        assert child.is_running()
        workdir = child.workdir
        assert workdir.is_dir() and Path(report["cwd"]) == workdir
        env = report["env"]
        assert env["HOME"] == env["TMPDIR"] == str(workdir) and env["A_SETTING"] == "on"
        assert "PYTHONPATH" not in env and "SOME_API_KEY" not in env and "VIRTUAL_ENV" not in env
        await asyncio.sleep(0.2)
        assert child.stderr_tail().endswith("last words") and len(child.stderr_tail()) < 100
    finally:
        await child.close()
    assert not child.is_running()
    assert _gone(report["grandchild"]) and not workdir.exists()
    await child.close()  # a second close is harmless


async def test_a_command_that_cannot_start_raises_oserror_and_leaves_no_workdir(tmp_path: Path) -> None:
    before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("child-missing-*"))
    with pytest.raises(OSError):
        await ContainedChild.start(
            [str(tmp_path / "no-such-interpreter")],
            limits=LIMITS,
            family="test-children",
            workdir_prefix="child-missing-",
            cwd=tmp_path / "no-such-folder",
        )
    assert set(Path(os.environ.get("TMPDIR", "/tmp")).glob("child-missing-*")) == before
