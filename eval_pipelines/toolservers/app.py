"""The HTTP face of a built-in tool server: spec 001 `/tools` and `/step`, plus workspaces and snapshots.

Every route is `async def` and runs on the event-loop thread. A step awaits the server's `acall`, so a tool
that waits on I/O (an NPC's model) does not hold up other workspaces; within one workspace, steps, seeding
and configuring take the workspace's lock, so they never interleave. A snapshot never sees a step half-done
either: an awaiting `acall` changes the state only after its last await.

Runtime settings (`POST /workspaces/{id}/configure`, for example the model that plays NPCs) live in the
workspace's memory only: never in its state, a snapshot, a diff or a log.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

import pydantic_core
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.types import Receive, Scope, Send

from eval_pipelines.lib.body_limit import BodyLimit, replay_body
from eval_pipelines.schemas._base import StrictModel
from eval_pipelines.schemas.hosted import hosted_tool
from eval_pipelines.schemas.limits import MAX_TOOL_SERVER_REQUEST_BYTES, MAX_WORKSPACES_PER_BATCH_DELETE
from eval_pipelines.schemas.tools import LISTING_SCOPE_KEY, DiffScope, ListingScope, StepRequest
from eval_pipelines.toolservers.base import (
    BuiltinToolServer,
    SeedError,
    ServerUnavailable,
    State,
    StateNotRestorable,
    ToolContext,
    ToolError,
    copy_state,
)
from eval_pipelines.toolservers.diff import diff_states

WORKSPACE_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"
DEFAULT_WORKSPACE = "default"
DEFAULT_MAX_WORKSPACES = 10_000
#: Distinct seeds whose seeded state a store keeps (a run's rollouts of one task all send the same seed).
SEEDED_STATES_KEPT = 64

_WORKSPACE_ID_RE = re.compile(WORKSPACE_ID_PATTERN)


class StateResponse(JSONResponse):
    """JSON encoded by pydantic's compiled encoder, handed back as a response so FastAPI does not first walk the
    body through its Python `jsonable_encoder`. The routes every rollout calls (create, step, snapshot, delete)
    answer with whole states and diffs, and that walk was most of their cost."""

    def render(self, content: Any) -> bytes:
        return pydantic_core.to_json(content)


class CreateWorkspaceRequest(StrictModel):
    workspace_id: str | None = Field(default=None, pattern=WORKSPACE_ID_PATTERN)
    seed: list[Any] = Field(default_factory=list)
    #: start from this state (a snapshot's `state`) instead of a seeded new one: re-verification brings a
    #: finished rollout's final state back for verifiers that query the server
    state: dict[str, Any] | None = None


class BatchDeleteRequest(StrictModel):
    workspace_ids: list[str] = Field(max_length=MAX_WORKSPACES_PER_BATCH_DELETE)


class SeedRequest(StrictModel):
    seed: list[Any] = Field(default_factory=list)


@dataclass
class Workspace:
    workspace_id: str
    state: State
    step_count: int = 0
    #: set by `configure`; may hold credentials, so it is never dumped, snapshotted or shown in repr.
    runtime: dict[str, Any] = field(default_factory=dict, repr=False)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False, compare=False)


@dataclass
class WorkspaceStore:
    """In-memory workspaces of one server. Only ever touched from the event-loop thread."""

    server: BuiltinToolServer
    max_workspaces: int = DEFAULT_MAX_WORKSPACES
    workspaces: dict[str, Workspace] = field(default_factory=dict)
    #: seed (as JSON) -> the state it seeds, for a server whose seeding depends on the seed alone
    #: (`seeding_is_pure`): every rollout of a task sends the same seed, and parsing it again (addresses,
    #: timestamps, search text) was the largest part of the tool host's CPU a rollout. Never handed out: each
    #: workspace gets a copy. Oldest first.
    seeded_states: dict[bytes, State] = field(default_factory=dict, repr=False)
    #: the server's tool listing as sent, made once (only for a server whose tools are the same in every workspace)
    server_listing: list[dict[str, Any]] | None = field(default=None, repr=False)

    def _ensure_capacity(self) -> None:
        if len(self.workspaces) >= self.max_workspaces:
            raise HTTPException(
                status_code=503,
                detail=f"tool server '{self.server.name}' is full ({self.max_workspaces} workspaces); "
                "delete finished workspaces and retry",
            )

    def create(self, workspace_id: str | None, seed: list[Any], state: dict[str, Any] | None = None) -> Workspace:
        workspace_id = workspace_id or uuid.uuid4().hex
        if workspace_id in self.workspaces:
            raise HTTPException(status_code=409, detail=f"workspace '{workspace_id}' already exists")
        if state is not None and seed:
            raise HTTPException(status_code=400, detail="give either 'seed' or 'state', not both")
        self._ensure_capacity()
        initial = self._restored(state) if state is not None else self._fresh(seed)
        workspace = Workspace(workspace_id=workspace_id, state=initial)
        self.workspaces[workspace_id] = workspace
        return workspace

    def _restored(self, snapshot: dict[str, Any]) -> State:
        """The server's own state rebuilt from a snapshot, or 422 saying why it cannot be."""
        try:
            return self.server.restore_state(snapshot)
        except StateNotRestorable as exc:
            raise HTTPException(status_code=422, detail=f"cannot restore '{self.server.name}': {exc}") from exc

    def _fresh(self, seed: list[Any]) -> State:
        """A new state with `seed` loaded (or 400)."""
        if not seed or not self.server.seeding_is_pure:
            return self._seeded(self.server.new_state(), seed)
        key = pydantic_core.to_json(seed)
        seeded = self.seeded_states.pop(key, None)
        if seeded is None:
            seeded = self._seeded(self.server.new_state(), seed)
            if len(self.seeded_states) >= SEEDED_STATES_KEPT:
                del self.seeded_states[next(iter(self.seeded_states))]
        self.seeded_states[key] = seeded  # newest last
        return copy_state(seeded)

    def _seeded(self, state: State, seed: list[Any]) -> State:
        """`state` plus `seed`, or 400. The caller's state is never touched, so a bad seed leaves nothing
        half-loaded behind."""
        candidate = copy_state(state)
        try:
            self.server.seed(candidate, seed)
        except (SeedError, ValueError, TypeError, KeyError) as exc:
            raise HTTPException(status_code=400, detail=f"invalid seed for '{self.server.name}': {exc}") from exc
        return candidate

    def seed(self, workspace: Workspace, seed: list[Any]) -> None:
        workspace.state = self._seeded(workspace.state, seed)

    async def acreate(
        self, workspace_id: str | None, seed: list[Any], state: dict[str, Any] | None = None
    ) -> Workspace:
        """`create`, seeding through the server's `aseed` (which may wait on a backend)."""
        if state is not None or not seed or self.server.seeding_is_pure:
            return self.create(workspace_id, seed, state)
        workspace = self.create(workspace_id, [])
        try:
            await self.aseed(workspace, seed)
        except HTTPException:
            self.workspaces.pop(workspace.workspace_id, None)
            raise
        return workspace

    async def aseed(self, workspace: Workspace, seed: list[Any]) -> None:
        """`seed` through the server's `aseed`: 400 for a bad seed, 503 when the server's backend failed."""
        candidate = copy_state(workspace.state)
        try:
            await self.server.aseed(workspace.workspace_id, candidate, seed)
        except (SeedError, ValueError, TypeError, KeyError) as exc:
            raise HTTPException(status_code=400, detail=f"invalid seed for '{self.server.name}': {exc}") from exc
        except ServerUnavailable as exc:
            raise HTTPException(status_code=503, detail=f"tool server '{self.server.name}': {exc}") from exc
        workspace.state = candidate

    async def adelete(self, workspace_id: str) -> None:
        self.delete(workspace_id)
        await self.server.adelete(workspace_id)

    def get(self, workspace_id: str) -> Workspace:
        workspace = self.workspaces.get(workspace_id)
        if workspace is None:
            raise HTTPException(status_code=404, detail=f"workspace '{workspace_id}' not found")
        return workspace

    def get_or_create_default(self) -> Workspace:
        workspace = self.workspaces.get(DEFAULT_WORKSPACE)
        if workspace is None:
            workspace = self.create(DEFAULT_WORKSPACE, [])
        return workspace

    def delete(self, workspace_id: str) -> None:
        self.get(workspace_id)
        del self.workspaces[workspace_id]

    def _begin_step(self, workspace: Workspace, tool_name: str) -> tuple[ToolContext, State | None]:
        step_index = workspace.step_count
        workspace.step_count += 1
        # Reads skip the snapshot entirely; mutating calls keep one both to diff and to roll back a call
        # that fails half-way, so a failed call never leaves partial changes behind.
        before = copy_state(workspace.state) if self.server.mutates(tool_name) else None
        ctx = ToolContext(
            workspace_id=workspace.workspace_id,
            state=workspace.state,
            step_index=step_index,
            runtime=workspace.runtime,
        )
        return ctx, before

    def _failed_step(
        self, workspace: Workspace, tool_name: str, before: State | None, exc: Exception
    ) -> dict[str, Any]:
        self._rollback(workspace, before)
        if isinstance(exc, StateNotRestorable):
            # Not an observation: whoever queries a restored workspace (a verifier) must not read this as the
            # state the rollout left, so the request itself fails.
            raise HTTPException(status_code=409, detail=f"tool server '{self.server.name}': {exc}") from exc
        if isinstance(exc, ToolError):
            body: dict[str, Any] = {"observation": exc.message, "is_error": True}
            if exc.source is not None:
                body["error_source"] = exc.source
            return body
        return {"observation": f"Tool {tool_name} failed: {exc}", "is_error": True}

    def _finish_step(
        self, workspace: Workspace, ctx: ToolContext, tool_name: str, before: State | None, observation: str
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"observation": observation}
        if before is not None:
            diff = diff_states(
                self.server,
                before,
                workspace.state,
                DiffScope.TOOL_CALL,
                step_index=ctx.step_index,
                tool_name=tool_name,
            )
            if not diff.is_empty:
                body["state_diff"] = diff.model_dump(mode="json")
        return body

    def step(self, workspace: Workspace, request: StepRequest) -> dict[str, Any]:
        """One step run synchronously (in-process callers); a server's `acall` is not used here."""
        tool_name = request.action.tool_name
        ctx, before = self._begin_step(workspace, tool_name)
        try:
            observation = self.server.execute(ctx, tool_name, request.action.parameters)
        except Exception as exc:
            return self._failed_step(workspace, tool_name, before, exc)
        return self._finish_step(workspace, ctx, tool_name, before, observation)

    async def astep(self, workspace: Workspace, request: StepRequest) -> dict[str, Any]:
        """One step awaiting the server's `acall`. The workspace lock keeps a step that awaits (an NPC reply)
        from interleaving with another step, a seed or a snapshot of the same workspace."""
        tool_name = request.action.tool_name
        async with workspace.lock:
            ctx, before = self._begin_step(workspace, tool_name)
            try:
                observation = await self.server.aexecute(ctx, tool_name, request.action.parameters)
            except Exception as exc:
                return self._failed_step(workspace, tool_name, before, exc)
            return self._finish_step(workspace, ctx, tool_name, before, observation)

    def configure(self, workspace: Workspace, settings: dict[str, Any]) -> dict[str, Any]:
        """Apply runtime settings, or 400. They are applied to a copy first, so a refused call changes nothing."""
        runtime = dict(workspace.runtime)
        try:
            applied = self.server.configure(runtime, settings)
        except ValueError as exc:
            # Servers raise messages that never echo a value; a pydantic error is reduced to its locations.
            raise HTTPException(
                status_code=400, detail=f"cannot configure '{self.server.name}': {_safe_error(exc)}"
            ) from None
        workspace.runtime = runtime
        return applied

    def _rollback(self, workspace: Workspace, before: State | None) -> None:
        if before is not None and self.server.rolls_back_failed_calls:
            workspace.state = before

    def snapshot(self, workspace: Workspace, *, text: bool = True) -> dict[str, Any]:
        """The workspace's state, and (unless `text` is False) the server's human-readable rendering of it."""
        body = {"tool_server": self.server.name, "workspace_id": workspace.workspace_id, "state": workspace.state}
        if text:
            body["text"] = self.server.render_text(workspace.state)
        return body


def _safe_error(exc: ValueError) -> str:
    errors: Callable[..., list[Any]] | None = getattr(exc, "errors", None)
    if errors is None:
        return str(exc)
    # A pydantic ValidationError repeats the offending input, which may be a key: keep locations and messages.
    parts = []
    for error in errors(include_input=False, include_url=False):
        loc = ".".join(str(p) for p in error.get("loc", ())) or "<root>"
        parts.append(f"{loc}: {error.get('msg', '')}")
    return "; ".join(parts)


async def store_of(request: Request) -> WorkspaceStore:
    """The workspace store of the app serving `request` (a route's dependency). `async`, so FastAPI calls it
    on the event loop: a plain function dependency is run on a worker thread, a hop per request."""
    store = request.app.state.store
    assert isinstance(store, WorkspaceStore)
    return store


StoreDep = Annotated[WorkspaceStore, Depends(store_of)]


def _tool_listing(store: WorkspaceStore, workspace_id: str | None = None) -> dict[str, Any]:
    """`{"tools": [...], "listing_scope": ...}`: `server` when every workspace lists the same tools, so a client
    may reuse one workspace's listing for the next; `workspace` when they depend on the workspace's seed."""
    server = store.server
    if workspace_id is not None and listing_depends_on_workspace(server):
        tools = [tool.model_dump(by_alias=False) for tool in server.workspace_tools(workspace_id)]
        return {"tools": tools, LISTING_SCOPE_KEY: ListingScope.WORKSPACE.value}
    if store.server_listing is None:
        store.server_listing = [tool.model_dump(by_alias=False) for tool in server.tools()]
    return {"tools": store.server_listing, LISTING_SCOPE_KEY: ListingScope.SERVER.value}


def listing_depends_on_workspace(server: BuiltinToolServer) -> bool:
    return type(server).workspace_tools is not BuiltinToolServer.workspace_tools


def _workspace_or_404(store: WorkspaceStore, workspace_id: str) -> Workspace:
    if not _WORKSPACE_ID_RE.match(workspace_id):
        raise HTTPException(status_code=404, detail=f"workspace '{workspace_id}' not found")
    return store.get(workspace_id)


#: `/tools`, `/step` and `/snapshot` at the root, on the `default` workspace (spec 001's plain tool server).
default_routes = APIRouter()
#: Per-workspace routes: one isolated state per rollout.
workspace_routes = APIRouter(prefix="/workspaces")


@default_routes.get("/health")
async def health() -> dict[str, str]:
    return {"status": "healthy"}


@default_routes.get("/tools")
async def list_tools(store: StoreDep) -> dict[str, Any]:
    return _tool_listing(store)


#: `GET .../snapshot?text=false` leaves out the rendering (the rollout engine reads only the state).
TextQuery = Annotated[bool, Query(description="include the human-readable rendering of the state")]


@default_routes.post("/step")
async def step_default(request: StepRequest, store: StoreDep) -> StateResponse:
    return StateResponse(await store.astep(store.get_or_create_default(), request))


@default_routes.get("/snapshot")
async def snapshot_default(store: StoreDep, text: TextQuery = True) -> StateResponse:
    return StateResponse(store.snapshot(store.get_or_create_default(), text=text))


async def _created(store: WorkspaceStore, request: CreateWorkspaceRequest | None) -> dict[str, Any]:
    body = request or CreateWorkspaceRequest()
    workspace = await store.acreate(body.workspace_id, body.seed, body.state)
    # With the seeded state, a rollout's initial snapshot needs no request of its own.
    content = {"workspace_id": workspace.workspace_id, "path": f"/workspaces/{workspace.workspace_id}"}
    return {**content, "state": workspace.state}


async def _deleted(store: WorkspaceStore, workspace_id: str) -> dict[str, Any]:
    _workspace_or_404(store, workspace_id)
    await store.adelete(workspace_id)
    return {"workspace_id": workspace_id, "deleted": True}


@workspace_routes.post("", status_code=201)
async def create_workspace(store: StoreDep, request: CreateWorkspaceRequest | None = None) -> StateResponse:
    return StateResponse(status_code=201, content=await _created(store, request))


@workspace_routes.delete("/{workspace_id}")
async def delete_workspace(workspace_id: str, store: StoreDep) -> StateResponse:
    return StateResponse(await _deleted(store, workspace_id))


@workspace_routes.post("/batch-delete")
async def batch_delete_workspaces(request: BatchDeleteRequest, store: StoreDep) -> dict[str, list[str]]:
    """Delete finished workspaces together (one request instead of one each); ids already gone are `missing`."""
    deleted: list[str] = []
    missing: list[str] = []
    for workspace_id in request.workspace_ids:
        if workspace_id not in store.workspaces:
            missing.append(workspace_id)
            continue
        await store.adelete(workspace_id)
        deleted.append(workspace_id)
    return {"deleted": deleted, "missing": missing}


@workspace_routes.post("/{workspace_id}/seed")
async def seed_workspace(workspace_id: str, request: SeedRequest, store: StoreDep) -> dict[str, Any]:
    # Seeding after creation lets the engine report building and seeding as separate rollout phases.
    workspace = _workspace_or_404(store, workspace_id)
    async with workspace.lock:
        await store.aseed(workspace, request.seed)
    return {"workspace_id": workspace_id, "seeded_files": len(request.seed)}


@workspace_routes.post("/{workspace_id}/configure")
async def configure_workspace(workspace_id: str, request: Request, store: StoreDep) -> dict[str, Any]:
    workspace = _workspace_or_404(store, workspace_id)
    # Read by hand: a 422 from body validation would echo the input back, and it may hold an API key.
    try:
        settings = await request.json()
    except ValueError:
        raise HTTPException(status_code=400, detail="configure body must be a JSON object") from None
    if not isinstance(settings, dict):
        raise HTTPException(status_code=400, detail="configure body must be a JSON object")
    async with workspace.lock:
        applied = store.configure(workspace, settings)
    return {"workspace_id": workspace_id, "configured": applied}


@workspace_routes.get("/{workspace_id}/health")
async def workspace_health(workspace_id: str, store: StoreDep) -> dict[str, str]:
    _workspace_or_404(store, workspace_id)
    return {"status": "healthy"}


@workspace_routes.get("/{workspace_id}/tools")
async def workspace_tools(workspace_id: str, store: StoreDep) -> dict[str, Any]:
    _workspace_or_404(store, workspace_id)
    return _tool_listing(store, workspace_id)


@workspace_routes.post("/{workspace_id}/step")
async def workspace_step(workspace_id: str, request: StepRequest, store: StoreDep) -> StateResponse:
    return StateResponse(await store.astep(_workspace_or_404(store, workspace_id), request))


@workspace_routes.get("/{workspace_id}/hosted/tools")
async def workspace_tools_hosted(workspace_id: str, store: StoreDep) -> dict[str, Any]:
    """`/tools` in the hosted product's shape: each schema also as `input_schema`, which SimLab's environment reads."""
    _workspace_or_404(store, workspace_id)
    return {"tools": [hosted_tool(tool) for tool in _tool_listing(store, workspace_id)["tools"]]}


@workspace_routes.post("/{workspace_id}/hosted/step")
async def workspace_step_hosted(workspace_id: str, request: StepRequest, store: StoreDep) -> dict[str, Any]:
    """`/step` in the hosted product's shape (`{"observation": {"text", "is_error"}}`), which SimLab verifiers
    read when they query a server after the run (`run_artifacts.server_url(...) + "/step"`)."""
    answer = await store.astep(_workspace_or_404(store, workspace_id), request)
    is_error = bool(answer.get("is_error", False))
    return {"observation": {"text": answer.get("observation", ""), "is_error": is_error}, "is_error": is_error}


@workspace_routes.get("/{workspace_id}/snapshot")
async def workspace_snapshot(workspace_id: str, store: StoreDep, text: TextQuery = True) -> StateResponse:
    # No lock: a snapshot must answer even while an NPC reply is pending (the engine snapshots right after
    # a timeout), and an awaiting call changes the state only after its last await (see `acall`).
    return StateResponse(store.snapshot(_workspace_or_404(store, workspace_id), text=text))


#: The routes every rollout calls, in the order a rollout calls them: (method, path after `/workspaces`).
_HOT_WORKSPACE_PATH = re.compile(r"/workspaces(?:/([^/]+)(/step|/snapshot|/tools)?)?")
_SNAPSHOT_QUERIES = {b"": True, b"text=true": True, b"text=false": False}


class ToolServerApp:
    """ASGI app of one built-in server: the FastAPI app, with the routes every rollout calls (create, step,
    snapshot and delete a workspace, and list its tools) answered without going through it.

    FastAPI declares every route, and answers all of them whenever the shortcut steps aside: a body that is not
    JSON, not `application/json` or does not validate (its 422 explains every error), an unusual query, any
    other path or method. The shortcut calls the same functions as the routes, so the answers are the same;
    FastAPI's routing, dependency solving, validation and middleware were three fifths of a tool call's CPU in
    the tool host, which every rollout pays eight times.
    """

    def __init__(self, server: BuiltinToolServer, max_workspaces: int = DEFAULT_MAX_WORKSPACES) -> None:
        self.store = WorkspaceStore(server=server, max_workspaces=max_workspaces)
        self.api = FastAPI(title=f"{server.name} tool server", version="0.1.0")
        self.api.state.store = self.store
        self.api.include_router(default_routes)
        self.api.include_router(workspace_routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            unanswered = await self._shortcut(scope, receive, send)
            if unanswered is None:
                return
            receive = unanswered
        await self.api(scope, receive, send)

    async def _shortcut(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """Answer a hot route and return None, or return the `receive` FastAPI should read the request from."""
        path: str = scope["path"]
        root_path: str = scope.get("root_path", "")
        if root_path and path.startswith(root_path):  # mounted (see HostApp): the route is what follows
            path = path[len(root_path) :]
        hot = _HOT_WORKSPACE_PATH.fullmatch(path)
        method: str = scope["method"]
        if hot is None:
            return receive
        workspace_id, action = hot.groups()
        try:
            if workspace_id is None and method == "POST":
                body = await _read_body(receive)
                if body is None:
                    return receive
                created = _json_body(scope, body, CreateWorkspaceRequest) if body else None
                if created is False:
                    return replay_body(body, receive)
                await _send_json(send, 201, await _created(self.store, created))
            elif action == "/step" and method == "POST":
                body = await _read_body(receive)
                step = None if body is None else _json_body(scope, body, StepRequest)
                if not isinstance(step, StepRequest):
                    return receive if body is None else replay_body(body, receive)
                await _send_json(send, 200, await self.store.astep(_workspace_or_404(self.store, workspace_id), step))
            elif action == "/snapshot" and method == "GET":
                text = _SNAPSHOT_QUERIES.get(scope.get("query_string", b""))
                if text is None:
                    return receive
                workspace = _workspace_or_404(self.store, workspace_id)
                await _send_json(send, 200, self.store.snapshot(workspace, text=text))
            elif action == "/tools" and method == "GET" and workspace_id is not None:
                # Listed once per task and rollout's workspace (a run of distinct tasks lists on every rollout).
                _workspace_or_404(self.store, workspace_id)
                await _send_json(send, 200, _tool_listing(self.store, workspace_id))
            elif action is None and workspace_id is not None and method == "DELETE":
                await _send_json(send, 200, await _deleted(self.store, workspace_id))
            else:
                return receive
        except HTTPException as exc:  # as FastAPI's own handler answers it
            await _send_json(send, exc.status_code, {"detail": exc.detail})
        return None


Model = TypeVar("Model", bound=BaseModel)


def _json_body(scope: Scope, body: bytes, model: type[Model]) -> Model | Literal[False]:
    """`body` as `model`, or False: anything but a JSON object that validates is left to FastAPI to explain."""
    content_type = next((v for k, v in scope["headers"] if k == b"content-type"), b"")
    if content_type.partition(b";")[0].strip().lower() != b"application/json":
        return False
    try:
        # Python-mode validation of the parsed JSON, as FastAPI validates a body (strict JSON mode differs).
        return model.model_validate(pydantic_core.from_json(body))
    except ValueError:  # pydantic's ValidationError is one
        return False


async def _read_body(receive: Receive) -> bytes | None:
    """The request's body, or None when the client went away first (FastAPI then answers as it would)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send_json(send: Send, status: int, content: Any) -> None:
    body = pydantic_core.to_json(content)
    headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def create_app(server: BuiltinToolServer, max_workspaces: int = DEFAULT_MAX_WORKSPACES) -> BodyLimit:
    """An ASGI app serving one built-in server. Root `/step` and `/snapshot` use the `default` workspace. A request
    body over `MAX_TOOL_SERVER_REQUEST_BYTES` is refused (413) before anything reads it."""
    return BodyLimit(ToolServerApp(server, max_workspaces=max_workspaces), MAX_TOOL_SERVER_REQUEST_BYTES)
