"""The HTTP face of a built-in tool server: spec 001 `/tools` and `/step`, plus workspaces and snapshots.

Every route is `async def` and does its work synchronously, so all state mutations run on the event-loop
thread one at a time: no locks, and a step can never observe another step half-done.
"""

from __future__ import annotations

import copy
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import Field

from eval_pipelines.schemas._base import StrictModel
from eval_pipelines.schemas.tools import DiffScope, StepRequest
from eval_pipelines.toolservers.base import BuiltinToolServer, SeedError, State, ToolContext, ToolError
from eval_pipelines.toolservers.diff import diff_states

WORKSPACE_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"
DEFAULT_WORKSPACE = "default"
DEFAULT_MAX_WORKSPACES = 10_000

_WORKSPACE_ID_RE = re.compile(WORKSPACE_ID_PATTERN)


class CreateWorkspaceRequest(StrictModel):
    workspace_id: str | None = Field(default=None, pattern=WORKSPACE_ID_PATTERN)
    seed: list[Any] = Field(default_factory=list)


class SeedRequest(StrictModel):
    seed: list[Any] = Field(default_factory=list)


@dataclass
class Workspace:
    workspace_id: str
    state: State
    step_count: int = 0


@dataclass
class WorkspaceStore:
    """In-memory workspaces of one server. Only ever touched from the event-loop thread."""

    server: BuiltinToolServer
    max_workspaces: int = DEFAULT_MAX_WORKSPACES
    workspaces: dict[str, Workspace] = field(default_factory=dict)

    def _ensure_capacity(self) -> None:
        if len(self.workspaces) >= self.max_workspaces:
            raise HTTPException(
                status_code=503,
                detail=f"tool server '{self.server.name}' is full ({self.max_workspaces} workspaces); "
                "delete finished workspaces and retry",
            )

    def create(self, workspace_id: str | None, seed: list[Any]) -> Workspace:
        workspace_id = workspace_id or uuid.uuid4().hex
        if workspace_id in self.workspaces:
            raise HTTPException(status_code=409, detail=f"workspace '{workspace_id}' already exists")
        self._ensure_capacity()
        workspace = Workspace(workspace_id=workspace_id, state=self._seeded(self.server.new_state(), seed))
        self.workspaces[workspace_id] = workspace
        return workspace

    def _seeded(self, state: State, seed: list[Any]) -> State:
        """`state` plus `seed`, or 400. The caller's state is never touched, so a bad seed leaves nothing
        half-loaded behind."""
        candidate = copy.deepcopy(state)
        try:
            self.server.seed(candidate, seed)
        except (SeedError, ValueError, TypeError, KeyError) as exc:
            raise HTTPException(status_code=400, detail=f"invalid seed for '{self.server.name}': {exc}") from exc
        return candidate

    def seed(self, workspace: Workspace, seed: list[Any]) -> None:
        workspace.state = self._seeded(workspace.state, seed)

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

    def step(self, workspace: Workspace, request: StepRequest) -> dict[str, Any]:
        server = self.server
        tool_name = request.action.tool_name
        step_index = workspace.step_count
        workspace.step_count += 1
        mutating = server.mutates(tool_name)
        # Reads skip the snapshot entirely; mutating calls keep one both to diff and to roll back a call
        # that fails half-way, so a failed call never leaves partial changes behind.
        before = copy.deepcopy(workspace.state) if mutating else None
        ctx = ToolContext(workspace_id=workspace.workspace_id, state=workspace.state, step_index=step_index)
        try:
            observation = server.execute(ctx, tool_name, request.action.parameters)
        except ToolError as exc:
            self._rollback(workspace, before)
            return {"observation": exc.message, "is_error": True}
        except Exception as exc:
            self._rollback(workspace, before)
            return {"observation": f"Tool {tool_name} failed: {exc}", "is_error": True}
        body: dict[str, Any] = {"observation": observation}
        if before is not None:
            diff = diff_states(
                server, before, workspace.state, DiffScope.TOOL_CALL, step_index=step_index, tool_name=tool_name
            )
            if not diff.is_empty:
                body["state_diff"] = diff.model_dump(mode="json")
        return body

    @staticmethod
    def _rollback(workspace: Workspace, before: State | None) -> None:
        if before is not None:
            workspace.state = before

    def snapshot(self, workspace: Workspace) -> dict[str, Any]:
        return {
            "tool_server": self.server.name,
            "workspace_id": workspace.workspace_id,
            "state": workspace.state,
            "text": self.server.render_text(workspace.state),
        }


def create_app(server: BuiltinToolServer, max_workspaces: int = DEFAULT_MAX_WORKSPACES) -> FastAPI:
    """An ASGI app serving one built-in server. Root `/step` and `/snapshot` use the `default` workspace."""
    store = WorkspaceStore(server=server, max_workspaces=max_workspaces)
    app = FastAPI(title=f"{server.name} tool server", version="0.1.0")
    app.state.store = store

    def tool_listing() -> dict[str, Any]:
        return {"tools": [tool.model_dump(by_alias=False) for tool in server.tools()]}

    def workspace_or_404(workspace_id: str) -> Workspace:
        if not _WORKSPACE_ID_RE.match(workspace_id):
            raise HTTPException(status_code=404, detail=f"workspace '{workspace_id}' not found")
        return store.get(workspace_id)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.get("/tools")
    async def list_tools() -> dict[str, Any]:
        return tool_listing()

    @app.post("/step")
    async def step_default(request: StepRequest) -> dict[str, Any]:
        return store.step(store.get_or_create_default(), request)

    @app.get("/snapshot")
    async def snapshot_default() -> dict[str, Any]:
        return store.snapshot(store.get_or_create_default())

    @app.post("/workspaces", status_code=201)
    async def create_workspace(request: CreateWorkspaceRequest | None = None) -> JSONResponse:
        body = request or CreateWorkspaceRequest()
        workspace = store.create(body.workspace_id, body.seed)
        return JSONResponse(
            status_code=201,
            content={"workspace_id": workspace.workspace_id, "path": f"/workspaces/{workspace.workspace_id}"},
        )

    @app.delete("/workspaces/{workspace_id}")
    async def delete_workspace(workspace_id: str) -> dict[str, Any]:
        workspace_or_404(workspace_id)
        store.delete(workspace_id)
        return {"workspace_id": workspace_id, "deleted": True}

    @app.post("/workspaces/{workspace_id}/seed")
    async def seed_workspace(workspace_id: str, request: SeedRequest) -> dict[str, Any]:
        # Seeding after creation lets the engine report building and seeding as separate rollout phases.
        store.seed(workspace_or_404(workspace_id), request.seed)
        return {"workspace_id": workspace_id, "seeded_files": len(request.seed)}

    @app.get("/workspaces/{workspace_id}/health")
    async def workspace_health(workspace_id: str) -> dict[str, str]:
        workspace_or_404(workspace_id)
        return {"status": "healthy"}

    @app.get("/workspaces/{workspace_id}/tools")
    async def workspace_tools(workspace_id: str) -> dict[str, Any]:
        workspace_or_404(workspace_id)
        return tool_listing()

    @app.post("/workspaces/{workspace_id}/step")
    async def workspace_step(workspace_id: str, request: StepRequest) -> dict[str, Any]:
        return store.step(workspace_or_404(workspace_id), request)

    @app.get("/workspaces/{workspace_id}/snapshot")
    async def workspace_snapshot(workspace_id: str) -> dict[str, Any]:
        return store.snapshot(workspace_or_404(workspace_id))

    return app
