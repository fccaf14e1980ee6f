"""Run a SimLab agent as it is written.

A SimLab agent (`simlab.agents.BaseAgent` subclass, or any class with `name`/`setup`/`run`) is duck-typed: it
need not subclass this project's BaseAgent, and nothing of SimLab is imported. It gets what SimLab gives it:

- an environment whose tool listings carry `input_schema` (beside `parameters`), whose `acall_tool` result
  holds the whole `/step` JSON as its observation (`{"observation": {"text", "is_error"}}`), and whose sync
  wrappers and `asyncio.run(env.alist_tools())` work from the agent's own thread: every call is handed to
  the loop that owns the environment's connections;
- a context that takes SimLab's own `ToolCall`/`ToolCallResult` objects (anything with their attributes) and
  records them as this project's, so the artifacts stay what every reader expects.

Sync `setup` and `run` run on a worker thread, so the engine's loop keeps serving their tool calls.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass
from typing import Any, TypeVar

from eval_pipelines.agents.base import BaseAgent, construct_agent
from eval_pipelines.agents.remote_worker import run_coroutine
from eval_pipelines.environments.base import BaseEnvironment
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.tools import ToolCall, ToolCallResult

T = TypeVar("T")
SIMLAB_AGENT_METHODS = ("name", "setup", "run")


def is_simlab_agent(candidate: object) -> bool:
    """A class with SimLab's agent methods that is not one of ours."""
    return (
        isinstance(candidate, type)
        and not issubclass(candidate, BaseAgent)
        and all(callable(getattr(candidate, method, None)) for method in SIMLAB_AGENT_METHODS)
    )


def _observation_text(observation: Any) -> str:
    """The text of a SimLab observation: the step JSON's text, or the whole thing as JSON."""
    if isinstance(observation, dict):
        inner = observation.get("observation")
        if isinstance(inner, dict) and isinstance(inner.get("text"), str):
            return str(inner["text"])
        if isinstance(inner, str):
            return inner
        return json.dumps(observation)
    return "" if observation is None else str(observation)


@dataclass(frozen=True)
class SimLabNamespace:
    """SimLab's ToolNamespace."""

    name: str
    transport: str
    endpoint: str | None = None


class SimLabStepResult:
    """SimLab's ToolCallResult: `observation` is the whole `/step` JSON."""

    def __init__(self, result: ToolCallResult) -> None:
        text = result.observation if isinstance(result.observation, str) else json.dumps(result.observation)
        self.observation: dict[str, Any] = {"observation": {"text": text, "is_error": result.is_error}}
        self.is_error = result.is_error


class SimLabEnvironment:
    """The engine's environment, shaped as SimLab's `BaseEnvironment`, with the servers under the names the task's
    SimLab bundle gave them (`email-env` for `email`), as the agent would see them under SimLab."""

    def __init__(
        self, environment: BaseEnvironment, loop: asyncio.AbstractEventLoop, names: dict[str, str] | None = None
    ) -> None:
        self._environment = environment
        self._loop = loop
        self._names = dict(names or {})  # built-in -> SimLab name
        self._builtin = {alias: server for server, alias in self._names.items()}

    def simlab_name(self, server: str) -> str:
        return self._names.get(server, server)

    def builtin_name(self, server: str) -> str:
        return self._builtin.get(server, server)

    async def _on_owner_loop(self, coro: Any) -> Any:
        # The agent may have made a loop of its own (`asyncio.run(env.alist_tools())` in a worker thread); the
        # environment's connections belong to the engine's loop, so the call is made there.
        if asyncio.get_running_loop() is self._loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def alist_tools(self, tool_server: str | None = None) -> list[dict[str, Any]]:
        server = self.builtin_name(tool_server) if tool_server else None
        tools = await self._on_owner_loop(self._environment.alist_tools(server))
        return [
            {**tool, "tool_server": self.simlab_name(tool["tool_server"]), "input_schema": tool.get("parameters") or {}}
            for tool in tools
        ]

    async def acall_tool(self, tool_server: str, tool_name: str, parameters: dict[str, Any]) -> SimLabStepResult:
        call = self._environment.acall_tool(self.builtin_name(tool_server), tool_name, parameters)
        return SimLabStepResult(await self._on_owner_loop(call))

    def list_tool_namespaces(self) -> list[SimLabNamespace]:
        return [
            SimLabNamespace(self.simlab_name(namespace.name), namespace.transport.value, namespace.url)
            for namespace in self._environment.list_tool_namespaces()
        ]

    @property
    def tool_servers(self) -> dict[str, str]:
        return {namespace.name: namespace.endpoint or "" for namespace in self.list_tool_namespaces()}

    def list_tools(self, tool_server: str | None = None) -> list[dict[str, Any]]:
        return run_coroutine(self.alist_tools(tool_server))

    def call_tool(self, tool_server: str, tool_name: str, parameters: dict[str, Any]) -> SimLabStepResult:
        return run_coroutine(self.acall_tool(tool_server, tool_name, parameters))


class SimLabContext:
    """The run's artifacts as a SimLab agent fills them in (calls recorded under the built-in server names)."""

    def __init__(self, artifacts: RunArtifacts, environment: SimLabEnvironment) -> None:
        object.__setattr__(self, "_artifacts", artifacts)
        object.__setattr__(self, "_environment", environment)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._artifacts, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._artifacts, name, value)

    def record_message(self, role: str, content: Any, **extra: Any) -> None:
        self._artifacts.record_message(role, content, **extra)

    def record_tool_call(self, call: Any, result: Any) -> None:
        self._artifacts.record_tool_call(
            ToolCall(
                tool_server=self._environment.builtin_name(str(getattr(call, "tool_server", ""))),
                tool_name=str(getattr(call, "tool_name", "")),
                parameters=dict(getattr(call, "parameters", None) or {}),
            ),
            ToolCallResult(
                observation=_observation_text(getattr(result, "observation", None)),
                is_error=bool(getattr(result, "is_error", False)),
            ),
        )


class SimLabAgentAdapter(BaseAgent):
    """Drives a SimLab agent through the engine."""

    agent_class: type[Any]

    def __init__(self, server_names: dict[str, str] | None = None, **available: Any) -> None:
        # The engine offers client, model_config, user_tag and stop_event: the agent gets those it names.
        self.inner = construct_agent(self.agent_class, available)
        self.server_names = dict(server_names or {})

    @classmethod
    def wrapping(cls, agent_class: type[Any]) -> type[SimLabAgentAdapter]:
        return type(f"SimLab{agent_class.__name__}", (cls,), {"agent_class": agent_class})

    def name(self) -> str:  # type: ignore[override]
        return str(self.inner.name())

    def version(self) -> str | None:
        version = getattr(self.inner, "version", None)
        return str(version()) if callable(version) and version() is not None else None

    async def _call(self, method: Any, *args: Any) -> Any:
        if inspect.iscoroutinefunction(method):
            return await method(*args)
        return await asyncio.to_thread(method, *args)

    def _simlab_environment(self, environment: BaseEnvironment) -> SimLabEnvironment:
        if getattr(self, "_environment", None) is None:
            self._environment = SimLabEnvironment(environment, asyncio.get_running_loop(), self.server_names)
        return self._environment

    async def setup(self, environment: BaseEnvironment) -> None:
        await self._call(self.inner.setup, self._simlab_environment(environment))

    async def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        simlab_environment = self._simlab_environment(environment)
        await self._call(self.inner.run, instruction, simlab_environment, SimLabContext(context, simlab_environment))
