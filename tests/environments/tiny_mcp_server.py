"""A tiny third-party MCP server built with the SDK's MCPServer (FastMCP in mcp 1.x).

Imported by the tests to serve it over streamable HTTP, and run as a script for stdio (it imports only the
SDK, so it needs neither the project nor a PYTHONPATH in the child's minimal environment).
"""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build_server() -> MCPServer:
    # MCPServer configures the root logger, and the test process imports this module too: keep it quiet.
    server = MCPServer("tiny", log_level="WARNING")
    calls = {"count": 0}

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Count calls made on this server instance.")
    def counter() -> int:
        calls["count"] += 1
        return calls["count"]

    @server.tool(description="The process id of the server.")
    def pid() -> int:
        return os.getpid()

    @server.tool(description="Names of the server process's environment variables.")
    def env_names() -> list[str]:
        return sorted(os.environ)

    @server.tool(description="One environment variable of the server process.")
    def read_env(name: str) -> str:
        return os.environ.get(name, "<unset>")

    @server.tool(description="Always fails.")
    def fail(reason: str) -> str:
        raise ToolError(f"refused: {reason}")

    @server.tool(description="Sleep, then answer.")
    async def nap(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "awake"

    return server


if __name__ == "__main__":
    build_server().run("stdio")
