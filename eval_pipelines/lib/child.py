"""`ContainedChild`: one untrusted child process speaking over its pipes, and everything it starts.

The agent worker (`agents/remote.py`) and the upstream benchmark worker (`benchmarks/worker.py`) run foreign
code in interpreters of their own the same way: an allow-listed environment whose HOME and TMPDIR are a private
temp folder (the only place it may write, through `confine.py`'s launcher), address-space, CPU and file-size
limits, a process group (`proc_group.py`) killed as one, and the last bytes of its stderr kept for error
messages. What differs between them (the limits, the cgroup family, the working directory, what a failure is
called) is passed in, so this module knows nothing of either.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from eval_pipelines.lib.confine import confined_argv, scrubbed_environment
from eval_pipelines.lib.proc_group import ProcessGroup

#: How much of stderr one read drains.
_STDERR_READ_BYTES = 4096


@dataclass(frozen=True)
class ChildLimits:
    """What a child may use: the confinement's limits, its group's task cap, and the longest stdout line read."""

    memory_bytes: int
    cpu_seconds: int
    file_bytes: int
    max_tasks: int
    stderr_bytes: int
    line_bytes: int


class StderrTail:
    """The last `limit` bytes a process wrote to stderr; older output is dropped."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0

    def add(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        while self._size > self.limit and len(self._chunks) > 1:
            self._size -= len(self._chunks.popleft())

    def text(self) -> str:
        return b"".join(self._chunks)[-self.limit :].decode("utf-8", "replace").strip()


class ContainedChild:
    """A started child: `process` (stdin, stdout piped; stderr drained into a tail), its group and its workdir.
    `close` kills the group, waits for the leader and removes the workdir; it may be called more than once."""

    def __init__(
        self, process: asyncio.subprocess.Process, group: ProcessGroup, workdir: Path, stderr_bytes: int
    ) -> None:
        self.process = process
        self.workdir = workdir
        self._group: ProcessGroup | None = group
        self._stderr = StderrTail(stderr_bytes)
        self._stderr_task: asyncio.Task[None] | None = asyncio.create_task(self._drain_stderr())
        self._closed = False

    @classmethod
    async def start(
        cls,
        command: Sequence[str],
        *,
        limits: ChildLimits,
        family: str,
        workdir_prefix: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> ContainedChild:
        """Start `command` confined (in `cwd`, else its workdir) and contain it in a group of `family`; `env`
        holds settings only, never a secret. OSError when it cannot start (its workdir is removed then)."""
        workdir = Path(tempfile.mkdtemp(prefix=workdir_prefix))
        child_env = scrubbed_environment({"HOME": str(workdir), "TMPDIR": str(workdir), **(env or {})})
        # Only the child interpreter's own packages: this project's search path must not leak into it.
        child_env.pop("PYTHONPATH", None)
        child_env.pop("VIRTUAL_ENV", None)
        argv = confined_argv(
            list(command),
            writable=workdir,
            memory_bytes=limits.memory_bytes,
            cpu_seconds=limits.cpu_seconds,
            file_bytes=limits.file_bytes,
        )
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd if cwd is not None else workdir,
                env=child_env,
                start_new_session=True,
                limit=limits.line_bytes,
            )
        except OSError:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        group = ProcessGroup.contain(process.pid, max_tasks=limits.max_tasks, family=family)
        return cls(process, group, workdir, limits.stderr_bytes)

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_running(self) -> bool:
        return not self._closed and self.process.returncode is None

    async def _drain_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        with contextlib.suppress(ConnectionError, ValueError):
            while chunk := await stderr.read(_STDERR_READ_BYTES):
                self._stderr.add(chunk)

    def stderr_tail(self) -> str:
        """`; its last output: ...` when it wrote anything to stderr, for the end of an error message."""
        text = self._stderr.text()
        return f"; its last output: {text}" if text else ""

    async def wait_briefly(self, exit_seconds: float = 2.0, drain_seconds: float = 1.0) -> None:
        """Its exit status and last words, when it is exiting anyway: wait a little for both."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), exit_seconds)
        if self._stderr_task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), drain_seconds)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        group, self._group = self._group, None
        if group is not None:
            group.kill()
        await self.process.wait()
        if group is not None:
            group.release()
        if self.process.stdin is not None:
            self.process.stdin.close()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stderr_task
            self._stderr_task = None
        shutil.rmtree(self.workdir, ignore_errors=True)
