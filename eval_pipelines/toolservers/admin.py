"""Provisioning client for built-in tool servers: create, snapshot and delete workspaces over HTTP."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

import httpx

from eval_pipelines.lib.http_pool import pooled_client
from eval_pipelines.lib.json_http import json_content, response_json
from eval_pipelines.schemas.limits import MAX_WORKSPACES_PER_BATCH_DELETE

DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_CONNECTIONS = 100
#: What separates a workspace's server base URL from its id in a tool_server_url.
WORKSPACES_PATH = "/workspaces/"


class WorkspaceError(Exception):
    """Provisioning failed; the engine reports it as a rollout `workspace_error`."""

    def __init__(self, message: str, server_url: str = "", status_code: int | None = None) -> None:
        super().__init__(message)
        self.server_url = server_url
        self.status_code = status_code


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    return str(body)[:200]


class ToolServerAdmin:
    """Async client the rollout engine uses around a rollout. Pass a shared `httpx.AsyncClient` to reuse
    connections across rollouts; otherwise a pooled client of `max_connections` (lib/http_pool) is created
    lazily and closed by `aclose()`.

    `http_client()` hands out that client: the engine gives one to every rollout's environment too,
    so all tool-server traffic of a run shares warm connections (a client per rollout cost a TLS context and
    fresh connections each). `max_connections` should cover the rollouts that run at once.
    """

    def __init__(
        self,
        client: httpx.AsyncClient | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self._client = client
        self._pool: httpx.AsyncClient | None = None
        #: servers that answered a batch delete with 404 or 405
        self._without_batch_delete: set[str] = set()
        self.timeout_seconds = timeout_seconds
        self.max_connections = max_connections

    def http_client(self) -> httpx.AsyncClient:
        if self._client is not None:
            return self._client
        if self._pool is None:
            self._pool = pooled_client(self.max_connections, timeout=self.timeout_seconds)
        return self._pool

    async def _request(
        self,
        method: str,
        url: str,
        action: str,
        server: str,
        json: Any = None,
        expected: tuple[int, ...] = (200,),
        params: dict[str, str] | None = None,
    ) -> Any:
        try:
            response = await self.http_client().request(
                method, url, params=params, timeout=self.timeout_seconds, **json_content(json)
            )
        except httpx.TimeoutException as exc:
            raise WorkspaceError(
                f"tool server {server}: {action} timed out after {self.timeout_seconds:g}s", server_url=server
            ) from exc
        except httpx.HTTPError as exc:
            raise WorkspaceError(
                f"tool server {server}: {action} failed: {type(exc).__name__}: {exc}", server_url=server
            ) from exc
        if response.status_code not in expected:
            raise WorkspaceError(
                f"tool server {server}: {action} failed with HTTP {response.status_code}: {_detail(response)}",
                server_url=server,
                status_code=response.status_code,
            )
        try:
            return response_json(response)
        except ValueError as exc:
            raise WorkspaceError(
                f"tool server {server}: {action} returned a non-JSON body",
                server_url=server,
                status_code=response.status_code,
            ) from exc

    async def create_workspace(self, server_base_url: str, seed: list[Any], workspace_id: str | None = None) -> str:
        """Create and seed a workspace; return its full tool_server_url (`<base>/workspaces/<id>`)."""
        url, _ = await self.create_seeded_workspace(server_base_url, seed, workspace_id)
        return url

    async def create_seeded_workspace(
        self, server_base_url: str, seed: list[Any], workspace_id: str | None = None
    ) -> tuple[str, dict[str, Any] | None]:
        """`create_workspace`, plus the seeded state when the server answers with it (the built-in ones do),
        so a rollout's initial snapshot costs no further request; None asks the caller to snapshot."""
        base = server_base_url.rstrip("/")
        payload: dict[str, Any] = {"seed": seed}
        if workspace_id is not None:
            payload["workspace_id"] = workspace_id
        body = await self._request(
            "POST", f"{base}/workspaces", "create workspace", base, json=payload, expected=(200, 201)
        )
        path = body.get("path") if isinstance(body, dict) else None
        if not isinstance(path, str) or not path.startswith("/"):
            raise WorkspaceError(f"tool server {base}: create workspace returned no workspace path", server_url=base)
        state = body.get("state")
        return f"{base}{path}", state if isinstance(state, dict) else None

    async def restore_workspace(self, server_base_url: str, state: dict[str, Any]) -> str:
        """A new workspace holding `state` (a snapshot's); return its tool_server_url."""
        base = server_base_url.rstrip("/")
        body = await self._request(
            "POST", f"{base}/workspaces", "restore workspace", base, json={"state": state}, expected=(200, 201)
        )
        path = body.get("path") if isinstance(body, dict) else None
        if not isinstance(path, str) or not path.startswith("/"):
            raise WorkspaceError(f"tool server {base}: restore workspace returned no workspace path", server_url=base)
        return f"{base}{path}"

    async def seed(self, tool_server_url: str, seed: list[Any]) -> None:
        """Load more seed files into an existing workspace (merged with what it already holds)."""
        url = tool_server_url.rstrip("/")
        await self._request("POST", f"{url}/seed", "seed workspace", url, json={"seed": seed})

    async def configure(self, tool_server_url: str, settings: dict[str, Any]) -> dict[str, Any]:
        """Set a workspace's runtime settings (e.g. `{"npc_model": {...}}`). The server keeps them in memory
        only; the answer echoes what was applied, never a key."""
        url = tool_server_url.rstrip("/")
        body = await self._request("POST", f"{url}/configure", "configure workspace", url, json=settings)
        configured = body.get("configured") if isinstance(body, dict) else None
        return configured if isinstance(configured, dict) else {}

    async def snapshot(self, tool_server_url: str) -> dict[str, Any]:
        """The workspace's state (collection -> id -> item)."""
        url = tool_server_url.rstrip("/")
        # The state alone: the rendering for people is the server's work, and nobody here reads it.
        body = await self._request("GET", f"{url}/snapshot?text=false", "snapshot", url)
        state = body.get("state") if isinstance(body, dict) else None
        if not isinstance(state, dict):
            raise WorkspaceError(f"tool server {url}: snapshot has no 'state' object", server_url=url)
        return state

    async def delete_workspace(self, tool_server_url: str) -> None:
        url = tool_server_url.rstrip("/")
        await self._request("DELETE", url, "delete workspace", url)

    async def delete_workspaces(self, tool_server_urls: Sequence[str]) -> None:
        """Delete finished workspaces, those of one server in one `POST <base>/workspaces/batch-delete` where it
        has that route (the built-in ones do); otherwise, or after it answered 404 or 405 once, one by one.
        Raises WorkspaceError for the first server that failed, after trying every server."""
        by_base: dict[str, list[str]] = {}
        for url in tool_server_urls:
            base, separator, workspace_id = url.rstrip("/").rpartition(WORKSPACES_PATH)
            if separator and workspace_id and "/" not in workspace_id:
                by_base.setdefault(base, []).append(workspace_id)
            else:
                by_base.setdefault(url.rstrip("/"), []).append("")
        failure: WorkspaceError | None = None
        for base, workspace_ids in by_base.items():
            try:
                await self._delete_from(base, workspace_ids)
            except WorkspaceError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    async def _delete_from(self, base: str, workspace_ids: list[str]) -> None:
        if "" in workspace_ids or base in self._without_batch_delete:
            for workspace_id in workspace_ids:
                await self.delete_workspace(f"{base}{WORKSPACES_PATH}{workspace_id}" if workspace_id else base)
            return
        for start in range(0, len(workspace_ids), MAX_WORKSPACES_PER_BATCH_DELETE):
            chunk = workspace_ids[start : start + MAX_WORKSPACES_PER_BATCH_DELETE]
            try:
                await self._request(
                    "POST", f"{base}/workspaces/batch-delete", "delete workspaces", base, json={"workspace_ids": chunk}
                )
            except WorkspaceError as exc:
                if exc.status_code not in (404, 405):
                    raise
                self._without_batch_delete.add(base)  # a server without the route: one by one from now on
                await self._delete_from(base, workspace_ids[start:])
                return

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None

    async def __aenter__(self) -> ToolServerAdmin:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
