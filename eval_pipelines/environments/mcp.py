"""MCP transport of UnifiedEnvironment: MCP servers reached through the official `mcp` SDK (2.x `mcp.Client`).

A server is either a streamable-HTTP `url` or a `command` launched as a stdio child process. Each server gets
one SDK session for the environment's lifetime: a dedicated owner task enters the SDK client (its anyio task
groups must be exited by the task that entered them) and holds it open until `aclose()`, so calls made from
any task of the same event loop share one session and, for stdio, one child process.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from eval_pipelines.environments.base import ToolServerUnavailable
from eval_pipelines.environments.naming import (
    DEFAULT_SECRET_PREFIX,
    resolve_secret,
    validate_mcp_server_name,
    validate_secret_key,
)
from eval_pipelines.schemas.tools import (
    STATE_DIFF_META_KEY,
    StateDiff,
    ToolCallResult,
    ToolDefinition,
    ToolNamespace,
    Transport,
)

if TYPE_CHECKING:
    # The SDK is imported where a session is opened: most runs have no MCP server, and importing it costs
    # every process (rollout workers included) about half a second at start-up.
    import mcp_types
    from mcp import Client, StdioServerParameters

#: a server that never stops paginating cannot hang a listing.
MAX_TOOL_PAGES: Final = 100
#: extra time the hard deadline gives the SDK's own read timeout to report first, with its clearer error.
_DEADLINE_GRACE_SECONDS: Final = 1.0
#: time for an owner task to leave the SDK client after `closing` is set, on top of the call timeout.
_SHUTDOWN_GRACE_SECONDS: Final = 10.0


#: What a user is told when a task names MCP servers and the SDK is not installed (it is an extra).
MCP_EXTRA_HINT: Final = "the MCP SDK is an extra: pip install 'eval_pipelines[mcp]'"


def mcp_sdk_installed() -> bool:
    """Whether the SDK imports (checked where a session opens, which imports it anyway)."""
    try:
        import mcp  # noqa: F401
        import mcp_types  # noqa: F401
    except ImportError:
        return False
    return True


class McpServerSpec(BaseModel):
    """One MCP server of an environment: `url` (streamable HTTP) or `command` + `args` + `env` (stdio).

    `secrets` maps each secret key a stdio server needs to its default (None: no default). The values are
    resolved when the child starts (see naming.resolve_secret) and set in its environment under the raw key.
    `env` and `secrets` may hold credentials, so they are left out of repr.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    secrets: dict[str, str | None] = Field(default_factory=dict, repr=False)
    cwd: str | None = None

    @model_validator(mode="after")
    def _check(self) -> McpServerSpec:
        validate_mcp_server_name(self.name)
        if (self.url is None) == (self.command is None):
            raise ValueError(f"MCP server {self.name!r} needs exactly one of 'url' (streamable HTTP) or 'command'")
        if self.url is not None:
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(f"MCP server {self.name!r}: url must start with http:// or https://")
            if self.args or self.env or self.secrets or self.cwd:
                raise ValueError(f"MCP server {self.name!r}: args, env, secrets and cwd apply to command servers only")
        elif not self.command:
            raise ValueError(f"MCP server {self.name!r}: command must not be empty")
        for key in self.env:
            validate_secret_key(key, what="env variable")
        for key in self.secrets:
            validate_secret_key(key)
        both = sorted(set(self.env) & set(self.secrets))
        if both:
            raise ValueError(f"MCP server {self.name!r}: {both} given both in env and in secrets")
        return self

    @property
    def is_stdio(self) -> bool:
        return self.command is not None

    def namespace(self) -> ToolNamespace:
        command = [self.command, *self.args] if self.command is not None else None
        return ToolNamespace(name=self.name, transport=Transport.MCP, url=self.url, command=command)


def child_environment(
    spec: McpServerSpec,
    servers_declaring: Mapping[str, set[str]],
    environ: Mapping[str, str],
    prefix: str = DEFAULT_SECRET_PREFIX,
) -> dict[str, str]:
    """What a stdio server gets on top of the SDK's minimal inherited set (PATH, HOME, ...): its explicit
    `env` and its resolved secrets, nothing else from the parent. `servers_declaring` maps each secret key to
    the environment's stdio servers that declare it."""
    child = dict(spec.env)
    for key, default in spec.secrets.items():
        declaring = servers_declaring.get(key) or {spec.name}
        value = resolve_secret(key, spec.name, declaring, environ, prefix=prefix, default=default)
        # An unresolved secret without a default stays unset: the server reports what it lacks.
        if value is not None:
            child[key] = value
    return child


def tool_definition(tool: mcp_types.Tool) -> ToolDefinition:
    mutates: bool | None = None
    if tool.annotations is not None and tool.annotations.read_only_hint is not None:
        mutates = not tool.annotations.read_only_hint
    return ToolDefinition(
        name=tool.name, description=tool.description or "", parameters=tool.input_schema, mutates_state=mutates
    )


def observation_text(result: mcp_types.CallToolResult) -> str:
    """Text blocks joined by newlines. Other blocks are named so the agent knows something was left out;
    a result with no text falls back to its structured content."""
    import mcp_types

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{block.type} content omitted]")
    if not any(isinstance(b, mcp_types.TextContent) for b in result.content) and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def reported_state_diff(result: mcp_types.CallToolResult, tool_server: str) -> StateDiff | None:
    """The machine-readable diff our own MCP-served tool servers attach under `_meta`; None from others."""
    raw = (result.meta or {}).get(STATE_DIFF_META_KEY)
    if not isinstance(raw, dict):
        return None
    try:
        return StateDiff.model_validate({**raw, "tool_server": tool_server})
    except ValidationError:
        return None


def describe_failure(exc: BaseException) -> str:
    """The innermost failure's type, plus the OS reason for a failed spawn. Never the full message: transport
    errors can quote URLs with credentials in them."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return type(exc).__name__


class McpServerConnection:
    """One SDK session to one MCP server, opened on first use and kept until `aclose()`.

    Every call is bounded by `timeout_seconds`. Losing the server (timeout, closed connection, dead child)
    raises ToolServerUnavailable; an MCP error answer or an `isError` result is an `is_error` ToolCallResult.
    """

    def __init__(
        self,
        spec: McpServerSpec,
        timeout_seconds: float,
        child_env: dict[str, str] | None = None,
    ) -> None:
        self.spec = spec
        self.timeout_seconds = timeout_seconds
        self._child_env = child_env or {}
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ended = False

    def __repr__(self) -> str:
        return f"McpServerConnection({self.spec!r}, open={self._client is not None})"

    def _target(self) -> str | StdioServerParameters:
        if self.spec.url is not None:
            return self.spec.url
        assert self.spec.command is not None
        from mcp import StdioServerParameters

        return StdioServerParameters(
            command=self.spec.command, args=list(self.spec.args), env=dict(self._child_env), cwd=self.spec.cwd
        )

    def _reset_if_other_loop(self) -> None:
        # The deprecated sync wrappers may run each call in a fresh event loop (asyncio.run); a session whose
        # loop has ended was torn down with it, so start over in the current loop.
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._client = None
            self._owner = None
            self._closing = None
            self._ended = False
            self._lock = asyncio.Lock()
            self._loop = loop

    async def _own_session(self, ready: asyncio.Future[Client], closing: asyncio.Event) -> None:
        from mcp import Client

        try:
            async with Client(self._target(), read_timeout_seconds=self.timeout_seconds) as client:
                ready.set_result(client)
                await closing.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except Exception as exc:
            # Kept on the future for open(); a session that dies later is noticed through `owner.done()`.
            if not ready.done():
                ready.set_exception(exc)

    async def open(self) -> Client:
        if not mcp_sdk_installed():
            raise ToolServerUnavailable(f"MCP server {self.spec.name!r}: {MCP_EXTRA_HINT}")
        self._reset_if_other_loop()
        assert self._lock is not None
        async with self._lock:
            if self._client is not None and self._owner is not None:
                if not self._owner.done():
                    return self._client
                # Reconnecting would hand the agent a server whose state no longer matches the rollout.
                self._ended = True
            if self._ended:
                raise ToolServerUnavailable(f"MCP server {self.spec.name!r}: the session ended unexpectedly")
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[Client] = loop.create_future()
            # Marks a late failure as retrieved when open() has already given up on the handshake.
            ready.add_done_callback(lambda f: f.cancelled() or f.exception())
            closing = asyncio.Event()
            owner = loop.create_task(self._own_session(ready, closing), name=f"mcp-session:{self.spec.name}")
            try:
                async with asyncio.timeout(self.timeout_seconds + _DEADLINE_GRACE_SECONDS):
                    client = await asyncio.shield(ready)
            except BaseException as exc:
                # Never leave a half-open session (or a child process) behind, cancellation included.
                await self._stop(owner, closing, abandon=True)
                if isinstance(exc, TimeoutError):
                    raise ToolServerUnavailable(
                        f"MCP server {self.spec.name!r} did not complete its handshake within {self.timeout_seconds:g}s"
                    ) from exc
                if isinstance(exc, Exception):
                    raise ToolServerUnavailable(
                        f"MCP server {self.spec.name!r} could not be started or reached: {describe_failure(exc)}"
                    ) from exc
                raise
            self._client, self._owner, self._closing = client, owner, closing
            return client

    async def _stop(self, owner: asyncio.Task[None], closing: asyncio.Event, abandon: bool = False) -> None:
        """End the session: let the owner leave the SDK client (which closes the HTTP session or shuts the
        child down: close stdin, SIGTERM, SIGKILL, each bounded), or cancel it outright when abandoning a
        handshake; the SDK's stdio transport reaps the child on cancellation too."""
        closing.set()
        if abandon:
            owner.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(owner), timeout=self.timeout_seconds + _SHUTDOWN_GRACE_SECONDS)
        except TimeoutError:
            owner.cancel()
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise

    def _unavailable(self, action: str, exc: BaseException) -> ToolServerUnavailable:
        from mcp import MCPError
        from mcp_types import REQUEST_TIMEOUT

        if isinstance(exc, TimeoutError) or (isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT):
            return ToolServerUnavailable(
                f"MCP server {self.spec.name!r} timed out after {self.timeout_seconds:g}s on {action}"
            )
        return ToolServerUnavailable(f"MCP server {self.spec.name!r} failed on {action}: {describe_failure(exc)}")

    async def list_tools(self) -> list[ToolDefinition]:
        client = await self.open()
        tools: list[ToolDefinition] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(self.timeout_seconds + _DEADLINE_GRACE_SECONDS):
                for _ in range(MAX_TOOL_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(tool_definition(tool) for tool in page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                else:
                    raise ToolServerUnavailable(
                        f"MCP server {self.spec.name!r} listed more than {MAX_TOOL_PAGES} pages of tools"
                    )
        except ToolServerUnavailable:
            raise
        except (ValidationError, ValueError) as exc:
            raise ToolServerUnavailable(f"MCP server {self.spec.name!r} returned a malformed tool listing") from exc
        except Exception as exc:
            raise self._unavailable("tools/list", exc) from exc
        duplicates = sorted(name for name, count in Counter(tool.name for tool in tools).items() if count > 1)
        if duplicates:
            raise ValueError(f"MCP server {self.spec.name!r} lists tool name(s) {duplicates} more than once")
        return tools

    async def call_tool(self, tool_name: str, arguments: dict[str, Any]) -> tuple[ToolCallResult, StateDiff | None]:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        client = await self.open()
        try:
            async with asyncio.timeout(self.timeout_seconds + _DEADLINE_GRACE_SECONDS):
                result = await client.call_tool(tool_name, arguments)
        except MCPError as exc:
            if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                raise self._unavailable(f"tools/call {tool_name!r}", exc) from exc
            # The server answered: the agent can read the refusal and correct its call.
            return ToolCallResult(observation=f"MCP error {exc.code}: {exc.message}", is_error=True), None
        except ValidationError as exc:
            raise ToolServerUnavailable(
                f"MCP server {self.spec.name!r} answered tools/call {tool_name!r} outside the protocol"
            ) from exc
        except Exception as exc:
            raise self._unavailable(f"tools/call {tool_name!r}", exc) from exc
        diff = None if result.is_error else reported_state_diff(result, self.spec.name)
        return ToolCallResult(observation=observation_text(result), is_error=result.is_error), diff

    async def aclose(self) -> None:
        owner, closing = self._owner, self._closing
        self._client = self._owner = self._closing = None
        if owner is None or closing is None or owner.done():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self._loop:
            # The session's loop is gone or foreign; its own shutdown already reaped the transport.
            return
        await self._stop(owner, closing)
