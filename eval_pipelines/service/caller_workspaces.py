"""Workspaces of one's own behind the `tool_server_url`s of a task listing (`GET /scenarios/{id}/tasks`).

Each listing request mints a token, and a task's server is listed at `<service>/ws/<token>/<task_id>/<server>`.
The first call to such a URL creates a workspace on the service's tool host, seeded with the task's seed files as
a rollout's workspace is, and every later call to that URL reaches the same workspace: two listings are two
callers with two workspaces, and a write through one URL is never seen through another's. The token is the
credential (SimLab's environment sends no key to a tool server): 128 random bits, handed only to a key holder.

Workspaces are reclaimed: one unused for `CALLER_WORKSPACE_IDLE_SECONDS` is deleted, past
`MAX_WORKSPACES_PER_LISTING` of one listing that listing's least recently used one is (so one URL holder cannot push
out every other caller's workspaces), and past `MAX_CALLER_WORKSPACES` the least recently used one is. A URL whose
workspace is gone answers 410, never a fresh workspace that silently lost the caller's changes; a new listing gives
new URLs.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from eval_pipelines.lib.redact import redact_text, redact_url
from eval_pipelines.schemas.hosted import HOSTED_STEP_PREFIX
from eval_pipelines.schemas.limits import (
    CALLER_STEP_TIMEOUT_SECONDS,
    CALLER_WORKSPACE_IDLE_SECONDS,
    LISTING_TOKEN_SECONDS,
    MAX_CALLER_WORKSPACES,
    MAX_LISTING_TOKENS,
    MAX_WORKSPACES_PER_LISTING,
)
from eval_pipelines.toolservers.admin import ToolServerAdmin, WorkspaceError

logger = logging.getLogger(__name__)

#: (listing token, task id, server name as listed): one caller's workspace.
WorkspaceKey = tuple[str, str, str]
#: How many reclaimed keys are remembered, so their URLs answer 410 rather than 404.
_REMEMBERED_PER_WORKSPACE = 4
_TOKEN_BYTES = 16
#: A deletion at reclaim or shutdown: the tool host answers at once, or it is gone anyway.
_DELETE_TIMEOUT_SECONDS = 5.0


class WorkspaceUnavailable(Exception):
    """The URL reaches no workspace (unknown, expired or reclaimed) or the tool host failed: `status` and `detail`
    are the answer."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Provision:
    """Where and how a caller workspace is made: the tool server's base URL on the tool host, and its seed."""

    server_base_url: str
    seed: list[Any]


#: Scenario id of the listing -> what to create; raises the service's NotFound for a task or server it lacks.
ProvisionOrder = Callable[[str], Provision]


@dataclass
class _Listing:
    scenario_id: str
    issued: float


@dataclass
class _Workspace:
    url: str
    last_used: float


class CallerWorkspaces:
    """The listings' tokens and their workspaces, for one service. The workspaces are touched only from the
    service's event loop; tokens are also minted by listings served on worker threads, under a lock."""

    def __init__(
        self,
        admin: ToolServerAdmin | None = None,
        *,
        max_workspaces: int = MAX_CALLER_WORKSPACES,
        max_per_listing: int = MAX_WORKSPACES_PER_LISTING,
        idle_seconds: float = CALLER_WORKSPACE_IDLE_SECONDS,
        max_listings: int = MAX_LISTING_TOKENS,
        listing_seconds: float = LISTING_TOKEN_SECONDS,
        step_timeout_seconds: float = CALLER_STEP_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.admin = admin or ToolServerAdmin()
        self.max_workspaces = max_workspaces
        self.max_per_listing = max_per_listing
        self.idle_seconds = idle_seconds
        self.max_listings = max_listings
        self.listing_seconds = listing_seconds
        self.step_timeout_seconds = step_timeout_seconds
        self._clock = clock
        self._listings: OrderedDict[str, _Listing] = OrderedDict()
        self._listings_lock = threading.Lock()
        #: least recently used first
        self._workspaces: OrderedDict[WorkspaceKey, _Workspace] = OrderedDict()
        self._reclaimed: OrderedDict[WorkspaceKey, None] = OrderedDict()
        self._pending: dict[WorkspaceKey, asyncio.Task[str]] = {}

    def __len__(self) -> int:
        return len(self._workspaces)

    def mint(self, scenario_id: str) -> str:
        """A new listing's token: its URLs reach workspaces of their own."""
        token = secrets.token_urlsafe(_TOKEN_BYTES)
        with self._listings_lock:
            self._listings[token] = _Listing(scenario_id, self._clock())
            while len(self._listings) > self.max_listings:
                self._listings.popitem(last=False)
        return token

    def _scenario_of(self, token: str) -> str:
        with self._listings_lock:
            listing = self._listings.get(token)
        if listing is None or self._clock() - listing.issued > self.listing_seconds:
            raise WorkspaceUnavailable(404, "unknown or expired workspace URL; list the scenario's tasks again")
        return listing.scenario_id

    async def workspace_url(self, key: WorkspaceKey, order: ProvisionOrder) -> str:
        """The URL on the tool host of the caller's workspace, made and seeded on the first call."""
        await self._reclaim_idle()
        entry = self._workspaces.get(key)
        if entry is not None:
            entry.last_used = self._clock()
            self._workspaces.move_to_end(key)
            return entry.url
        if key in self._reclaimed:
            raise WorkspaceUnavailable(
                410, "this workspace was reclaimed (unused for too long, or too many at once); list the tasks again"
            )
        pending = self._pending.get(key)
        if pending is None:
            # A task of its own, so a caller that goes away mid-creation neither leaks the workspace nor makes the
            # concurrent calls for the same URL create a second one.
            pending = asyncio.ensure_future(self._create(key, order))
            self._pending[key] = pending
            pending.add_done_callback(lambda done: self._created(key, done))
        return await asyncio.shield(pending)

    def _created(self, key: WorkspaceKey, done: asyncio.Task[str]) -> None:
        self._pending.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved: every waiter may have gone away

    async def _create(self, key: WorkspaceKey, order: ProvisionOrder) -> str:
        provision = order(self._scenario_of(key[0]))
        try:
            url = await self.admin.create_workspace(provision.server_base_url, provision.seed)
        except WorkspaceError as exc:
            # The seed comes from the scenario, the capacity and the connection from this service: none is the
            # caller's mistake.
            status = 503 if exc.status_code in (None, 503) else 502
            # Redacted: the answer goes to whoever holds the URL, with no key, and a tool server's URL may carry
            # the credentials it is reached with.
            detail = f"the tool host could not make the workspace: {redact_text(str(exc))}"
            raise WorkspaceUnavailable(status, detail) from None
        self._workspaces[key] = _Workspace(url, self._clock())
        # least recently used first, as `_workspaces` is ordered
        own = [other for other in self._workspaces if other[0] == key[0]]
        evicted = [(oldest, self._workspaces.pop(oldest)) for oldest in own[: max(0, len(own) - self.max_per_listing)]]
        for oldest, entry in evicted:
            await self._delete(oldest, entry)
        while len(self._workspaces) > self.max_workspaces:
            oldest, entry = self._workspaces.popitem(last=False)
            await self._delete(oldest, entry)
        return url

    async def _reclaim_idle(self) -> None:
        now = self._clock()
        while self._workspaces:
            key, entry = next(iter(self._workspaces.items()))
            if now - entry.last_used <= self.idle_seconds:
                return
            del self._workspaces[key]
            await self._delete(key, entry)

    async def _delete(self, key: WorkspaceKey, entry: _Workspace) -> None:
        self._forget(key)
        try:
            await asyncio.wait_for(self.admin.delete_workspace(entry.url), _DELETE_TIMEOUT_SECONDS)
        except (WorkspaceError, TimeoutError) as exc:
            # It is unreachable either way; a restarted tool host has lost it already.
            logger.warning("a reclaimed caller workspace could not be deleted: %s", exc)

    def _forget(self, key: WorkspaceKey) -> None:
        self._workspaces.pop(key, None)
        self._reclaimed[key] = None
        while len(self._reclaimed) > self.max_workspaces * _REMEMBERED_PER_WORKSPACE:
            self._reclaimed.popitem(last=False)

    async def forward(
        self,
        key: WorkspaceKey,
        order: ProvisionOrder,
        method: str,
        action: str,
        body: bytes | None = None,
    ) -> httpx.Response:
        """`method` `<workspace>/hosted/<action>` on the tool host, for the caller: the hosted product's shapes
        (`input_schema` in `/tools`, `{"observation": {"text", "is_error"}}` from `/step`)."""
        url = await self.workspace_url(key, order)
        target = f"{url}/{HOSTED_STEP_PREFIX}/{action}"
        headers = {"content-type": "application/json"} if body is not None else None
        try:
            response = await self.admin.http_client().request(
                method, target, content=body, headers=headers, timeout=self.step_timeout_seconds
            )
        except httpx.TimeoutException:
            raise WorkspaceUnavailable(
                504, f"the tool call took longer than {self.step_timeout_seconds:g}s on the tool host"
            ) from None
        except httpx.HTTPError as exc:
            raise WorkspaceUnavailable(
                502, f"the tool host failed: {type(exc).__name__} at {redact_url(target)}"
            ) from None
        if response.status_code == 404:
            # The tool host was replaced (it restarts when it stops answering) and took the workspace with it, or
            # the workspace was reclaimed while this call was on its way.
            self._forget(key)
            raise WorkspaceUnavailable(
                410, "this workspace is gone (reclaimed, or lost when the tool host restarted); list the tasks again"
            )
        if response.status_code >= 500:
            raise WorkspaceUnavailable(502, f"the tool host answered {response.status_code}")
        return response

    async def aclose(self) -> None:
        """Delete every caller workspace (the tool host is shared by every service of the process)."""
        for task in list(self._pending.values()):
            task.cancel()
        entries, self._workspaces = list(self._workspaces.items()), OrderedDict()
        for key, entry in entries:
            await self._delete(key, entry)
        await self.admin.aclose()
