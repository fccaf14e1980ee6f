"""Verifier bodies that start processes, and how a test finds those processes afterwards: each one is a `sleep` whose
environment holds a marker unique to the test, so a scan of /proc tells what is left whoever its parent became."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from eval_pipelines.lib.proc_group import groups_home
from eval_pipelines.schemas.limits import VERIFIER_MAX_TASKS
from eval_pipelines.verifiers.isolation import WORKER_CGROUP_FAMILY

MARKER_VARIABLE = "EVAL_PIPELINES_TEST_MARKER"
SLEEP = shutil.which("sleep") or "/bin/sleep"
#: Far past the cap, yet bounded: without a cap this many sleeps is a nuisance, not an outage.
FORK_ATTEMPTS = 2 * VERIFIER_MAX_TASKS


def task_cap_enforced() -> bool:
    """Whether a worker's tasks are capped here: a cgroup can be made, or RLIMIT_NPROC applies (not to root)."""
    return groups_home(WORKER_CGROUP_FAMILY) is not None or os.getuid() != 0


def new_marker() -> str:
    return uuid.uuid4().hex


def marked_sleep(marker: str) -> str:
    """An expression that turns the calling process into a marked `sleep 60`."""
    return f"os.execve({SLEEP!r}, ['sleep', '60'], {{{MARKER_VARIABLE!r}: {marker!r}}})"


def fork_bomb(marker: str) -> str:
    """One line of Python: fork marked sleeps until FORK_ATTEMPTS; a failed fork raises in the verifier."""
    return f"import os; [os.fork() == 0 and {marked_sleep(marker)} for _ in range({FORK_ATTEMPTS})]"


def detached_child(marker: str) -> str:
    """One line of Python: a double fork with `setsid` leaves a marked sleep in a session of its own, whose parent
    has exited; the verifier goes on to its verdict."""
    return (
        f"import os; os.fork() == 0 and (os.setsid(), os.fork() == 0 and {marked_sleep(marker)}, os._exit(0)); "
        "os.wait()"
    )


def marked_processes(marker: str) -> list[int]:
    """The running processes whose environment holds `marker` (a zombie has no environment left to read)."""
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def kill_marked(marker: str) -> None:
    """Cleanup for a failing test: what containment missed must not outlive the test either."""
    for pid in marked_processes(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
