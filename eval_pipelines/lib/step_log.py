"""What a sweep's steps write to stderr while the CLI draws its progress bar, sent to a log file instead.

Dagster's console logger (its warnings, a failed run's error and stack trace) and Python's `warnings` write to
`sys.stderr` when they emit; over a live progress bar each such line breaks the display. `StepLog` takes
`sys.stderr`'s place for the duration and appends to the log file, without terminal colours. The progress bar
itself still reaches the terminal: Rich's console unwraps `rich_proxied_file`, as it does for its own proxy.
Output written straight to file descriptor 2 (a child process's) is not caught.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def sweep_log_path(data: Path, sweep_id: str) -> Path:
    """`data/logs/sweep-<sweep id>.log`: one file per sweep id, each invocation appended under a header line."""
    return data / "logs" / f"sweep-{_UNSAFE_IN_NAME.sub('_', sweep_id) or 'sweep'}.log"


class StepLog:
    """A stand-in for `sys.stderr` that appends to `path` (opened on the first write, so a quiet sweep leaves no
    file); `lines` counts what was written. Use as a context manager: it swaps `sys.stderr` in and back."""

    encoding = "utf-8"

    def __init__(self, path: Path, header: str) -> None:
        self.path = path
        self.header = header
        self.lines = 0
        self._file: IO[str] | None = None
        self._lock = threading.Lock()
        self._replaced: Any = None

    @property
    def rich_proxied_file(self) -> Any:
        """The terminal, for Rich's console (it draws there, not into the log)."""
        replaced = self._replaced if self._replaced is not None else sys.__stderr__
        return getattr(replaced, "rich_proxied_file", replaced)

    def write(self, text: str | bytes) -> int:
        if not text:
            return 0
        if isinstance(text, bytes | bytearray):  # click.echo of bytes to a stream it finds no binary buffer on
            text = bytes(text).decode("utf-8", errors="replace")
        with self._lock:
            log = self._opened()
            log.write(_ANSI.sub("", text))
            log.flush()
            self.lines += text.count("\n")
        return len(text)

    def _opened(self) -> IO[str]:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in __exit__)
            stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            self._file.write(f"== {stamp} pid {os.getpid()} {self.header}\n")
        return self._file

    def fileno(self) -> int:
        """The log's descriptor (opened for appending), for a child process handed `sys.stderr` (the MCP SDK
        starts stdio servers so): what the child writes goes to the log too."""
        with self._lock:
            log = self._opened()
            log.flush()
            return log.fileno()

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def isatty(self) -> bool:
        return False

    def __enter__(self) -> StepLog:
        self._replaced = sys.stderr
        sys.stderr = self
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        sys.stderr = self._replaced
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
