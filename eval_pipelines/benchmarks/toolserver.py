"""`UpstreamToolServer`: a tool server whose state lives in an upstream benchmark's worker.

The tools, their execution and their state are the upstream package's, run by its worker (`worker.py`, started on
the first workspace, so a host that never serves a benchmark pays nothing). The workspace's state in the tool
host is the mirror the worker returns after every call, so snapshots, diffs and `turn_states` need no worker
round trip. A subclass (one per adapter, see `catalog.BenchmarkAdapter`) names the server, its environment and
its worker script. The task's seed for the server is one JSON object; its `tools` (what the model may see for
this task: OpenAI function schemas, `{"type": "function", "function": {...}}`, or `{name, description,
parameters}`) are listed by the workspace, every other field is passed to the worker's `create`. The worker's
ops, as both adapters' scripts answer them:

- `create(workspace, **seed fields)` -> `{"state": {...}, "tools"?: [...]}` or the state itself;
- `call(workspace, name, arguments)` -> `{"state": {...}}` plus the observation text under `observation`,
  `result` or `content`, and whether it is an error under `is_error`, `error` or `refused` (a tool error is
  upstream's own text for the model, not an op error);
- `delete(workspace)` -> anything.

A state is a JSON object (`{"GorillaFileSystem": {...}}`, `{"db_hash": "...", "changes": {...}}`). An op that
raises or a worker that fails is infrastructure: the call becomes a `tool_server` error, never the agent's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from eval_pipelines.benchmarks.environments import EnvironmentSpec, ensure
from eval_pipelines.benchmarks.worker import UpstreamOpError, UpstreamWorker, WorkerError
from eval_pipelines.schemas.runs import ErrorClass
from eval_pipelines.schemas.tools import ToolDefinition
from eval_pipelines.toolservers.base import (
    BuiltinToolServer,
    SeedError,
    ServerUnavailable,
    State,
    StateNotRestorable,
    ToolContext,
    ToolError,
)

#: How long one tool call may take in the worker before it counts as hung (upstream backends answer in ms).
DEFAULT_CALL_TIMEOUT_SECONDS = 60.0
#: The most characters of a state `render_text` shows.
MAX_RENDERED_CHARS = 20_000


#: Where a `call` answer holds its observation, and its error flag, in the adapters' scripts.
_OBSERVATION_KEYS = ("observation", "result", "content")
_ERROR_KEYS = ("is_error", "error", "refused")


def _mirror(state: State, fresh: Any, what: str) -> None:
    if not isinstance(fresh, dict):
        raise ServerUnavailable(f"the upstream worker's {what} answer holds no state object")
    state.clear()
    state.update(fresh)


def tool_definition(raw: Any) -> ToolDefinition:
    """A tool the model may see, from an OpenAI function schema or a plain `{name, description, parameters}`."""
    if isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("function"), dict):
        raw = raw["function"]
    return ToolDefinition.model_validate(raw)


#: Seed fields that would collide with the request's own (the workspace, the protocol's, the timeout).
_RESERVED_SEED_FIELDS = frozenset({"workspace", "id", "op", "timeout"})


def _seed_object(seed_files: list[Any]) -> dict[str, Any]:
    if len(seed_files) != 1 or not isinstance(seed_files[0], dict):
        raise SeedError("an upstream benchmark workspace is seeded with exactly one JSON object")
    reserved = sorted(_RESERVED_SEED_FIELDS & set(seed_files[0]))
    if reserved:
        raise SeedError(f"seed field(s) {reserved} are reserved")
    return dict(seed_files[0])


class UpstreamToolServer(BuiltinToolServer):
    """Generic over benchmarks; subclasses set `name`, `environment` and `worker_script`."""

    environment: ClassVar[EnvironmentSpec]
    #: the adapter's upstream script, run by the environment's interpreter (`worker.py` describes the protocol).
    worker_script: ClassVar[Path]
    call_timeout_seconds: ClassVar[float] = DEFAULT_CALL_TIMEOUT_SECONDS
    #: a failed call stays as the worker left it: upstream keeps whatever the call changed before it failed.
    rolls_back_failed_calls: ClassVar[bool] = False

    def __init__(self) -> None:
        self._worker: UpstreamWorker | None = None
        self._starting: asyncio.Lock | None = None
        self._workspace_tools: dict[str, list[ToolDefinition]] = {}
        #: the worker generation each workspace was created in: a restarted worker no longer holds it.
        self._generations: dict[str, int] = {}

    async def worker(self) -> UpstreamWorker:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._worker is None:
                python = await asyncio.to_thread(ensure, self.environment)
                self._worker = UpstreamWorker(python, self.worker_script, self.environment.worker_env)
            return self._worker

    async def aclose(self) -> None:
        if self._worker is not None:
            await self._worker.close()

    def new_state(self) -> State:
        return {}

    def restore_state(self, snapshot: Mapping[str, Any]) -> State:
        raise StateNotRestorable(
            f"tool server '{self.name}' keeps its state in its upstream worker, which takes no snapshot back"
        )

    def seed(self, state: State, seed_files: list[Any]) -> None:
        if not seed_files:  # a workspace made empty, to be seeded by `aseed`
            return
        raise SeedError(f"tool server '{self.name}' is seeded by its upstream worker (asynchronously)")

    async def aseed(self, workspace_id: str, state: State, seed_files: list[Any]) -> None:
        seed = _seed_object(seed_files)
        listed = seed.pop("tools", [])
        if not isinstance(listed, list):
            raise SeedError("'tools' must be a list of tool schemas")
        try:
            tools = [tool_definition(raw) for raw in listed]
        except ValueError as exc:
            raise SeedError(f"'tools': {exc}") from None
        try:
            worker = await self.worker()
            created = await worker.request("create", workspace=workspace_id, **seed)
        except UpstreamOpError as exc:
            raise SeedError(str(exc)) from None
        except WorkerError as exc:
            raise ServerUnavailable(str(exc)) from None
        fresh = created.get("state") if isinstance(created, dict) and "state" in created else created
        _mirror(state, fresh, "create")
        if isinstance(created, dict) and isinstance(created.get("tools"), list):
            try:
                tools = [tool_definition(raw) for raw in created["tools"]]
            except ValueError as exc:
                raise ServerUnavailable(f"the upstream worker listed a malformed tool: {exc}") from None
        self._workspace_tools[workspace_id] = tools
        self._generations[workspace_id] = worker.generation

    async def adelete(self, workspace_id: str) -> None:
        self._workspace_tools.pop(workspace_id, None)
        generation = self._generations.pop(workspace_id, None)
        worker = self._worker
        if worker is None or generation != worker.generation or not worker.is_running():
            return
        # A workspace the worker no longer holds is as deleted as it gets.
        with contextlib.suppress(UpstreamOpError, WorkerError):
            await worker.request("delete", workspace=workspace_id)

    def workspace_tools(self, workspace_id: str) -> list[ToolDefinition]:
        return [tool.model_copy(deep=True) for tool in self._workspace_tools.get(workspace_id, [])]

    def mutates(self, tool_name: str) -> bool:
        return True  # upstream does not say which calls write; a diff is made only when the state moved

    def validate_params(self, tool_name: str, params: dict[str, Any]) -> dict[str, Any]:
        return dict(params)  # upstream validates nothing itself: its own error text reaches the model

    def call(self, ctx: ToolContext, tool_name: str, params: dict[str, Any]) -> str:
        raise ToolError(f"tool server '{self.name}' runs its calls in its upstream worker (asynchronously)")

    async def acall(self, ctx: ToolContext, tool_name: str, params: dict[str, Any]) -> str:
        worker = self._worker
        infrastructure = ErrorClass.TOOL_SERVER.value
        if worker is None or self._generations.get(ctx.workspace_id) != worker.generation:
            raise ToolError(
                f"tool server '{self.name}': the upstream worker restarted and lost this workspace",
                source=infrastructure,
            )
        try:
            answer = await worker.request(
                "call", workspace=ctx.workspace_id, name=tool_name, arguments=params, timeout=self.call_timeout_seconds
            )
        except (WorkerError, UpstreamOpError) as exc:
            raise ToolError(f"tool server '{self.name}': {exc}", source=infrastructure) from None
        key = next((k for k in _OBSERVATION_KEYS if isinstance(answer, dict) and k in answer), None)
        if key is None or not isinstance(answer.get("state"), dict):
            missing = f"tool server '{self.name}': the upstream worker's call answer lacks its observation or state"
            raise ToolError(missing, source=infrastructure)
        observation = answer[key]
        text = observation if isinstance(observation, str) else json.dumps(observation, default=str)
        _mirror(ctx.state, answer["state"], "call")
        if any(answer.get(k) for k in _ERROR_KEYS):
            raise ToolError(text)
        return text

    def render_text(self, state: State) -> str:
        text = json.dumps(state, indent=1, sort_keys=True, default=str)
        return text if len(text) <= MAX_RENDERED_CHARS else text[:MAX_RENDERED_CHARS] + "\n..."
