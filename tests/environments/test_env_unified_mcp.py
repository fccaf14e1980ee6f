"""UnifiedEnvironment over HTTP tool servers and MCP servers together, on real transports.

The MCP side is a tiny server built with the SDK's MCPServer, reached over streamable HTTP and as a stdio
child process; the HTTP side is the built-in email server on the shared `tool_host`.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS

from eval_pipelines.environments.base import ToolServerUnavailable
from eval_pipelines.environments.mcp import McpServerSpec
from eval_pipelines.environments.unified import UnifiedEnvironment
from eval_pipelines.schemas.tools import STATE_DIFF_MARKER, Transport
from eval_pipelines.toolservers.email import EmailServer
from eval_pipelines.toolservers.mcp_bridge import create_mcp_http_app
from tests.environments.conftest import TINY_SERVER_SCRIPT, tiny_stdio_spec

SEND = {"to": "dana@example.com", "subject": "Hi", "body": "Hello Dana"}
LISTING_KEYS = {"tool_server", "transport", "name", "description", "parameters"}


@pytest.mark.parametrize("tiny_spec", ["http", "stdio"], indirect=True)
async def test_lists_and_calls_tools_of_both_transports(tiny_spec: McpServerSpec, email_workspace: str) -> None:
    async with UnifiedEnvironment({"email": email_workspace}, timeout_seconds=15, mcp_servers=[tiny_spec]) as env:
        namespaces = {ns.name: ns for ns in env.list_tool_namespaces()}
        assert namespaces["email"].transport == Transport.HTTP and namespaces["email"].url == email_workspace
        assert namespaces["tiny"].transport == Transport.MCP
        if tiny_spec.is_stdio:
            assert namespaces["tiny"].command == [sys.executable, *tiny_spec.args]
        else:
            assert namespaces["tiny"].url == tiny_spec.url

        listing = await env.alist_tools()
        assert all(set(item) == LISTING_KEYS for item in listing)
        by_key = {(t["tool_server"], t["name"]): t for t in listing}
        assert by_key[("email", "send_email")]["transport"] == "http"
        add = by_key[("tiny", "add")]
        assert add["transport"] == "mcp" and add["description"] == "Add two integers."
        # The schema is the server's inputSchema, unchanged.
        assert add["parameters"]["required"] == ["a", "b"]
        assert add["parameters"]["properties"]["a"]["type"] == "integer"
        assert {t["tool_server"] for t in await env.alist_tools("tiny")} == {"tiny"}

        sent = await env.acall_tool("email", "send_email", SEND)
        assert not sent.is_error and STATE_DIFF_MARKER in sent.observation

        added = await env.acall_tool("tiny", "add", {"a": 2, "b": 3})
        assert added.observation == "5" and not added.is_error
        refused = await env.acall_tool("tiny", "fail", {"reason": "no access"})
        assert refused.is_error and "refused: no access" in refused.observation
        mistyped = await env.acall_tool("tiny", "add", {"a": "two"})
        assert mistyped.is_error and "add" in mistyped.observation
        unknown = await env.acall_tool("tiny", "teleport", {})
        assert unknown.is_error and "teleport" in unknown.observation

        # One session for the environment's lifetime, shared by concurrent calls from several tasks.
        counts = await asyncio.gather(*(env.acall_tool("tiny", "counter", {}) for _ in range(4)))
        assert sorted(int(c.observation) for c in counts) == [1, 2, 3, 4]


async def test_stdio_session_keeps_one_child_and_stops_it_on_aclose() -> None:
    env = UnifiedEnvironment(mcp_servers=[tiny_stdio_spec()], timeout_seconds=15)
    first = await env.acall_tool("tiny", "pid", {})
    second = await env.acall_tool("tiny", "pid", {})
    child = int(first.observation)
    assert child == int(second.observation) and child != os.getpid()
    os.kill(child, 0)  # alive while the environment is open
    await env.aclose()
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


async def test_mcp_served_email_reports_its_state_diff_once(serve: Callable[[Any], Any]) -> None:
    url = f"{serve(create_mcp_http_app(EmailServer())).url}/mcp"
    async with UnifiedEnvironment(mcp_servers=[McpServerSpec(name="mail-mcp", url=url)]) as env:
        sent = await env.acall_tool("mail-mcp", "send_email", SEND)
        failed = await env.acall_tool("mail-mcp", "send_email", {"to": "dana@example.com"})
    assert sent.observation.count(STATE_DIFF_MARKER) == 1 and "+1 email(s) added" in sent.observation
    assert failed.is_error and "Invalid parameters for send_email" in failed.observation
    [diff] = env.state_diffs
    assert diff.tool_server == "mail-mcp" and diff.tool_name == "send_email" and "emails" in diff.after


async def test_tool_name_served_over_both_transports_is_a_value_error(
    serve: Callable[[Any], Any], email_workspace: str
) -> None:
    url = f"{serve(create_mcp_http_app(EmailServer())).url}/mcp"
    env = UnifiedEnvironment({"email": email_workspace}, mcp_servers=[McpServerSpec(name="mail-mcp", url=url)])
    try:
        with pytest.raises(ValueError, match="served both by HTTP tool server 'email' and by MCP server 'mail-mcp'"):
            await env.alist_tools()
        with pytest.raises(ValueError, match="'send_email'"):
            await env.alist_tools("email")
    finally:
        await env.aclose()


@pytest.mark.parametrize(
    ("tool_servers", "names", "message"),
    [
        ({}, ["email"], "'email' collides with a built-in tool server name"),
        ({"crm": "http://127.0.0.1:9/crm"}, ["crm"], "'crm' collides with another tool server of this environment"),
        ({}, ["git-hub", "GIT_HUB"], "same after normalisation"),
    ],
)
def test_server_names_are_checked_at_construction(tool_servers: dict[str, str], names: list[str], message: str) -> None:
    specs = [McpServerSpec(name=name, url="http://127.0.0.1:9/mcp") for name in names]
    with pytest.raises(ValueError, match=message):
        UnifiedEnvironment(tool_servers, mcp_servers=specs)


async def test_stdio_child_gets_resolved_secrets_and_no_other_parent_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_TEST_CANARY", "must-not-leak")
    monkeypatch.setenv("TINY_RAW", "raw-value")
    monkeypatch.setenv("EVAL_MCP_TINY__TINY_SCOPED", "scoped-value")
    monkeypatch.setenv("TINY_SCOPED", "raw-loses")
    monkeypatch.setenv("TINY_SHARED", "shared-raw")
    monkeypatch.delenv("TINY_MISSING", raising=False)
    secrets: dict[str, str | None] = {
        "TINY_RAW": None,
        "TINY_SCOPED": None,
        "TINY_DEFAULTED": "from-default",
        "TINY_MISSING": None,
        "TINY_SHARED": None,
    }
    tiny = tiny_stdio_spec(env={"TINY_EXPLICIT": "explicit"}, secrets=secrets)
    # Declares TINY_SHARED too, so the raw variable may not go to either server. Never started.
    other = McpServerSpec(name="other", command="never-started", secrets={"TINY_SHARED": None})
    env = UnifiedEnvironment(mcp_servers=[tiny, other], timeout_seconds=15)
    try:
        names = set((await env.acall_tool("tiny", "env_names", {})).observation.splitlines())
        values = {
            name: (await env.acall_tool("tiny", "read_env", {"name": name})).observation
            for name in ["TINY_RAW", "TINY_SCOPED", "TINY_DEFAULTED", "TINY_EXPLICIT"]
        }
    finally:
        await env.aclose()
    assert values == {
        "TINY_RAW": "raw-value",
        "TINY_SCOPED": "scoped-value",
        "TINY_DEFAULTED": "from-default",
        "TINY_EXPLICIT": "explicit",
    }
    assert "EVAL_TEST_CANARY" not in names and "EVAL_MCP_TINY__TINY_SCOPED" not in names
    assert "TINY_SHARED" not in names and "TINY_MISSING" not in names
    # Beyond our variables: only the SDK's inherited set, and LC_CTYPE that Python sets itself on a C locale.
    assert names - {*values} <= {*DEFAULT_INHERITED_ENV_VARS, "LC_CTYPE"}


async def test_call_past_the_timeout_is_an_unavailable_server(tiny_http_url: str) -> None:
    async with UnifiedEnvironment(
        mcp_servers=[McpServerSpec(name="tiny", url=tiny_http_url)], timeout_seconds=0.5
    ) as env:
        with pytest.raises(ToolServerUnavailable, match=r"'tiny' timed out after 0\.5s on tools/call 'nap'"):
            await env.acall_tool("tiny", "nap", {"seconds": 5})


async def test_unreachable_and_unstartable_servers_are_unavailable() -> None:
    unreachable = McpServerSpec(name="gone", url="http://127.0.0.1:9/mcp")
    unstartable = McpServerSpec(name="broken", command="/nonexistent/mcp-server-binary")
    env = UnifiedEnvironment(mcp_servers=[unreachable, unstartable], timeout_seconds=5)
    try:
        with pytest.raises(ToolServerUnavailable, match="'gone' could not be started or reached"):
            await env.acall_tool("gone", "anything", {})
        with pytest.raises(ToolServerUnavailable, match="'broken' could not be started or reached: FileNotFoundError"):
            await env.alist_tools("broken")
    finally:
        await env.aclose()


def _live_children_running(script: str) -> list[int]:
    """Our child processes (not zombies) whose command line mentions `script` (Linux /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        state, parent = fields[0], int(fields[1])
        if parent == os.getpid() and state != "Z" and script in cmdline:
            pids.append(int(stat.parent.name))
    return pids


async def test_failed_aconnect_closes_the_sessions_that_did_open() -> None:
    good = tiny_stdio_spec()
    broken = McpServerSpec(name="broken", command="/nonexistent/mcp-server-binary")
    with pytest.raises(ToolServerUnavailable, match="'broken'"):
        async with UnifiedEnvironment(mcp_servers=[good, broken], timeout_seconds=15):
            pytest.fail("the environment must not open with a broken server")
    assert _live_children_running(str(TINY_SERVER_SCRIPT)) == []


def test_secret_prefix_is_checked_at_construction() -> None:
    with pytest.raises(ValueError, match="secret prefix 'my co'"):
        UnifiedEnvironment(mcp_servers=[tiny_stdio_spec()], secret_prefix="my co")


def test_deprecated_sync_wrappers_drive_mcp(tiny_http_url: str) -> None:
    env = UnifiedEnvironment(mcp_servers=[McpServerSpec(name="tiny", url=tiny_http_url)], timeout_seconds=10)
    with pytest.deprecated_call():
        names = {t["name"] for t in env.list_tools()}
    with pytest.deprecated_call():
        result = env.call_tool("tiny", "add", {"a": 1, "b": 1})
    assert "add" in names and result.observation == "2"
