"""A verifier package's batches are drained by one thread that waits a moment for the next verification before
it ends: verdicts that come due one after another reuse it instead of starting a thread each, and it still ends
once verifications stop."""

from __future__ import annotations

import threading
import time
from typing import Any

from eval_pipelines.verifiers import isolation
from eval_pipelines.verifiers.isolation import VerifyJob, _Package


class RecordingRunner:
    """Stands in for a package's worker: answers every job with no outcomes and notes the thread that asked."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.batches: list[int] = []

    def run(self, jobs: list[VerifyJob]) -> list[list[Any]]:
        self.threads.append(threading.current_thread())
        self.batches.append(len(jobs))
        return [[] for _ in jobs]


def _job() -> VerifyJob:
    return VerifyJob(b"{}", ("check",))


def test_verifications_one_after_another_share_one_drain_thread() -> None:
    runner = RecordingRunner()
    package = _Package(runner)  # type: ignore[arg-type]
    for _ in range(5):
        assert package.submit(_job()).result(timeout=5) == []
    assert len(runner.threads) == 5
    assert len({id(thread) for thread in runner.threads}) == 1
    assert runner.threads[0] is not threading.current_thread()


def test_the_drain_thread_ends_once_verifications_stop(monkeypatch: Any) -> None:
    monkeypatch.setattr(isolation, "DRAIN_LINGER_SECONDS", 0.05)
    runner = RecordingRunner()
    package = _Package(runner)  # type: ignore[arg-type]
    package.submit(_job()).result(timeout=5)
    drainer = runner.threads[0]
    drainer.join(timeout=5)
    assert not drainer.is_alive()
    assert not package.draining
    # A verification after it ended starts a new drainer and is answered.
    assert package.submit(_job()).result(timeout=5) == []
    assert runner.threads[1] is not drainer


def test_jobs_queued_while_the_worker_is_busy_go_as_one_batch() -> None:
    release = threading.Event()

    class SlowFirst(RecordingRunner):
        def run(self, jobs: list[VerifyJob]) -> list[list[Any]]:
            if not self.batches:
                release.wait(5)
            return super().run(jobs)

    runner = SlowFirst()
    package = _Package(runner)  # type: ignore[arg-type]
    first = package.submit(_job())
    deadline = time.monotonic() + 5
    while not package.lock.locked() and time.monotonic() < deadline:
        time.sleep(0.005)
    rest = [package.submit(_job()) for _ in range(4)]
    release.set()
    assert first.result(timeout=5) == []
    assert all(future.result(timeout=5) == [] for future in rest)
    assert runner.batches == [1, 4]
