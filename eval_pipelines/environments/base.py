"""BaseEnvironment: the environment contract of spec 001."""

from __future__ import annotations

import asyncio
import threading
import warnings
from abc import ABC, abstractmethod
from collections.abc import Coroutine
from typing import Any, TypeVar

from eval_pipelines.schemas.tools import ToolCallResult, ToolNamespace

T = TypeVar("T")

SYNC_WRAPPER_REMOVAL = "0.4.0"


class ToolServerUnavailable(RuntimeError):
    """A tool server could not be reached or answered outside the protocol (5xx, invalid JSON, timeout).

    Unlike a failed tool call (an `is_error` observation the agent can react to), this ends the rollout as an
    infrastructure failure: the state behind the server can no longer be trusted.
    """


class BaseEnvironment(ABC):
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        # Created inside a running loop (as the engine does), the environment belongs to it from the start, so a
        # synchronous agent on a worker thread reaches the same clients even before any async call was made.
        self._remember_loop()

    def _remember_loop(self) -> None:
        # Sync wrappers called from a worker thread hand their coroutine back to the loop that owns our clients.
        try:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
        except RuntimeError:
            pass

    @abstractmethod
    async def alist_tools(self, tool_server: str | None = None) -> list[dict[str, Any]]:
        """Tool definitions of every server (or one): `{tool_server, transport, name, description, parameters}`."""

    @abstractmethod
    async def acall_tool(self, tool_server: str, tool_name: str, parameters: dict[str, Any]) -> ToolCallResult:
        """Invoke a tool; a failed call is a ToolCallResult with `is_error=True`, never an exception."""

    @abstractmethod
    def list_tool_namespaces(self) -> list[ToolNamespace]:
        """The tool servers and their transports."""

    async def ahidden_tools(self) -> list[dict[str, Any]]:
        """Tools served but not listed yet (a multi-turn task unlocks them at a later turn), in the form of
        `alist_tools`: a call by name still reaches them. Default: none."""
        return []

    def unlock_tools(self, names: list[str]) -> None:  # noqa: B027 - optional hook, most environments hide nothing
        """List the hidden tools of these names from now on."""

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        if loop is not None and loop.is_running() and self._loop_thread != threading.get_ident():
            return asyncio.run_coroutine_threadsafe(coro, loop).result()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        coro.close()
        raise RuntimeError(
            "synchronous environment methods cannot be called from a running event loop; use the a* forms"
        )

    def list_tools(self, tool_server: str | None = None) -> list[dict[str, Any]]:
        warnings.warn(
            f"list_tools() is deprecated and will be removed in {SYNC_WRAPPER_REMOVAL}; use alist_tools()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._run_sync(self.alist_tools(tool_server))

    def call_tool(self, tool_server: str, tool_name: str, parameters: dict[str, Any]) -> ToolCallResult:
        warnings.warn(
            f"call_tool() is deprecated and will be removed in {SYNC_WRAPPER_REMOVAL}; use acall_tool()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._run_sync(self.acall_tool(tool_server, tool_name, parameters))

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most environments hold nothing
        """Release transports."""
