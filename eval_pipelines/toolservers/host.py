"""Serve several built-in tool servers from one loopback port, each mounted under `/<name>`."""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType

from fastapi import FastAPI

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.toolservers.app import DEFAULT_MAX_WORKSPACES, create_app
from eval_pipelines.toolservers.base import BuiltinToolServer
from eval_pipelines.toolservers.registry import BUILTIN_SERVERS

__all__ = ["BUILTIN_SERVERS", "ToolServerHost", "build_host_app"]


def build_host_app(servers: dict[str, BuiltinToolServer], max_workspaces: int = DEFAULT_MAX_WORKSPACES) -> FastAPI:
    """A root app mounting each server's app under `/<name>`, plus `/health` listing what is mounted."""
    root = FastAPI(title="built-in tool servers", version="0.1.0")
    names = sorted(servers)

    @root.get("/health")
    async def health() -> dict[str, object]:
        return {"status": "healthy", "servers": names}

    for name, server in servers.items():
        root.mount(f"/{name}", create_app(server, max_workspaces=max_workspaces))
    return root


class ToolServerHost:
    """`with ToolServerHost(["email"]) as host: host.base_url("email")` -> `http://127.0.0.1:PORT/email`.

    One uvicorn thread serves every requested server, so many concurrent rollouts share a single port
    and keep-alive connections instead of one server per rollout.
    """

    def __init__(
        self,
        servers: Iterable[str] = ("email",),
        host: str = "127.0.0.1",
        port: int | None = None,
        max_workspaces: int = DEFAULT_MAX_WORKSPACES,
    ) -> None:
        names = list(dict.fromkeys(servers))
        unknown = [n for n in names if n not in BUILTIN_SERVERS]
        if unknown:
            raise ValueError(f"unknown built-in tool server(s) {unknown}; available: {sorted(BUILTIN_SERVERS)}")
        if not names:
            raise ValueError("ToolServerHost needs at least one tool server")
        self.servers: dict[str, BuiltinToolServer] = {name: BUILTIN_SERVERS[name]() for name in names}
        self.app = build_host_app(self.servers, max_workspaces=max_workspaces)
        self._server = BackgroundServer(self.app, host=host, port=port)
        self._started = False

    @property
    def url(self) -> str:
        return self._server.url

    def base_url(self, name: str) -> str:
        if name not in self.servers:
            raise KeyError(f"tool server {name!r} is not hosted here; hosted: {sorted(self.servers)}")
        if not self._started:
            raise RuntimeError("ToolServerHost is not started; call start() first")
        return f"{self._server.url}/{name}"

    def start(self) -> ToolServerHost:
        self._server.start()
        self._started = True
        return self

    def stop(self) -> None:
        self._server.stop()
        self._started = False

    def __enter__(self) -> ToolServerHost:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
