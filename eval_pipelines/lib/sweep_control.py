"""Control of a running sweep: one writer per sweep id (`SweepLock`) and a clean stop on a signal (`SweepStop`).

The lock is an OS lock on a file under the data dir, held for as long as the sweep runs. `flock` locks belong to
the open file, so the kernel releases them when the holder exits, however it exits (kill -9 included): a crashed
sweep never leaves a stale lock behind. The file's text names the holder, so a second process can say who has it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class SweepLocked(RuntimeError):
    """Another process holds the sweep's lock; the message names it."""


class SweepLock:
    """`with SweepLock(data_dir, sweep_id): ...` raises SweepLocked at once when another process runs that sweep."""

    def __init__(self, data_dir: Path, sweep_id: str) -> None:
        self.sweep_id = sweep_id
        self.path = data_dir / "locks" / f"sweep-{_UNSAFE.sub('_', sweep_id)}.lock"
        self._file: IO[str] | None = None

    def acquire(self) -> SweepLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the sweep's lifetime
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = _describe(handle.read())
            handle.close()
            raise SweepLocked(
                f"sweep {self.sweep_id!r} is already running ({holder}); wait for it to finish, or stop it "
                f"(lock file {self.path})"
            ) from None
        handle.seek(0)
        handle.truncate()
        started = datetime.now(UTC).isoformat(timespec="seconds")
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started_at": started}))
        handle.flush()
        self._file = handle
        return self

    def release(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            # Emptied before unlocking, so nobody reads a finished sweep as the holder.
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()

    def __enter__(self) -> SweepLock:
        return self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _describe(text: str) -> str:
    try:
        holder = json.loads(text)
        return f"pid {holder['pid']} on {holder['host']}, started {holder['started_at']}"
    except (ValueError, KeyError, TypeError):
        return "another process"


@dataclass
class SweepStop:
    """A request to stop the sweep, set from a signal handler (which only records it) and read by the sweep."""

    signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    def request(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum

    def wait(self, seconds: float) -> None:
        """Sleep up to `seconds`, taking a Ctrl-C that arrived meanwhile as the stop request. Call it from the thread
        that entered `stop_on_signals`, where SIGINT is blocked and so waits to be taken here. A second one is from a
        user who cannot wait: KeyboardInterrupt, which unwinds the sweep without its clean stop."""
        if signal.sigtimedwait({signal.SIGINT}, seconds) is not None:
            self._interrupted()

    def _interrupted(self) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.request(signal.SIGINT)

    def summary(self, tally: StopTally | None) -> str:
        """`stopped by SIGTERM: 6 rollouts completed, 2 cancelled, 8 not run`; without a tally (the counts could
        not be read) only what stopped it."""
        stopped = f"stopped by {self.signal_name}"
        return stopped if tally is None else f"{stopped}: {tally}"


@dataclass
class StopTally:
    """What a stopped sweep's rollouts ended as: counted after the stop, since a rollout in flight when the
    signal came may still complete (the cancel reaches it between steps)."""

    completed: int = 0
    cancelled: int = 0
    #: finished otherwise: the agent's failures and errors that are not a cancel.
    failed: int = 0
    #: never started: queued in a run, or in a pair the stop came before.
    not_run: int = 0

    def __str__(self) -> str:
        counts = [f"{self.completed} rollouts completed", f"{self.cancelled} cancelled"]
        counts += [f"{self.failed} failed"] if self.failed else []
        counts += [f"{self.not_run} not run"] if self.not_run else []
        return ", ".join(counts)


@contextlib.contextmanager
def stop_on_signals(stop: SweepStop) -> Iterator[None]:
    """SIGINT and SIGTERM request a clean stop of the sweep run inside (the sweep cancels its in-flight rollouts
    and starts nothing new); a second SIGTERM gets the default behaviour, a second SIGINT is a KeyboardInterrupt.

    SIGINT is blocked on the entering thread for the duration, and so on every thread and process started inside,
    which inherit the mask: a terminal's Ctrl-C goes to the whole process group, and each helper process (Dagster's
    compute-log tails and their watchers, the tool-server host) died of it with a KeyboardInterrupt traceback,
    taking its in-flight work along. The entering thread takes it with `stop.wait`; should a thread started before
    deliver it, the handler records it the same way."""
    handled = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in handled}

    def handler(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT:
            stop._interrupted()
            return
        stop.request(signum)
        signal.signal(signum, previous[signal.Signals(signum)])

    for signum in handled:
        signal.signal(signum, handler)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        # Taken before unblocking: one that arrived after the last wait would otherwise be a KeyboardInterrupt now.
        while signal.SIGINT in signal.sigpending() and signal.sigtimedwait({signal.SIGINT}, 0) is not None:
            stop.request(signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for signum, original in previous.items():
            signal.signal(signum, original)
