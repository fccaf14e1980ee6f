"""UnifiedEnvironment: HTTP tool servers (spec 001 protocol) and MCP servers (official `mcp` SDK) as one set."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx
from pydantic import ValidationError

from eval_pipelines.environments.base import BaseEnvironment, ToolServerUnavailable
from eval_pipelines.environments.mcp import McpServerConnection, McpServerSpec, child_environment
from eval_pipelines.environments.naming import (
    DEFAULT_SECRET_PREFIX,
    builtin_server_names,
    check_tool_name_collisions,
    validate_mcp_server_names,
    validate_secret_prefix,
)
from eval_pipelines.lib.json_http import json_content, response_json
from eval_pipelines.schemas.tools import (
    LISTING_SCOPE_KEY,
    ListingScope,
    StateDiff,
    StepResponse,
    ToolCallResult,
    ToolDefinition,
    ToolNamespace,
    Transport,
    observation_with_state_diff,
)


class UnifiedEnvironment(BaseEnvironment):
    """HTTP tool servers by name -> URL, plus MCP servers (`mcp_servers`). Records the state diffs that servers
    report, in call order, and shows the agent each per-call diff after a `[STATE DIFF]` marker.

    MCP sessions open on first use and stay open until `aclose()` (or the end of `async with`). Naming rules
    are checked at construction (server names) and at tool listing (a tool name served over both transports).
    Stdio secrets are resolved from `environ` (default: the process environment) when the child starts.
    """

    def __init__(
        self,
        tool_servers: Mapping[str, str] | None = None,
        timeout_seconds: float = 30.0,
        http_client: httpx.AsyncClient | None = None,
        mcp_servers: Sequence[McpServerSpec] | None = None,
        environ: Mapping[str, str] | None = None,
        secret_prefix: str = DEFAULT_SECRET_PREFIX,
        known_tools: Mapping[str, list[ToolDefinition]] | None = None,
        bare_tool_names: bool = False,
        hidden_tools: Iterable[str] = (),
    ) -> None:
        super().__init__()
        self.tool_servers = {name: url.rstrip("/") for name, url in (tool_servers or {}).items()}
        self.mcp_servers = {spec.name: spec for spec in mcp_servers or []}
        validate_mcp_server_names(
            [spec.name for spec in mcp_servers or []],
            builtin_server_names=builtin_server_names(),
            other_server_names=list(self.tool_servers),
        )
        self.timeout_seconds = timeout_seconds
        self._environ = environ
        self._secret_prefix = validate_secret_prefix(secret_prefix)
        self._client = http_client
        self._owns_client = http_client is None
        # Listings the caller already holds (an earlier rollout read them from the same servers).
        self._tools: dict[str, list[ToolDefinition]] = {
            name: list(tools) for name, tools in (known_tools or {}).items() if name in self.tool_servers
        }
        #: HTTP servers whose listing said every workspace of theirs lists the same tools
        self._server_wide_listings: set[str] = set()
        self._mcp: dict[str, McpServerConnection] = {}
        self._names_checked = False
        self._parsed_urls: dict[tuple[str, str], httpx.URL] = {}
        self.state_diffs: list[StateDiff] = []
        #: the model sees each tool by its own name; the listing then carries it as `wire_name`
        self.bare_tool_names = bare_tool_names
        self._hidden = set(hidden_tools)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout_seconds)
        return self._client

    def http_tool_listings(self) -> dict[str, list[ToolDefinition]]:
        """The HTTP tool servers' listings read so far, by server name (for reuse by later environments)."""
        return {name: tools for name, tools in self._tools.items() if name in self.tool_servers}

    def server_wide_listings(self) -> set[str]:
        """The HTTP servers read so far whose listing holds for every workspace of theirs, not this one alone."""
        return set(self._server_wide_listings)

    def list_tool_namespaces(self) -> list[ToolNamespace]:
        http = [ToolNamespace(name=n, transport=Transport.HTTP, url=u) for n, u in self.tool_servers.items()]
        return http + [spec.namespace() for spec in self.mcp_servers.values()]

    def _connection(self, name: str) -> McpServerConnection:
        connection = self._mcp.get(name)
        if connection is None:
            spec = self.mcp_servers[name]
            child_env = self._child_env(spec) if spec.is_stdio else None
            connection = McpServerConnection(spec, self.timeout_seconds, child_env=child_env)
            self._mcp[name] = connection
        return connection

    def _child_env(self, spec: McpServerSpec) -> dict[str, str]:
        declaring: dict[str, set[str]] = {}
        for other in self.mcp_servers.values():
            if other.is_stdio:
                for key in other.secrets:
                    declaring.setdefault(key, set()).add(other.name)
        environ = os.environ if self._environ is None else self._environ
        return child_environment(spec, declaring, environ, prefix=self._secret_prefix)

    async def aconnect(self) -> None:
        """Open every MCP session now (they otherwise open on first use), so a server that cannot start fails
        before the agent runs. On failure every session is closed again."""
        self._remember_loop()
        outcomes = await asyncio.gather(
            *(self._connection(name).open() for name in self.mcp_servers), return_exceptions=True
        )
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if failures:
            await self.aclose()
            raise failures[0]

    def _url(self, tool_server: str) -> str:
        try:
            return self.tool_servers[tool_server]
        except KeyError:
            raise KeyError(f"unknown tool server {tool_server!r}; known: {sorted(self.tool_servers)}") from None

    async def _request(self, tool_server: str, method: str, path: str, body: Any = None) -> Any:
        url = self._parsed_urls.get((tool_server, path))
        if url is None:
            # Parsed once per server and path: httpx parses a URL given as text on every request.
            url = self._parsed_urls[(tool_server, path)] = httpx.URL(self._url(tool_server) + path)
        try:
            response = await self._http().request(method, url, timeout=self.timeout_seconds, **json_content(body))
        except httpx.TimeoutException as exc:
            raise ToolServerUnavailable(
                f"tool server {tool_server!r} timed out after {self.timeout_seconds}s on {method} {path}"
            ) from exc
        except httpx.TransportError as exc:
            raise ToolServerUnavailable(f"tool server {tool_server!r} unreachable: {exc.__class__.__name__}") from exc
        if response.status_code >= 400:
            raise ToolServerUnavailable(
                f"tool server {tool_server!r} answered {response.status_code} on {method} {path}: {response.text[:300]}"
            )
        try:
            return response_json(response)
        except ValueError as exc:
            raise ToolServerUnavailable(
                f"tool server {tool_server!r} returned invalid JSON on {method} {path}"
            ) from exc

    async def _tools_of(self, tool_server: str) -> list[ToolDefinition]:
        if tool_server not in self._tools:
            payload = await self._request(tool_server, "GET", "/tools")
            raw = payload.get("tools", payload) if isinstance(payload, dict) else payload
            if isinstance(payload, dict) and payload.get(LISTING_SCOPE_KEY) == ListingScope.SERVER:
                self._server_wide_listings.add(tool_server)
            try:
                self._tools[tool_server] = [ToolDefinition.model_validate(t) for t in raw]
            except (ValidationError, TypeError) as exc:
                raise ToolServerUnavailable(f"tool server {tool_server!r} returned a malformed tool listing") from exc
        return self._tools[tool_server]

    async def _mcp_tools_of(self, name: str) -> list[ToolDefinition]:
        if name not in self._tools:
            self._tools[name] = await self._connection(name).list_tools()
        return self._tools[name]

    async def _check_tool_names(self) -> None:
        # Every server's listing is needed to see a collision, so the check runs once over the whole environment.
        if self._names_checked or not self.mcp_servers or not self.tool_servers:
            return
        http = {name: [t.name for t in await self._tools_of(name)] for name in self.tool_servers}
        mcp = {name: [t.name for t in await self._mcp_tools_of(name)] for name in self.mcp_servers}
        check_tool_name_collisions(http, mcp)
        self._names_checked = True

    async def alist_tools(self, tool_server: str | None = None) -> list[dict[str, Any]]:
        return [tool for tool in await self._listing(tool_server) if tool["name"] not in self._hidden]

    async def ahidden_tools(self) -> list[dict[str, Any]]:
        return [tool for tool in await self._listing(None) if tool["name"] in self._hidden] if self._hidden else []

    def unlock_tools(self, names: list[str]) -> None:
        self._hidden.difference_update(names)

    async def _listing(self, tool_server: str | None) -> list[dict[str, Any]]:
        """Every tool served, hidden or not."""
        self._remember_loop()
        tool_server = tool_server or None
        if tool_server is not None and tool_server not in self.tool_servers and tool_server not in self.mcp_servers:
            known = sorted([*self.tool_servers, *self.mcp_servers])
            raise KeyError(f"unknown tool server {tool_server!r}; known: {known}")
        await self._check_tool_names()
        listing: list[dict[str, Any]] = []
        for server in [*self.tool_servers, *self.mcp_servers]:
            if tool_server is not None and server != tool_server:
                continue
            if server in self.tool_servers:
                transport, tools = Transport.HTTP, await self._tools_of(server)
            else:
                transport, tools = Transport.MCP, await self._mcp_tools_of(server)
            listing.extend(
                {
                    "tool_server": server,
                    "transport": transport.value,
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    **({"wire_name": tool.name} if self.bare_tool_names else {}),
                }
                for tool in tools
            )
        return listing

    async def acall_tool(self, tool_server: str, tool_name: str, parameters: dict[str, Any]) -> ToolCallResult:
        self._remember_loop()
        if tool_server in self.mcp_servers:
            result, diff = await self._connection(tool_server).call_tool(tool_name, parameters)
            if diff is not None:
                # The MCP bridge already put the summary in the text the agent reads; only record it here.
                self.state_diffs.append(diff)
            return result
        if tool_server not in self.tool_servers:
            return ToolCallResult(observation=f"Unknown tool server: {tool_server}", is_error=True)
        payload = await self._request(
            tool_server, "POST", "/step", {"action": {"tool_name": tool_name, "parameters": parameters}}
        )
        try:
            step = StepResponse.model_validate(payload)
        except ValidationError as exc:
            raise ToolServerUnavailable(f"tool server {tool_server!r} answered /step outside the protocol") from exc
        observation = step.observation
        if step.state_diff is not None and not step.is_error:
            diff = step.state_diff.model_copy(update={"tool_server": tool_server})
            self.state_diffs.append(diff)
            observation = observation_with_state_diff(observation, diff.summary)
        return ToolCallResult(observation=observation, is_error=step.is_error, error_source=step.error_source)

    async def aclose(self) -> None:
        connections, self._mcp = list(self._mcp.values()), {}
        await asyncio.gather(*(connection.aclose() for connection in connections), return_exceptions=True)
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> UnifiedEnvironment:
        await self.aconnect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
