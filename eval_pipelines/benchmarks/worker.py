"""`UpstreamWorker`: a client of one upstream benchmark package running in its own interpreter.

The package runs in a venv of its own (`environments.py`), so it is reached through a subprocess: `python -I
script`, where the script (an adapter's `upstream_worker.py`, importing only the standard library and the upstream
package) reads requests on stdin, one JSON object a line, `{"id": 7, "op": "call", ...arguments}`, and answers
each with one line on stdout, `{"id": 7, "ok": true, "result": ...}` or `{"id": 7, "ok": false, "error": "..."}`;
whatever upstream prints must go to stderr. The subprocess is treated
like a verifier worker: it starts with an allow-listed environment (no keys), in a private temp directory that is
the only place it may write (Landlock, through `lib/confine.py`'s launcher), with address-space, CPU and file-size
limits, in a process group of its own (`lib/proc_group.py`) that is killed as one at `close()` or on a timeout.

One request at a time per worker. A crash, a timeout or a garbled reply is a `WorkerError` (infrastructure: the
tool server reports it as a `tool_server` error, never the agent's); the next request starts a fresh process,
whose `generation` tells callers that state held by the old one is gone. An op that raises inside the worker is
an `UpstreamOpError`, and the worker lives on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eval_pipelines.lib.child import ChildLimits, ContainedChild
from eval_pipelines.schemas.limits import (
    MAX_UPSTREAM_REPLY_BYTES,
    UPSTREAM_STDERR_BYTES,
    UPSTREAM_WORKER_CPU_SECONDS,
    UPSTREAM_WORKER_FILE_BYTES,
    UPSTREAM_WORKER_MAX_TASKS,
    UPSTREAM_WORKER_MEMORY_BYTES,
)

#: How long one request may take unless its caller says otherwise (a tool call, a grading).
DEFAULT_REQUEST_TIMEOUT_SECONDS = 60.0
#: How long a fresh worker may take to import its upstream package and answer its first request.
DEFAULT_START_TIMEOUT_SECONDS = 120.0
#: The cgroup family of upstream workers (apart from the verifier workers', so neither clears the other's).
WORKER_CGROUP_FAMILY = "upstream-workers"
UPSTREAM_WORKER_LIMITS = ChildLimits(
    memory_bytes=UPSTREAM_WORKER_MEMORY_BYTES,
    cpu_seconds=UPSTREAM_WORKER_CPU_SECONDS,
    file_bytes=UPSTREAM_WORKER_FILE_BYTES,
    max_tasks=UPSTREAM_WORKER_MAX_TASKS,
    stderr_bytes=UPSTREAM_STDERR_BYTES,
    line_bytes=MAX_UPSTREAM_REPLY_BYTES,
)


class WorkerError(RuntimeError):
    """The worker process failed (did not start, crashed, timed out, answered garbage): infrastructure."""


class UpstreamOpError(RuntimeError):
    """The op raised inside the worker; the message is the upstream exception's type and text."""


class UpstreamWorker:
    """`await worker.request("call", workspace="w1", tool="cd", arguments={...}, timeout=30)`.

    `python` is the benchmark venv's interpreter, `script` the adapter's upstream script (run by it, importing
    only the standard library and the upstream package), `env` extra environment variables (settings only, such
    as `LITELLM_LOCAL_MODEL_COST_MAP`; never a secret). The process starts on the first request.
    """

    def __init__(
        self,
        python: Path,
        script: Path,
        env: Mapping[str, str] | None = None,
        *,
        start_timeout: float = DEFAULT_START_TIMEOUT_SECONDS,
    ) -> None:
        self.python = Path(python)
        self.script = Path(script)
        self.extra_env = dict(env or {})
        self.start_timeout = start_timeout
        #: incremented at every start: state a caller created in an older generation is gone.
        self.generation = 0
        self._child: ContainedChild | None = None
        self._lock: asyncio.Lock | None = None
        self._next_id = 0

    @property
    def pid(self) -> int | None:
        return None if self._child is None else self._child.pid

    def is_running(self) -> bool:
        return self._child is not None and self._child.is_running()

    async def request(self, op: str, *, timeout: float = DEFAULT_REQUEST_TIMEOUT_SECONDS, **arguments: Any) -> Any:
        """The op's result; `UpstreamOpError` if it raised in the worker, `WorkerError` if the worker failed."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self.is_running():
                await self._start()
                timeout = max(timeout, self.start_timeout)
            return await self._exchange(op, arguments, timeout)

    async def _exchange(self, op: str, arguments: dict[str, Any], timeout: float) -> Any:
        assert self._child is not None
        process, tail = self._child.process, self._child.stderr_tail
        assert process.stdin is not None and process.stdout is not None
        self._next_id += 1
        request_id = self._next_id
        try:
            line = json.dumps({**arguments, "id": request_id, "op": op}) + "\n"
        except (TypeError, ValueError) as exc:
            raise UpstreamOpError(f"arguments of {op!r} are not JSON: {exc}") from None
        try:
            process.stdin.write(line.encode())
            await asyncio.wait_for(process.stdin.drain(), timeout)
            raw = await asyncio.wait_for(process.stdout.readline(), timeout)
        except TimeoutError:
            await self._kill()
            raise WorkerError(f"upstream worker {self.script.name}: {op!r} took longer than {timeout:g}s") from None
        except (ConnectionError, ValueError, asyncio.LimitOverrunError) as exc:
            # ValueError: a reply line over MAX_UPSTREAM_REPLY_BYTES.
            await self._kill()
            raise WorkerError(f"upstream worker {self.script.name}: {op!r} failed: {exc}{tail()}") from None
        if not raw:
            await self._kill()
            raise WorkerError(f"upstream worker {self.script.name} exited during {op!r}{tail()}")
        try:
            reply = json.loads(raw)
        except ValueError:
            await self._kill()
            raise WorkerError(
                f"upstream worker {self.script.name} answered {op!r} with a line that is not JSON"
            ) from None
        if not isinstance(reply, dict) or reply.get("id") != request_id:
            await self._kill()
            raise WorkerError(f"upstream worker {self.script.name} answered {op!r} out of order")
        if not reply.get("ok"):
            raise UpstreamOpError(str(reply.get("error", "unknown error")))
        return reply.get("result")

    async def _start(self) -> None:
        await self._kill()
        self.generation += 1
        try:
            self._child = await ContainedChild.start(
                [str(self.python), "-I", str(self.script.resolve())],
                limits=UPSTREAM_WORKER_LIMITS,
                family=WORKER_CGROUP_FAMILY,
                workdir_prefix="upstream-worker-",
                env=self.extra_env,
            )
        except OSError as exc:
            raise WorkerError(f"upstream worker {self.script.name} could not start: {exc}") from None

    async def _kill(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            await child.close()

    async def close(self) -> None:
        """Stop the worker and everything it started; a later request starts a new one."""
        if self._lock is None:
            await self._kill()
            return
        async with self._lock:
            await self._kill()
