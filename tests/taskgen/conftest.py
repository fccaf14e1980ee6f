"""Shared fixtures of the task-generation tests: a real calendar server over HTTP, and the simulated
task-generation model served on the OpenAI wire (optionally wrapped to misbehave)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.llm.types import ChatRequest
from eval_pipelines.sim.endpoint import ReferenceBook, SimPersona, create_sim_app
from eval_pipelines.sim.taskgen import SIM_TASKGEN, taskgen_persona
from eval_pipelines.toolservers import create_app
from eval_pipelines.toolservers.calendar import CalendarServer
from eval_pipelines.toolservers.registry import BUILTIN_SERVERS


@pytest.fixture(autouse=True)
def calendar_is_builtin(monkeypatch: pytest.MonkeyPatch) -> None:
    """The calendar server is being registered in toolservers.registry; until it is, register it for these
    tests so the gates and the local runtime can host it (a real server, not a stand-in)."""
    if "calendar" not in BUILTIN_SERVERS:
        monkeypatch.setitem(BUILTIN_SERVERS, "calendar", CalendarServer)


@pytest.fixture
def calendar_url() -> Iterator[str]:
    with BackgroundServer(create_app(CalendarServer())) as server:
        yield f"{server.url}"


PersonaWrapper = Callable[[ChatRequest, str], str]


@pytest.fixture
def taskgen_llm() -> Iterator[Callable[..., str]]:
    """start(wrapper=None) -> base URL of an OpenAI-compatible endpoint serving `sim-taskgen`; `wrapper(request,
    reply)` may replace the persona's reply to inject faults."""
    servers: list[BackgroundServer] = []

    def start(wrapper: PersonaWrapper | None = None) -> str:
        def persona(request: ChatRequest) -> str:
            reply = taskgen_persona(request)
            return wrapper(request, reply) if wrapper else reply

        personas: dict[str, SimPersona] = {SIM_TASKGEN: persona}
        server = BackgroundServer(create_sim_app(ReferenceBook(), personas=personas)).start()
        servers.append(server)
        return f"{server.url}/v1"

    yield start
    for server in servers:
        server.stop()


def calendar_toolset() -> list[dict[str, Any]]:
    return [tool.as_task_gen_tool() for tool in CalendarServer().tools()]
