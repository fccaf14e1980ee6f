"""Our built-in tool servers served over MCP, driven by the official SDK client over streamable HTTP and stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import mcp_types
import pytest
from mcp import Client, StdioServerParameters
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from eval_pipelines.schemas.tools import STATE_DIFF_MARKER
from eval_pipelines.toolservers.email import EmailServer
from eval_pipelines.toolservers.mcp_bridge import STATE_DIFF_META_KEY, McpToolServerBridge

SEND = {"to": "dana@example.com", "subject": "Hi", "body": "Hello Dana"}
SEED = {
    "account": "agent@example.com",
    "emails": [
        {
            "id": "e-001",
            "from": "marcus.lee@example.com",
            "to": ["agent@example.com"],
            "subject": "Invoice INV-2291 needs approval",
            "body": "Please confirm the March order.",
            "timestamp": "2025-03-10T08:42:00Z",
        }
    ],
}
BRIDGE_MODULE = "eval_pipelines.toolservers.mcp_bridge"


def _text(result: mcp_types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, mcp_types.TextContent))


def _serve_bridge(serve: Callable[[Any], Any], seed: list[Any] | None = None) -> tuple[McpToolServerBridge, str]:
    bridge = McpToolServerBridge(EmailServer(), seed or [])
    return bridge, serve(bridge.http_app()).url


async def _assert_email_tools(client: Client) -> None:
    listing = await client.list_tools()
    expected = {tool.name: tool for tool in EmailServer().tools()}
    assert {tool.name for tool in listing.tools} == set(expected)
    for tool in listing.tools:
        assert tool.input_schema == expected[tool.name].parameters
        assert tool.description == expected[tool.name].description
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (not expected[tool.name].mutates_state)


# "legacy" is the pre-2026 initialize handshake that mcp 1.x clients (Inspect AI among them) speak.
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_over_streamable_http(serve: Callable[[Any], Any], mode: str) -> None:
    bridge, url = _serve_bridge(serve)
    async with Client(f"{url}/mcp", mode=mode, read_timeout_seconds=10) as client:
        assert (client.protocol_version in MODERN_PROTOCOL_VERSIONS) is (mode == "auto")
        await _assert_email_tools(client)

        sent = await client.call_tool("send_email", SEND)
        assert not sent.is_error
        text = _text(sent)
        observation, _, summary = text.partition(f"\n\n{STATE_DIFF_MARKER}\n")
        assert "Email sent to dana@example.com" in observation and summary == "+1 email(s) added"
        diff = (sent.meta or {})[STATE_DIFF_META_KEY]
        assert diff["tool_name"] == "send_email" and diff["summary"] == "+1 email(s) added"

        missing = await client.call_tool("send_email", {"to": "dana@example.com", "subject": "Hi"})
        assert missing.is_error and _text(missing) == "Invalid parameters for send_email: 'body' is a required property"
        mistyped = await client.call_tool("search_emails", {"query": 5})
        assert mistyped.is_error and "parameter 'query'" in _text(mistyped)
        unknown = await client.call_tool("teleport", {})
        assert unknown.is_error and "Unknown tool 'teleport'" in _text(unknown)
        assert STATE_DIFF_MARKER not in _text(missing) + _text(unknown)

    # Failed calls left nothing behind: exactly the one sent email is in the workspace.
    emails = bridge.snapshot()["state"]["emails"]
    assert [e["subject"] for e in emails.values()] == ["Hi"]


async def test_http_bridge_health_snapshot_and_isolation(serve: Callable[[Any], Any]) -> None:
    _, first = _serve_bridge(serve)
    _, second = _serve_bridge(serve, seed=[SEED])
    async with Client(f"{first}/mcp", read_timeout_seconds=10) as client:
        assert not (await client.call_tool("send_email", SEND)).is_error
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.get(f"{first}/health")).json() == {"status": "healthy"}
        first_state = (await http.get(f"{first}/snapshot")).json()
        second_state = (await http.get(f"{second}/snapshot")).json()
    # One workspace per MCP server instance: the send on the first never reaches the second.
    assert list(first_state["state"]["emails"]) == ["sent-0001"]
    assert list(second_state["state"]["emails"]) == ["e-001"]
    assert "Invoice INV-2291" in second_state["text"]


async def test_sdk_client_over_stdio(tmp_path: Path) -> None:
    seed_file = tmp_path / "mailbox.json"
    seed_file.write_text(json.dumps(SEED), encoding="utf-8")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", BRIDGE_MODULE, "--server", "email", "--seed", str(seed_file)]
    )
    async with Client(params, read_timeout_seconds=15) as client:
        await _assert_email_tools(client)
        seeded = await client.call_tool("get_email", {"email_id": "e-001"})
        assert not seeded.is_error and "Invoice INV-2291 needs approval" in _text(seeded)
        reply = await client.call_tool("reply_to_email", {"email_id": "e-001", "body": "Confirmed."})
        assert not reply.is_error and f"{STATE_DIFF_MARKER}\n+1 email(s) added" in _text(reply)
        missing = await client.call_tool("get_email", {"email_id": "e-404"})
        assert missing.is_error and "e-404" in _text(missing)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"emails": "not a list"}', "invalid seed for 'email': seed file 0: emails: expected a list"),
        ("{not json", "seed file 0 ("),
    ],
    ids=["invalid-seed", "invalid-json"],
)
def test_stdio_entry_point_rejects_a_bad_seed(tmp_path: Path, content: str, message: str) -> None:
    seed_file = tmp_path / "bad.json"
    seed_file.write_text(content, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", BRIDGE_MODULE, "--server", "email", "--seed", str(seed_file)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert message in done.stderr
