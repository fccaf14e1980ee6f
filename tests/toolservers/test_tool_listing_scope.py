"""A `/tools` answer says whether its listing holds for every workspace of the server (`listing_scope`), through
the shortcut and the FastAPI route alike; a server whose tools depend on the workspace says `workspace`."""

from __future__ import annotations

import httpx
import pytest

from eval_pipelines.schemas.tools import ToolDefinition
from eval_pipelines.toolservers import EmailServer, create_app


class PerWorkspaceServer(EmailServer):
    def workspace_tools(self, workspace_id: str) -> list[ToolDefinition]:
        return [tool for tool in self.tools() if workspace_id.endswith("a") or tool.name != "send_email"]


async def _listing(server: EmailServer, path: str) -> dict:
    transport = httpx.ASGITransport(app=create_app(server))
    async with httpx.AsyncClient(transport=transport, base_url="http://tools") as client:
        for workspace_id in ("wa", "wb"):
            assert (await client.post("/workspaces", json={"workspace_id": workspace_id})).status_code == 201
        response = await client.get(path)
        assert response.status_code == 200
        return response.json()


@pytest.mark.parametrize("path", ["/workspaces/wa/tools", "/tools"])
async def test_a_server_with_the_same_tools_everywhere_says_server(path: str) -> None:
    listing = await _listing(EmailServer(), path)
    assert listing["listing_scope"] == "server"
    assert [tool["name"] for tool in listing["tools"]] == [tool.name for tool in EmailServer().tools()]


async def test_a_server_whose_tools_depend_on_the_workspace_says_workspace() -> None:
    server = PerWorkspaceServer()
    first = await _listing(server, "/workspaces/wa/tools")
    second = await _listing(PerWorkspaceServer(), "/workspaces/wb/tools")
    assert first["listing_scope"] == second["listing_scope"] == "workspace"
    assert "send_email" in [t["name"] for t in first["tools"]]
    assert "send_email" not in [t["name"] for t in second["tools"]]


async def test_the_kept_listing_is_not_changed_by_the_hosted_shape() -> None:
    server = EmailServer()
    transport = httpx.ASGITransport(app=create_app(server))
    async with httpx.AsyncClient(transport=transport, base_url="http://tools") as client:
        await client.post("/workspaces", json={"workspace_id": "w"})
        hosted = (await client.get("/workspaces/w/hosted/tools")).json()
        plain = (await client.get("/workspaces/w/tools")).json()
    assert all("input_schema" in tool for tool in hosted["tools"])
    assert all("input_schema" not in tool for tool in plain["tools"])
