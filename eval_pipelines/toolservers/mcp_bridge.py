"""Serve a built-in tool server as an MCP server (official `mcp` SDK, low-level `Server` API).

Third-party MCP clients, including Inspect AI's MCP tools, can then drive our environments. One bridge holds
one workspace's state; calls go through the same `WorkspaceStore.step` as `POST /step` (schema validation,
rollback of a failed call, per-call diff), and a mutating call's diff summary follows a `[STATE DIFF]` marker
in the result text, as the HTTP path shows it. The machine-readable diff rides in the result's `_meta`.

    streamable HTTP:  BackgroundServer(create_mcp_http_app(EmailServer())).start()   -> <url>/mcp
    stdio:            python -m eval_pipelines.toolservers.mcp_bridge --server email [--seed file.json ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

try:
    import mcp_types
    from mcp.server import Server, ServerRequestContext
    from mcp.server.stdio import stdio_server
except ImportError as missing:  # the SDK is an extra of the package
    raise ModuleNotFoundError(
        f"the MCP bridge needs the MCP SDK ({missing.name} is missing): pip install 'eval_pipelines[mcp]'",
        name=missing.name,
    ) from missing
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from eval_pipelines.schemas.tools import STATE_DIFF_META_KEY, StepAction, StepRequest, observation_with_state_diff
from eval_pipelines.toolservers.app import Workspace, WorkspaceStore
from eval_pipelines.toolservers.base import BuiltinToolServer, SeedError
from eval_pipelines.toolservers.registry import BUILTIN_SERVERS

DEFAULT_MCP_PATH: Final = "/mcp"
DEFAULT_BRIDGE_WORKSPACE: Final = "mcp"


class McpToolServerBridge:
    """One built-in server and one workspace, exposed through an MCP `Server`.

    Only the event loop serving the MCP transport touches the state, and `WorkspaceStore.step` is synchronous,
    so every call sees the previous one complete.
    """

    def __init__(
        self,
        server: BuiltinToolServer,
        seed: Sequence[Any] = (),
        workspace_id: str = DEFAULT_BRIDGE_WORKSPACE,
    ) -> None:
        self.tool_server = server
        state = server.new_state()
        try:
            server.seed(state, list(seed))
        except (SeedError, ValueError, TypeError, KeyError) as exc:
            raise SeedError(f"invalid seed for '{server.name}': {exc}") from exc
        self.store = WorkspaceStore(server=server, max_workspaces=1)
        self.workspace = Workspace(workspace_id=workspace_id, state=state)
        self.store.workspaces[workspace_id] = self.workspace
        self.mcp_server: Server[Any] = Server(
            f"eval-pipelines-{server.name}",
            instructions=f"The '{server.name}' tool server of eval_pipelines, one workspace per MCP server.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            get_tool_input_schema=self._input_schema,
        )

    def mcp_tools(self) -> list[mcp_types.Tool]:
        tools = []
        for tool in self.tool_server.tools():
            annotations = None
            if tool.mutates_state is not None:
                annotations = mcp_types.ToolAnnotations(read_only_hint=not tool.mutates_state)
            tools.append(
                mcp_types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.parameters,
                    annotations=annotations,
                )
            )
        return tools

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        tool = self.tool_server.tool_map.get(name)
        return None if tool is None else tool.parameters

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=self.mcp_tools())

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        return await self.acall(params.name, params.arguments or {})

    def call(self, tool_name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """One synchronous step (in-process callers); the MCP transports use `acall`."""
        body = self.store.step(
            self.workspace, StepRequest(action=StepAction(tool_name=tool_name, parameters=arguments))
        )
        return self._result(body)

    async def acall(self, tool_name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """One step on the bridged workspace, awaiting servers that answer asynchronously (NPC replies). Every
        failure, an unknown tool included, is an `isError` result naming the problem, never a protocol error:
        the agent reads it and corrects its call."""
        body = await self.store.astep(
            self.workspace, StepRequest(action=StepAction(tool_name=tool_name, parameters=arguments))
        )
        return self._result(body)

    def _result(self, body: dict[str, Any]) -> mcp_types.CallToolResult:
        text = str(body["observation"])
        meta: dict[str, Any] | None = None
        diff = body.get("state_diff")
        if isinstance(diff, dict):
            text = observation_with_state_diff(text, str(diff.get("summary", "")))
            meta = {STATE_DIFF_META_KEY: diff}
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(text=text)],
            is_error=bool(body.get("is_error", False)),
            _meta=meta,
        )

    def snapshot(self) -> dict[str, Any]:
        """The same document as the HTTP server's `GET /snapshot`."""
        return self.store.snapshot(self.workspace)

    def http_app(self, path: str = DEFAULT_MCP_PATH, host: str = "127.0.0.1") -> Starlette:
        """A streamable-HTTP ASGI app (MCP at `path`, plus `GET /health` and `GET /snapshot`). Build one app
        per bridge: the SDK's session manager runs once, inside the app's lifespan. `host` is where it will be
        served: on loopback the SDK turns on DNS-rebinding protection (only loopback Host/Origin headers)."""

        async def health(request: Request) -> JSONResponse:
            return JSONResponse({"status": "healthy"})

        async def snapshot(request: Request) -> JSONResponse:
            return JSONResponse(self.snapshot())

        return self.mcp_server.streamable_http_app(
            streamable_http_path=path,
            host=host,
            custom_starlette_routes=[Route("/health", health, methods=["GET"]), Route("/snapshot", snapshot)],
        )

    async def serve_stdio(self) -> None:
        async with stdio_server() as (read_stream, write_stream):
            await self.mcp_server.run(read_stream, write_stream, self.mcp_server.create_initialization_options())


def create_mcp_http_app(
    server: BuiltinToolServer, seed: Sequence[Any] = (), path: str = DEFAULT_MCP_PATH, host: str = "127.0.0.1"
) -> Starlette:
    """`BackgroundServer(create_mcp_http_app(EmailServer()))` serves one seeded email workspace at `<url>/mcp`."""
    return McpToolServerBridge(server, seed).http_app(path, host=host)


def _read_seed_files(paths: Sequence[str]) -> list[Any]:
    seed: list[Any] = []
    for index, name in enumerate(paths):
        try:
            seed.append(json.loads(Path(name).read_text(encoding="utf-8")))
        except OSError as exc:
            raise SeedError(f"seed file {index} ({name}): cannot be read: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise SeedError(f"seed file {index} ({name}): invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    return seed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval_pipelines.toolservers.mcp_bridge",
        description="Serve one built-in tool server as an MCP server over stdio (one workspace per process).",
    )
    parser.add_argument("--server", required=True, choices=sorted(BUILTIN_SERVERS), help="built-in tool server")
    parser.add_argument(
        "--seed", action="append", default=[], metavar="FILE", help="JSON seed file (repeatable, loaded in order)"
    )
    args = parser.parse_args(argv)
    try:
        bridge = McpToolServerBridge(BUILTIN_SERVERS[args.server](), _read_seed_files(args.seed))
    except SeedError as exc:
        # stdout is the MCP wire: diagnostics go to stderr only.
        print(f"error: {exc}", file=sys.stderr)
        return 2
    asyncio.run(bridge.serve_stdio())
    return 0


if __name__ == "__main__":
    sys.exit(main())
