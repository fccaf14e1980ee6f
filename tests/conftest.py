from __future__ import annotations

from collections.abc import Iterator

import pytest

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.toolservers.host import ToolServerHost


@pytest.fixture(scope="session")
def tool_host() -> Iterator[ToolServerHost]:
    """Every built-in tool server over real HTTP on loopback, shared by the session."""
    from eval_pipelines.toolservers.host import BUILTIN_SERVERS

    with ToolServerHost(list(BUILTIN_SERVERS)) as host:
        yield host


@pytest.fixture
def serve() -> Iterator[object]:
    """serve(app) -> BackgroundServer, stopped at the end of the test."""
    servers: list[BackgroundServer] = []

    def start(app: object) -> BackgroundServer:
        server = BackgroundServer(app).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
