"""UnifiedEnvironment over HTTP tool servers (spec 001 protocol)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from pydantic import ValidationError

from eval_pipelines.environments.base import BaseEnvironment, ToolServerUnavailable
from eval_pipelines.schemas.tools import (
    STATE_DIFF_MARKER,
    StateDiff,
    StepResponse,
    ToolCallResult,
    ToolDefinition,
    ToolNamespace,
    Transport,
)


class UnifiedEnvironment(BaseEnvironment):
    """Tool servers by name -> URL. Records the state diffs that servers report, in call order, and shows the
    agent each per-call diff after a `[STATE DIFF]` marker."""

    def __init__(
        self,
        tool_servers: dict[str, str],
        timeout_seconds: float = 30.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__()
        self.tool_servers = {name: url.rstrip("/") for name, url in tool_servers.items()}
        self.timeout_seconds = timeout_seconds
        self._client = http_client
        self._owns_client = http_client is None
        self._tools: dict[str, list[ToolDefinition]] = {}
        self.state_diffs: list[StateDiff] = []

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout_seconds)
        return self._client

    def list_tool_namespaces(self) -> list[ToolNamespace]:
        return [ToolNamespace(name=n, transport=Transport.HTTP, url=u) for n, u in self.tool_servers.items()]

    def _url(self, tool_server: str) -> str:
        try:
            return self.tool_servers[tool_server]
        except KeyError:
            raise KeyError(f"unknown tool server {tool_server!r}; known: {sorted(self.tool_servers)}") from None

    async def _request(self, tool_server: str, method: str, path: str, body: Any = None) -> Any:
        url = self._url(tool_server) + path
        try:
            response = await self._http().request(method, url, json=body, timeout=self.timeout_seconds)
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
            return response.json()
        except json.JSONDecodeError as exc:
            raise ToolServerUnavailable(
                f"tool server {tool_server!r} returned invalid JSON on {method} {path}"
            ) from exc

    async def _tools_of(self, tool_server: str) -> list[ToolDefinition]:
        if tool_server not in self._tools:
            payload = await self._request(tool_server, "GET", "/tools")
            raw = payload.get("tools", payload) if isinstance(payload, dict) else payload
            try:
                self._tools[tool_server] = [ToolDefinition.model_validate(t) for t in raw]
            except (ValidationError, TypeError) as exc:
                raise ToolServerUnavailable(f"tool server {tool_server!r} returned a malformed tool listing") from exc
        return self._tools[tool_server]

    async def alist_tools(self, tool_server: str | None = None) -> list[dict[str, Any]]:
        self._remember_loop()
        servers = [tool_server] if tool_server else list(self.tool_servers)
        listing: list[dict[str, Any]] = []
        for server in servers:
            for tool in await self._tools_of(server):
                listing.append(
                    {
                        "tool_server": server,
                        "transport": Transport.HTTP.value,
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    }
                )
        return listing

    async def acall_tool(self, tool_server: str, tool_name: str, parameters: dict[str, Any]) -> ToolCallResult:
        self._remember_loop()
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
            observation = f"{observation}\n\n{STATE_DIFF_MARKER}\n{diff.summary}"
        return ToolCallResult(observation=observation, is_error=step.is_error)

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None
