"""Serve an ASGI app with uvicorn on a loopback port in a background thread.

The embedded default and the tests talk to real HTTP servers (tool servers, simulated models, the local
services), never to in-process mocks; this is the one place that starts them.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from eval_pipelines.lib.aio import startup_objects_frozen
from eval_pipelines.lib.redact import install_log_redaction

#: How long our servers keep an idle connection open. Announced to clients in a `Keep-Alive: timeout=` header,
#: so ours (lib/http_transport) reuse a connection that long instead of their 5 s default: a rollout's next
#: tool call or model call often comes more than 5 s after its last when model calls take seconds, and a
#: connection closed and opened again for each costs both processes more than the request itself.
KEEP_ALIVE_SECONDS = 30
_KEEP_ALIVE_HEADER = (b"keep-alive", f"timeout={KEEP_ALIVE_SECONDS}".encode())


def announcing_keep_alive(app: Any) -> Any:
    """`app` with every HTTP response announcing `KEEP_ALIVE_SECONDS` (serve it with that keep-alive timeout)."""

    async def announced(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_announcing(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), _KEEP_ALIVE_HEADER]}
            await send(message)

        await app(scope, receive, send_announcing)

    return announced


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class BackgroundServer:
    """`with BackgroundServer(app) as server: httpx.get(server.url + "/health")`."""

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout: float = 15.0,
        log_level: str = "warning",
    ) -> None:
        # The hosting process may be any of ours (a test, a notebook): its lines are redacted like an entry point's.
        install_log_redaction()
        self.host = host
        self.port = port or free_port(host)
        self._startup_timeout = startup_timeout
        config = uvicorn.Config(
            announcing_keep_alive(app),
            host=host,
            port=self.port,
            log_level=log_level,
            # Never reconfigure the host process's logging: uvicorn's default dictConfig closes every handler of
            # the process under logging's module lock, which deadlocks against a thread that is logging (seen:
            # a server started inside a Dagster run while the service client logged a retry).
            log_config=None,
            access_log=False,
            lifespan="on",
            # Loopback traffic from many concurrent rollouts: keep connections alive between steps.
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            # In-process servers (tool servers, simulated models, tests) must stop promptly, even mid-request.
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> BackgroundServer:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._serve, name=f"uvicorn:{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"server on {self.url} exited during startup")
            if time.monotonic() > deadline:
                raise TimeoutError(f"server on {self.url} did not start within {self._startup_timeout}s")
            time.sleep(0.01)
        return self

    def _serve(self) -> None:
        # A sweep's rollouts run on this server's loop when it is the embedded service: see startup_objects_frozen.
        with startup_objects_frozen():
            self._server.run()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
