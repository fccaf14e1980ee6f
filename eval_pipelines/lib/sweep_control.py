"""Control of a running sweep: one writer per sweep id (`SweepLock`) and a clean stop on a signal (`SweepStop`).

The lock is an OS lock on a file under the data dir, held for as long as the sweep runs. `flock` locks belong to
the open file, so the kernel releases them when the holder exits, however it exits (kill -9 included): a crashed
sweep never leaves a stale lock behind. The file's text names the holder, so a second process can say who has it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import socket
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
