from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.environments.mcp import McpServerSpec
from eval_pipelines.toolservers.admin import ToolServerAdmin
from tests.environments.tiny_mcp_server import build_server

TINY_SERVER_SCRIPT = Path(__file__).with_name("tiny_mcp_server.py")


@pytest.fixture
def tiny_http_url(serve: Callable[[Any], Any]) -> str:
    """The tiny SDK-built MCP server over streamable HTTP (a fresh instance per test)."""
    return serve_tiny_http(serve)


def serve_tiny_http(serve: Callable[[Any], Any]) -> str:
    return f"{serve(build_server().streamable_http_app()).url}/mcp"


def tiny_stdio_spec(name: str = "tiny", **fields: Any) -> McpServerSpec:
    """The tiny server as a command server; it imports only the SDK, so the child's minimal env suffices."""
    return McpServerSpec(name=name, command=sys.executable, args=[str(TINY_SERVER_SCRIPT)], **fields)


@pytest.fixture
def tiny_spec(request: pytest.FixtureRequest, serve: Callable[[Any], Any]) -> McpServerSpec:
    """Parametrise with `indirect=True` and "http" or "stdio"."""
    if request.param == "http":
        return McpServerSpec(name="tiny", url=serve_tiny_http(serve))
    return tiny_stdio_spec()


@pytest.fixture
async def email_workspace(tool_host: Any) -> str:
    async with ToolServerAdmin() as admin:
        return await admin.create_workspace(tool_host.base_url("email"), seed=[])
