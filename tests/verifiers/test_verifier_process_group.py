"""A verifier's processes are contained as a group: a fork bomb meets the task cap, whatever a verifier leaves running
is killed with its verdict (which becomes an error), a timeout kills the whole group, detached members included,
and a worker whose parent was killed exits at once without a traceback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipelines.lib import proc_group
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.limits import VERIFIER_MAX_TASKS
from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, VerifierPool, VerifyJob
from tests.verifiers.conftest import PackageFactory
from tests.verifiers.support_processes import (
    FORK_ATTEMPTS,
    detached_child,
    kill_marked,
    marked_processes,
    marked_sleep,
    new_marker,
    task_cap_enforced,
)

#: Room for a verdict that forks a hundred processes on a busy machine.
TIMEOUT = 5.0
#: For the verifier that hangs on purpose.
HANG_TIMEOUT = 2.0
OK = "def verify(run_artifacts):\n    return True, 'fine'\n"


@pytest.fixture
def marker() -> Iterator[str]:
    marker = new_marker()
    yield marker
    kill_marked(marker)


def _verifier(body: str) -> str:
    """A verifier module that runs `body` (one line) and then passes."""
    return f"import os, time\n\ndef verify(run_artifacts):\n    {body}\n    return True, 'passed'\n"


def _artifacts() -> RunArtifacts:
    return RunArtifacts(task_id="t1", task="anything")


def _counting_fork_bomb(marker: str) -> str:
    return textwrap.dedent(f"""\
        import os

        def verify(run_artifacts):
            started = 0
            try:
                for _ in range({FORK_ATTEMPTS}):
                    if os.fork() == 0:
                        {marked_sleep(marker)}
                    started += 1
            except OSError as exc:
                raise RuntimeError(f"fork refused after {{started}}: {{exc.strerror}}") from None
            return True, f"started {{started}}"
        """)


def test_a_fork_bomb_meets_the_cap_and_costs_only_its_verdict(make_package: PackageFactory, marker: str) -> None:
    if not task_cap_enforced():
        pytest.skip("no cgroup can be made here and RLIMIT_NPROC does not bind root: nothing caps the tasks")
    folder = make_package({"bomb": _counting_fork_bomb(marker), "ok": OK})
    pool = VerifierPool(timeout_seconds=TIMEOUT)
    try:
        bombed, after = (pool.verify_now(folder, ("bomb", "ok"), _artifacts()) for _ in range(2))
        assert not marked_processes(marker)  # gone with the verdict, not only when the pool closes
    finally:
        pool.close()
    outcome, next_one = bombed
    assert outcome.is_error and not outcome.success, outcome.message
    found = re.search(r"fork refused after (\d+): Resource temporarily unavailable", outcome.message)
    assert found is not None and int(found.group(1)) < VERIFIER_MAX_TASKS, outcome.message
    assert outcome.message.endswith("running after its verdict (killed)"), outcome.message
    assert next_one.success and [o.success for o in after] == [False, True]


def test_a_detached_child_is_killed_with_the_verdict_which_becomes_an_error(
    make_package: PackageFactory, marker: str
) -> None:
    folder = make_package({"detaches": _verifier(detached_child(marker)), "ok": OK})
    with IsolatedVerifierRunner(folder, timeout_seconds=TIMEOUT) as runner:
        [[detached, ok]] = runner.run([VerifyJob(_artifacts(), ("detaches", "ok"))])
        assert not marked_processes(marker)
        assert runner.restarts == 0
    assert (detached.success, detached.is_error) == (False, True)
    assert detached.message == "Verifier error: it left 1 process running after its verdict (killed)"
    assert ok.success


def test_a_verifiers_fork_that_returns_ends_quietly_instead_of_serving_the_channel(
    make_package: PackageFactory,
) -> None:
    forks = """\
        import os

        def verify(run_artifacts):
            pid = os.fork()
            if pid == 0:
                return True, "child"
            os.waitpid(pid, 0)
            return True, "parent"
        """
    folder = make_package({"forks": forks, "ok": OK})
    with IsolatedVerifierRunner(folder, timeout_seconds=TIMEOUT) as runner:
        [row] = runner.run([VerifyJob(_artifacts(), ("forks", "ok", "forks", "ok"))])
        assert runner.restarts == 0
    assert [(o.success, o.message) for o in row] == [(True, "parent"), (True, "fine")] * 2


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "process-tree"])
def test_a_timeout_kills_the_group_detached_members_included(
    cgroup: bool, make_package: PackageFactory, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not cgroup:  # what a host that lets this process make no cgroup gets
        monkeypatch.setattr(proc_group, "groups_home", lambda family: None)
    hangs = f"{detached_child(marker)}; time.sleep(120)"
    folder = make_package({"hangs": _verifier(hangs), "ok": OK})
    with IsolatedVerifierRunner(folder, timeout_seconds=HANG_TIMEOUT) as runner:
        [[timed_out, ok]] = runner.run([VerifyJob(_artifacts(), ("hangs", "ok"))])
        assert not marked_processes(marker)
    assert timed_out.message == f"Verifier timed out after {HANG_TIMEOUT:g}s" and ok.success


def test_a_worker_whose_parent_is_killed_exits_at_once_without_a_traceback(
    make_package: PackageFactory, marker: str, tmp_path: Path
) -> None:
    # The verifier tells its pid (the worker's) once it is running: the parent is killed mid-verdict.
    busy = f"{detached_child(marker)}; print(os.getpid(), flush=True); time.sleep(120)"
    folder = make_package({"busy": _verifier(busy)})
    script = textwrap.dedent(f"""\
        from pathlib import Path
        from eval_pipelines.schemas.artifacts import RunArtifacts
        from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, VerifyJob

        with IsolatedVerifierRunner(Path({str(folder)!r}), timeout_seconds=600) as runner:
            runner.run([VerifyJob(RunArtifacts(task_id="t1", task="anything"), ("busy",))])
        """)
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    try:
        os.kill(parent.pid, signal.SIGKILL)
        # The worker holds the pipes too: they close once it and everything it started have exited.
        _, stderr = parent.communicate(timeout=30)
        survived = not _ended_within_grace(worker)
    finally:
        if not _ended_within_grace(worker, grace=0):  # containment failed: the test must not leave it behind
            os.kill(worker, signal.SIGKILL)
        parent.wait()
    assert not survived
    assert not marked_processes(marker)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


def _ended_within_grace(pid: int, grace: float = 5.0) -> bool:
    """Whether `pid` has ended (a zombie awaiting its reaper has), waiting up to `grace` seconds for it to."""
    deadline = time.monotonic() + grace
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            return True
        if state == b"Z":
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
