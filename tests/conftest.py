from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.local.services import local_evaluation_service
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


@pytest.fixture
def local_backend() -> Iterator[Callable[..., EvaluationBackend]]:
    """local_backend(data_dir, catalog=None) -> a client of the local evaluation service on `data_dir`, the way the
    pipeline's embedded default reaches it (loopback HTTP); stopped at the end of the test."""
    with contextlib.ExitStack() as held:

        def open_backend(data_dir: Path, catalog: ScenarioCatalog | None = None) -> EvaluationBackend:
            scenarios = (catalog or ScenarioCatalog()).root
            local = held.enter_context(local_evaluation_service(data_dir, scenarios))
            backend = local.backend()
            held.callback(backend.close)
            return backend

        yield open_backend
