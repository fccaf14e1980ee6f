"""ToolServerHost (one port, servers mounted by name) and the ToolServerAdmin provisioning client."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from eval_pipelines.lib.serving import free_port
from eval_pipelines.toolservers import BUILTIN_SERVERS, EmailServer, ToolServerAdmin, ToolServerHost, WorkspaceError

from ._helpers import SEED


@pytest.fixture(scope="module")
def host() -> Iterator[ToolServerHost]:
    with ToolServerHost(["email"]) as running:
        yield running


def test_registry_and_host_configuration() -> None:
    assert BUILTIN_SERVERS["email"] is EmailServer
    assert all(name == server.name for name, server in BUILTIN_SERVERS.items())
    with pytest.raises(ValueError, match="unknown built-in tool server"):
        ToolServerHost(["email", "fax"])
    idle = ToolServerHost()
    with pytest.raises(RuntimeError, match="not started"):
        idle.base_url("email")


def test_host_mounts_each_server_under_its_name(host: ToolServerHost) -> None:
    base = host.base_url("email")
    assert base == f"{host.url}/email"
    with pytest.raises(KeyError):
        host.base_url("calendar")
    with httpx.Client() as http:
        assert http.get(f"{host.url}/health").json() == {"status": "healthy", "servers": ["email"]}
        tools = http.get(f"{base}/tools").json()["tools"]
        assert "send_email" in {t["name"] for t in tools}
        created = http.post(f"{base}/workspaces", json={"workspace_id": "mounted", "seed": [SEED]})
        assert created.status_code == 201
        step = http.post(
            f"{base}/workspaces/mounted/step",
            json={"action": {"tool_name": "get_email", "parameters": {"email_id": "e-001"}}},
        )
        assert "Quarterly invoice" in step.json()["observation"]


async def test_admin_happy_path(host: ToolServerHost) -> None:
    base = host.base_url("email")
    async with ToolServerAdmin(timeout_seconds=5) as admin:
        url = await admin.create_workspace(base, [SEED], workspace_id="admin-1")
        assert url == f"{base}/workspaces/admin-1"
        generated = await admin.create_workspace(base + "/", [])
        await admin.seed(generated, [SEED])
        assert set((await admin.snapshot(generated))["emails"]) == {"e-001", "e-002", "e-003"}
        with pytest.raises(WorkspaceError) as bad_seed:
            await admin.seed(generated, [{"emails": "none"}])
        assert bad_seed.value.status_code == 400 and "emails" in str(bad_seed.value)
        assert generated.startswith(f"{base}/workspaces/") and len(generated.rsplit("/", 1)[1]) == 32
        initial = await admin.snapshot(url)
        assert set(initial["emails"]) == {"e-001", "e-002", "e-003"}
        async with httpx.AsyncClient() as http:
            body = {"action": {"tool_name": "delete_email", "parameters": {"email_id": "e-001"}}}
            assert (await http.post(f"{url}/step", json=body)).json()["state_diff"]["summary"] == "~1 email(s) changed"
        final = await admin.snapshot(url)
        assert final["emails"]["e-001"]["folder"] == "trash"
        await admin.delete_workspace(url)
        await admin.delete_workspace(generated)
        with pytest.raises(WorkspaceError) as missing:
            await admin.snapshot(url)
        assert missing.value.status_code == 404
        assert "HTTP 404" in str(missing.value) and "workspace 'admin-1' not found" in str(missing.value)
        assert base in str(missing.value)


async def test_admin_errors_name_server_and_status(host: ToolServerHost) -> None:
    base = host.base_url("email")
    async with httpx.AsyncClient() as shared:
        admin = ToolServerAdmin(client=shared, timeout_seconds=5)
        await admin.create_workspace(base, [], workspace_id="admin-dup")
        with pytest.raises(WorkspaceError) as duplicate:
            await admin.create_workspace(base, [], workspace_id="admin-dup")
        assert duplicate.value.status_code == 409 and "already exists" in str(duplicate.value)
        with pytest.raises(WorkspaceError) as bad_seed:
            await admin.create_workspace(base, [{"mails": []}])
        assert bad_seed.value.status_code == 400 and "unknown key" in str(bad_seed.value)
        with pytest.raises(WorkspaceError, match="HTTP 404"):
            await admin.delete_workspace(f"{base}/workspaces/never-created")
        await admin.aclose()  # a shared client belongs to the caller and stays open
        assert not shared.is_closed


async def test_admin_on_a_dead_server() -> None:
    dead = f"http://127.0.0.1:{free_port()}/email"
    async with ToolServerAdmin(timeout_seconds=2) as admin:
        with pytest.raises(WorkspaceError) as error:
            await admin.create_workspace(dead, [])
    assert error.value.status_code is None
    assert dead in str(error.value) and "create workspace failed" in str(error.value)
