"""Finished workspaces are deleted together: `POST /workspaces/batch-delete` on a built-in server, and
`ToolServerAdmin.delete_workspaces`, which groups URLs by server, splits long lists, and falls back to one
DELETE per workspace (remembered) for a server without the route."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from fastapi import FastAPI, Request, Response

from eval_pipelines.schemas.limits import MAX_WORKSPACES_PER_BATCH_DELETE
from eval_pipelines.toolservers import EmailServer, ToolServerAdmin, WorkspaceError, create_app
from eval_pipelines.toolservers import admin as admin_module
from eval_pipelines.toolservers.app import ToolServerApp


def _counting(app: Any, counts: Counter[str]) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            counts[f"{scope['method']} {scope['path']}"] += 1
        await app(scope, receive, send)

    return wrapped


def _plain_server(deleted: list[str]) -> FastAPI:
    """A tool server with workspaces but no batch route (a server following the protocol's minimum)."""
    app = FastAPI()

    @app.delete("/workspaces/{workspace_id}")
    async def delete(workspace_id: str) -> dict[str, Any]:
        deleted.append(workspace_id)
        return {"workspace_id": workspace_id, "deleted": True}

    @app.post("/workspaces/{anything}")
    async def other(anything: str, request: Request) -> Response:
        return Response(status_code=405)

    return app


async def test_a_builtin_server_deletes_a_batch_in_one_request(serve: Any) -> None:
    counts: Counter[str] = Counter()
    app = create_app(EmailServer())
    server = serve(_counting(app, counts))
    admin = ToolServerAdmin()
    try:
        urls = [await admin.create_workspace(server.url, []) for _ in range(5)]
        await admin.delete_workspaces(urls)
        # Deleting them again names only missing ones: no error, nothing else touched.
        await admin.delete_workspaces(urls[:2])
    finally:
        await admin.aclose()
    assert workspaces_of(app) == {}
    assert counts["POST /workspaces/batch-delete"] == 2
    assert not any(key.startswith("DELETE") for key in counts)


async def test_long_lists_are_split(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_module, "MAX_WORKSPACES_PER_BATCH_DELETE", 2)
    counts: Counter[str] = Counter()
    app = create_app(EmailServer())
    server = serve(_counting(app, counts))
    admin = ToolServerAdmin()
    try:
        urls = [await admin.create_workspace(server.url, []) for _ in range(5)]
        await admin.delete_workspaces(urls)
    finally:
        await admin.aclose()
    assert counts["POST /workspaces/batch-delete"] == 3
    assert workspaces_of(app) == {}


async def test_the_route_refuses_more_than_its_limit(serve: Any) -> None:
    import httpx

    server = serve(create_app(EmailServer()))
    async with httpx.AsyncClient() as http:
        ids = [f"w{i}" for i in range(MAX_WORKSPACES_PER_BATCH_DELETE + 1)]
        response = await http.post(f"{server.url}/workspaces/batch-delete", json={"workspace_ids": ids})
        assert response.status_code == 422
        assert "detail" in response.json()
        answer = await http.post(f"{server.url}/workspaces/batch-delete", json={"workspace_ids": ["nope"]})
        assert answer.json() == {"deleted": [], "missing": ["nope"]}


async def test_a_server_without_the_route_gets_one_delete_each_and_is_remembered(serve: Any) -> None:
    deleted: list[str] = []
    counts: Counter[str] = Counter()
    plain = serve(_counting(_plain_server(deleted), counts))
    builtin_app = create_app(EmailServer())
    builtin = serve(builtin_app)
    admin = ToolServerAdmin()
    try:
        ours = [await admin.create_workspace(builtin.url, []) for _ in range(2)]
        theirs = [f"{plain.url}/workspaces/a", f"{plain.url}/workspaces/b"]
        await admin.delete_workspaces([theirs[0], ours[0], theirs[1], ours[1]])
        await admin.delete_workspaces([f"{plain.url}/workspaces/c"])
    finally:
        await admin.aclose()
    assert deleted == ["a", "b", "c"]
    assert counts["POST /workspaces/batch-delete"] == 1  # asked once, then remembered
    assert workspaces_of(builtin_app) == {}


async def test_a_failing_server_is_reported_after_the_others_are_done(serve: Any) -> None:
    app = create_app(EmailServer())
    builtin = serve(app)
    broken = FastAPI()

    @broken.post("/workspaces/batch-delete")
    async def fail() -> Response:
        return Response(status_code=500, content=b'{"detail": "disk full"}', media_type="application/json")

    failing = serve(broken)
    admin = ToolServerAdmin()
    try:
        ours = await admin.create_workspace(builtin.url, [])
        with pytest.raises(WorkspaceError, match="disk full"):
            await admin.delete_workspaces([f"{failing.url}/workspaces/x", ours])
    finally:
        await admin.aclose()
    assert workspaces_of(app) == {}


def workspaces_of(app: Any) -> dict[str, Any]:
    """The workspaces a built-in server's app (`create_app`) holds now."""
    server_app = app.app
    assert isinstance(server_app, ToolServerApp)
    return server_app.store.workspaces
