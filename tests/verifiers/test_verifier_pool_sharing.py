"""One verifier pool serves every run of a process: a package's worker is shared by its runs, replaced when the
package changes or the worker crashes, and stopped when nobody used it for a while."""

from __future__ import annotations

import time
from pathlib import Path

from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.verifiers.isolation import VerifierLease, VerifierPool
from tests.verifiers.conftest import PackageFactory

SAYS_ONE = "def verify(run_artifacts):\n    return True, 'one: ' + run_artifacts.task_id\n"
SAYS_TWO = "def verify(run_artifacts):\n    return True, 'second: ' + run_artifacts.task_id\n"
DIES_ON_CRASH = (
    "import os\n\ndef verify(run_artifacts):\n"
    "    if run_artifacts.task_id == 'crash':\n        os._exit(7)\n"
    "    return True, 'pid ' + str(os.getpid())\n"
)


def _artifacts(task_id: str) -> RunArtifacts:
    return RunArtifacts(task_id=task_id, task="anything")


async def _messages(lease: VerifierLease, folder: Path, module: str, task_id: str) -> list[str]:
    return [outcome.message for outcome in await lease.verify(folder, [module], _artifacts(task_id))]


def _worker_pid(lease: VerifierLease) -> int:
    package = lease._package
    assert package is not None and package.runner._worker is not None
    return package.runner._worker.process.pid


def _wait_exited(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text():
            return True
        time.sleep(0.05)
    return False


async def test_runs_of_one_package_share_its_worker_which_outlives_each_run(make_package: PackageFactory) -> None:
    folder = make_package({"says": SAYS_ONE})
    pool = VerifierPool(timeout_seconds=30)
    try:
        first = pool.lease(folder)
        assert first.needs_warming
        first.warm()
        assert await _messages(first, folder, "says", "a") == ["one: a"]
        pid = _worker_pid(first)
        first.release()
        second = pool.lease(folder)
        assert not second.needs_warming  # the first run's worker is still up
        assert await _messages(second, folder, "says", "b") == ["one: b"]
        assert _worker_pid(second) == pid
        second.release()
    finally:
        pool.close()


async def test_a_changed_package_gets_a_new_worker_and_the_old_one_stops_after_its_last_run(
    make_package: PackageFactory,
) -> None:
    folder = make_package({"says": SAYS_ONE})
    pool = VerifierPool(timeout_seconds=30)
    try:
        running = pool.lease(folder)
        assert await _messages(running, folder, "says", "a") == ["one: a"]
        old_pid = _worker_pid(running)
        (folder / "says.py").write_text(SAYS_TWO)
        new = pool.lease(folder)
        assert new.version != running.version
        assert await _messages(new, folder, "says", "b") == ["second: b"]
        assert _worker_pid(new) != old_pid
        # The run that started on the old version keeps it to its end.
        assert await _messages(running, folder, "says", "c") == ["one: c"]
        running.release()
        assert _wait_exited(old_pid)
        assert await _messages(new, folder, "says", "d") == ["second: d"]
        new.release()
    finally:
        pool.close()


async def test_a_crashed_shared_worker_costs_one_verdict_and_is_replaced(make_package: PackageFactory) -> None:
    folder = make_package({"dies": DIES_ON_CRASH})
    pool = VerifierPool(timeout_seconds=30)
    try:
        one, other = pool.lease(folder), pool.lease(folder)
        before = await _messages(one, folder, "dies", "fine")
        [crashed] = await one.verify(folder, ["dies"], _artifacts("crash"))
        assert crashed.is_error and crashed.message == "Verifier process exited with code 7"
        # The other run sharing the package gets its verdict from a replacement worker.
        after = await _messages(other, folder, "dies", "fine")
        assert before[0].startswith("pid ") and after[0].startswith("pid ") and after != before
        one.release()
        other.release()
    finally:
        pool.close()


async def test_a_worker_nobody_used_for_idle_seconds_is_stopped(make_package: PackageFactory) -> None:
    idle_folder, busy_folder = make_package({"says": SAYS_ONE}), make_package({"says": SAYS_TWO})
    pool = VerifierPool(timeout_seconds=30, idle_seconds=0.0)
    try:
        idle = pool.lease(idle_folder)
        assert await _messages(idle, idle_folder, "says", "a") == ["one: a"]
        idle_pid = _worker_pid(idle)
        idle.release()
        busy = pool.lease(busy_folder)  # any later use of the pool stops what sat idle too long
        assert _wait_exited(idle_pid)
        assert await _messages(busy, busy_folder, "says", "b") == ["second: b"]
        busy.release()
        again = pool.lease(idle_folder)
        assert await _messages(again, idle_folder, "says", "c") == ["one: c"]
        assert _worker_pid(again) != idle_pid
        again.release()
    finally:
        pool.close()


async def test_a_released_lease_verifies_nothing(make_package: PackageFactory) -> None:
    folder = make_package({"says": SAYS_ONE})
    pool = VerifierPool(timeout_seconds=30)
    try:
        lease = pool.lease(folder)
        lease.release()
        lease.release()  # twice is harmless
        try:
            await lease.verify(folder, ["says"], _artifacts("a"))
        except RuntimeError as exc:
            assert "released" in str(exc)
        else:
            raise AssertionError("a released lease verified")
    finally:
        pool.close()
