"""Caller workspaces (`service/caller_workspaces.py`) against what an unauthenticated holder of a listing's URL may
send or provoke: the answer to a tool host that fails carries no credential of the tool server's URL, and one
listing's URLs cannot push out every other caller's workspaces."""

from __future__ import annotations

import socket

import httpx
import pytest

from eval_pipelines.runtime.local import shared_tool_host
from eval_pipelines.service.caller_workspaces import CallerWorkspaces, Provision, WorkspaceUnavailable
from eval_pipelines.toolservers import EmailServer


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_tool_host_failure_names_no_credential_of_the_tool_server_url() -> None:
    workspaces = CallerWorkspaces()
    token = workspaces.mint("email_ops:1.0.0")
    base = f"http://operator:hunter2-tool-host@127.0.0.1:{_closed_port()}/email?token=tok-secret-1"
    try:
        with pytest.raises(WorkspaceUnavailable) as failed:
            await workspaces.workspace_url((token, "email_ops_001", "email"), lambda _: Provision(base, []))
    finally:
        await workspaces.aclose()
    assert failed.value.status == 503 and "could not make the workspace" in failed.value.detail
    assert "hunter2-tool-host" not in failed.value.detail and "tok-secret-1" not in failed.value.detail
    assert len(workspaces) == 0


async def test_one_listing_past_its_bound_reclaims_its_own_workspaces_not_another_caller_s() -> None:
    workspaces = CallerWorkspaces(max_per_listing=2, max_workspaces=10)
    provision = Provision(shared_tool_host().base_url(EmailServer.name), [])
    other, greedy = workspaces.mint("s"), workspaces.mint("s")
    try:
        kept = await workspaces.workspace_url((other, "t0", "email"), lambda _: provision)
        greedy_urls = [
            await workspaces.workspace_url((greedy, f"t{n}", "email"), lambda _: provision) for n in range(4)
        ]
        assert len(workspaces) == 3  # the other caller's and the greedy listing's two most recent
        assert await workspaces.workspace_url((other, "t0", "email"), lambda _: provision) == kept
        for n in (0, 1):
            with pytest.raises(WorkspaceUnavailable) as gone:
                await workspaces.workspace_url((greedy, f"t{n}", "email"), lambda _: provision)
            assert gone.value.status == 410
        async with httpx.AsyncClient(timeout=30) as http:
            # deleted on the tool host, not only forgotten here
            assert [(await http.get(f"{url}/health")).status_code for url in greedy_urls] == [404, 404, 200, 200]
    finally:
        await workspaces.aclose()
