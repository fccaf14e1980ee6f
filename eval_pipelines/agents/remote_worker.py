"""Run one SimLab agent for one rollout, in the agent's own interpreter. Imports only the standard library (and,
when the interpreter has it, SimLab): this file is run as a script by another Python than the project's.

The rollout (`agents/remote.py`) talks to it over pipes, one JSON object a line. Its first line on stdin is
`{"op": "start", ...}`; then it answers the requests this worker sends (`list_tools`, `call_tool`) with
`{"op": "reply", "id": 7, "ok": true, "result": ...}`, and may say `{"op": "stop"}`. This worker writes, on the
stdout it was started with: `started` or `failed` (the agent could not be imported or constructed), the requests,
`record_message` and `record_tool_call` as the agent records them (so a rollout that times out keeps what was
recorded), and `finished` with the artifacts' other fields. Anything the agent prints goes to stderr: file
descriptor 1 is pointed there before the agent is imported, and stdin to /dev/null.

The agent is run as SimLab's runner runs it (`run_with_agent_contract`): SimLab's built-in `ReferenceAgent` is
constructed with `provider`, `api_key` and `base_url`, any other agent with no arguments (it reads the
SIMLAB_AGENT_* variables); then `setup(environment)` and `run(instruction, environment, context)`, each sync or
async, `run` given `stop_event` when it takes one. With SimLab importable, the environment, the artifacts and the
tool results are SimLab's own classes; otherwise stand-ins with the same attributes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import json
import os
import sys
import threading
import traceback
from concurrent.futures import Future
from typing import Any

REFERENCE_AGENT = ("simlab.agents.reference_agent", "ReferenceAgent")


class Channel:
    """Lines to the rollout on a private descriptor; replies to this worker's requests matched by id."""

    def __init__(self, out_fd: int, in_file: Any) -> None:
        self._out_fd = out_fd
        self._in = in_file
        self._lock = threading.Lock()
        self._pending: dict[int, Future[Any]] = {}
        self._next_id = 0
        self.stop_event = threading.Event()

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, default=str) + "\n").encode()
        with self._lock:
            view = memoryview(data)
            while view:
                written = os.write(self._out_fd, view)
                view = view[written:]

    def read_start(self) -> dict[str, Any]:
        line = self._in.readline()
        if not line:
            os._exit(0)
        return json.loads(line)

    def request(self, op: str, **arguments: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            self._pending[request_id] = future
        self.send({**arguments, "op": op, "id": request_id})
        return future

    def listen(self) -> None:
        """Hand replies to their requests; end the process when the rollout closes the pipe (it is gone)."""
        for line in self._in:
            message = json.loads(line)
            if message.get("op") == "stop":
                self.stop_event.set()
                continue
            with self._lock:
                future = self._pending.pop(int(message.get("id", -1)), None)
            if future is None:
                continue
            if message.get("ok"):
                future.set_result(message.get("result"))
            else:
                future.set_exception(RuntimeError(str(message.get("error", "tool call failed"))))
        os._exit(0)


def _simlab_classes() -> dict[str, Any]:
    try:
        from simlab.agents import base
    except ImportError:
        return {}
    return {
        "environment": base.BaseEnvironment,
        "artifacts": base.RunArtifacts,
        "result": base.ToolCallResult,
        "namespace": base.ToolNamespace,
    }


@dataclasses.dataclass
class StandInToolCallResult:
    observation: Any
    is_error: bool = False


@dataclasses.dataclass(frozen=True)
class StandInToolNamespace:
    name: str
    transport: str
    endpoint: str | None = None


@dataclasses.dataclass
class StandInRunArtifacts:
    task_id: str = ""
    task: str = ""
    model: str | None = None
    provider: str | None = None
    messages: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    tool_calls: list[Any] = dataclasses.field(default_factory=list)
    tool_results: list[Any] = dataclasses.field(default_factory=list)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    final_observation: str | None = None
    error: str | None = None
    steps_taken: int = 0
    max_steps: int | None = None

    def record_message(self, role: str, content: Any) -> None:
        self.messages.append({"role": role, "content": content})

    def record_tool_call(self, call: Any, result: Any) -> None:
        self.tool_calls.append(call)
        self.tool_results.append(result)
        self.steps_taken += 1


def run_coroutine(coro: Any) -> Any:
    """SimLab's rule for a coroutine met in sync code: run it here, or on a helper thread inside a running loop.
    Also `simlab_adapter.py`'s (which may import this file; this file imports nothing of ours)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    done: Future[Any] = Future()

    def target() -> None:
        try:
            done.set_result(asyncio.run(coro))
        except BaseException as exc:  # handed to the caller
            done.set_exception(exc)

    threading.Thread(target=target, daemon=True).start()
    return done.result()


def _environment_class(channel: Channel, classes: dict[str, Any]) -> type:
    base = classes.get("environment", object)
    result_class = classes.get("result", StandInToolCallResult)
    namespace_class = classes.get("namespace", StandInToolNamespace)

    class ChannelEnvironment(base):  # type: ignore[misc, valid-type]
        """SimLab's environment whose every listing and call is made by the rollout, on its own connections."""

        def __init__(self, namespaces: list[dict[str, Any]]) -> None:
            self._namespaces = namespaces

        def list_tool_namespaces(self) -> list[Any]:
            return [namespace_class(n["name"], n["transport"], n.get("endpoint")) for n in self._namespaces]

        @property
        def tool_servers(self) -> dict[str, str]:
            return {n["name"]: n.get("endpoint") or "" for n in self._namespaces}

        async def alist_tools(self, tool_server: str | None = None) -> list[dict[str, Any]]:
            return await asyncio.wrap_future(channel.request("list_tools", tool_server=tool_server))

        async def acall_tool(self, tool_server: str, tool_name: str, parameters: dict[str, Any]) -> Any:
            result = await asyncio.wrap_future(
                channel.request("call_tool", tool_server=tool_server, tool_name=tool_name, parameters=parameters)
            )
            return result_class(observation=result["observation"], is_error=bool(result["is_error"]))

        def list_tools(self, tool_server: str | None = None) -> list[dict[str, Any]]:
            return run_coroutine(self.alist_tools(tool_server))

        def call_tool(self, tool_server: str, tool_name: str, parameters: dict[str, Any]) -> Any:
            return run_coroutine(self.acall_tool(tool_server, tool_name, parameters))

    return ChannelEnvironment


def _artifacts_class(channel: Channel, classes: dict[str, Any]) -> type:
    base = classes.get("artifacts", StandInRunArtifacts)

    class StreamedArtifacts(base):  # type: ignore[misc, valid-type]
        """The run's artifacts as SimLab's runner gives them, each record also sent to the rollout at once."""

        def record_message(self, role: str, content: Any, *args: Any, **kwargs: Any) -> None:
            super().record_message(role, content, *args, **kwargs)
            channel.send({"op": "record_message", "role": role, "content": content})

        def record_tool_call(self, call: Any, result: Any) -> None:
            super().record_tool_call(call, result)
            channel.send(
                {
                    "op": "record_tool_call",
                    "call": {
                        "tool_server": getattr(call, "tool_server", ""),
                        "tool_name": getattr(call, "tool_name", ""),
                        "parameters": getattr(call, "parameters", None) or {},
                    },
                    "result": {
                        "observation": getattr(result, "observation", None),
                        "is_error": bool(getattr(result, "is_error", False)),
                    },
                }
            )

    return StreamedArtifacts


def _describe(exc: BaseException) -> str:
    """The exception and its nested causes, as SimLab's runner reports an agent's failure."""
    parts = [f"{type(exc).__name__}: {exc}"]
    nested = getattr(exc, "exceptions", None)
    if isinstance(nested, (list, tuple)):
        parts.extend(f"  - {sub!r}" for sub in nested)
    if exc.__cause__ is not None:
        parts.append(f"Caused by: {exc.__cause__!r}")
    return "\n".join(parts)


def _reference_agent_class() -> Any:
    try:
        module = importlib.import_module(REFERENCE_AGENT[0])
    except ImportError:
        return None
    return getattr(module, REFERENCE_AGENT[1], None)


def _construct(start: dict[str, Any]) -> Any:
    module_name, class_name = start["agent"].split(":")
    agent_class = getattr(importlib.import_module(module_name), class_name)
    reference = _reference_agent_class()
    if reference is not None and isinstance(agent_class, type) and issubclass(agent_class, reference):
        return agent_class(provider=start["provider"], api_key=start["api_key"], base_url=start["base_url"])
    return agent_class()


def _maybe_await(value: Any) -> Any:
    return run_coroutine(value) if inspect.iscoroutine(value) else value


def _run(channel: Channel, start: dict[str, Any]) -> None:
    for folder in reversed(start.get("paths") or []):
        sys.path.insert(0, folder)
    try:
        agent = _construct(start)
    except BaseException:  # an agent that cannot start: the environment's error, told with its traceback's end
        lines = traceback.format_exc().strip().splitlines()
        channel.send({"op": "failed", "error": "\n".join(lines[-12:])})
        return
    classes = _simlab_classes()
    environment = _environment_class(channel, classes)(start["namespaces"])
    context = _artifacts_class(channel, classes)(
        task_id=start["task_id"],
        task=start["instruction"],
        model=start["model"],
        provider=start["provider"],
        max_steps=start["max_steps"],
    )
    name = getattr(agent, "name", None)
    channel.send({"op": "started", "agent_name": str(name()) if callable(name) else None, "simlab": bool(classes)})
    crashed: str | None = None
    try:
        _maybe_await(agent.setup(environment))
        run_kwargs: dict[str, Any] = {}
        if "stop_event" in inspect.signature(agent.run).parameters:
            run_kwargs["stop_event"] = channel.stop_event
        _maybe_await(agent.run(start["instruction"], environment, context, **run_kwargs))
    except Exception as exc:  # the agent's own failure, recorded as SimLab's runner records it
        crashed = _describe(exc)
    if context.final_observation and not context.messages:
        context.record_message("assistant", context.final_observation)
    channel.send(
        {
            "op": "finished",
            "crashed": crashed,
            "final_observation": context.final_observation,
            "error": context.error,
            "metadata": context.metadata,
        }
    )


def main() -> None:
    # The channel keeps the descriptors the rollout gave; the agent's prints and reads get harmless ones.
    out_fd = os.dup(1)
    in_file = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    channel = Channel(out_fd, in_file)
    start = channel.read_start()
    threading.Thread(target=channel.listen, name="rollout-channel", daemon=True).start()
    _run(channel, start)
    sys.stdout.flush()
    sys.stderr.flush()
    # Threads the agent left running (litellm's loggers, an SDK's pools) must not keep the rollout waiting.
    os._exit(0)


if __name__ == "__main__":
    main()
