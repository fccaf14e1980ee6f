"""Fault-injecting stand-ins for the third-party ends of a rollout: a tool server and a model endpoint.

Both are plain ASGI wrappers around a real app (a built-in tool server, the simulated OpenAI-compatible models),
served over real HTTP by the tests. They pass every request through unchanged until a rule says "this one
breaks", then answer the way real servers break: a 500, a body that is not JSON, a reply that never comes, a
body or chunked stream cut off mid-way, or the whole server going away.

They stand in for servers we do not control (a user's tool server, vLLM, a provider). Nothing of our own
code is replaced: the engine, executor and pipeline under test talk to them over loopback HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from eval_pipelines.lib.serving import BackgroundServer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Long enough to outlast every timeout the tests configure; `FaultControl.release` ends it at teardown.
HANG_SECONDS = 60.0
#: Retry-After of `RATE_LIMITED_LONG`: longer than any rollout timeout the tests configure.
LONG_RETRY_AFTER = 30
TRICKLE_SECONDS = 2.0
_WORKSPACE_PATH = re.compile(r"^/workspaces/(?P<id>[^/]+)(?:/(?P<route>[^/]+))?/?$")


class Fault(StrEnum):
    HTTP_500 = "http_500"
    #: the key is refused, as a provider answers a wrong or revoked key.
    UNAUTHORIZED = "http_401"
    #: rate limited, for every attempt of the client's retries.
    RATE_LIMITED = "http_429"
    #: rate limited, asking the client to come back only after `LONG_RETRY_AFTER` seconds.
    RATE_LIMITED_LONG = "http_429_long_retry_after"
    INVALID_JSON = "invalid_json"
    #: 200 with an HTML page, as a misconfigured proxy answers.
    GARBAGE = "garbage"
    #: 200 with a complete HTTP body that holds only half a JSON document.
    TRUNCATED_JSON = "truncated_json"
    #: Content-Length promises more than is sent, then the connection closes.
    CUT_BODY = "cut_body"
    #: Chunked transfer encoding, closed before the final chunk (a stream that stops mid-way).
    CUT_STREAM = "cut_stream"
    HANG = "hang"
    #: 200, then the body one byte every `TRICKLE_SECONDS`: no single read waits long, the reply never ends.
    TRICKLE = "trickle"
    #: The server process goes away: this request is cut off and every later one is refused.
    DIE = "die"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): a model endpoint that is down."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class AbortConnection(Exception):
    """Raised inside the ASGI app after a partial response: uvicorn closes the socket without finishing it."""


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The request is fully read; an app waiting for more only learns of a disconnect.
        await asyncio.sleep(HANG_SECONDS)
        return {"type": "http.disconnect"}

    return receive


async def _respond(
    send: Send, status: int, body: bytes, content_type: bytes = b"application/json", retry_after: int = 0
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if status >= 500 or status == 429:
        # Retries are expected here; a zero Retry-After keeps them immediate so the tests stay fast.
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _hold(seconds: float, release: threading.Event | None) -> bool:
    """Wait `seconds`, or less once `release` is set (then True)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        if release is not None and release.is_set():
            return True
        await asyncio.sleep(0.05)
    return False


async def inject(
    fault: Fault, send: Send, *, on_die: Callable[[], None] | None = None, release: threading.Event | None = None
) -> None:
    """Answer one request with `fault`. A hanging answer ends early once `release` is set (test teardown), so
    stopping the server does not wait out its graceful-shutdown timeout."""
    if fault is Fault.HTTP_500:
        await _respond(send, 500, b'{"detail": "injected internal error"}')
    elif fault is Fault.UNAUTHORIZED:
        await _respond(send, 401, b'{"error": {"message": "injected: invalid api key"}}')
    elif fault is Fault.RATE_LIMITED:
        await _respond(send, 429, b'{"error": {"message": "injected: slow down"}}')
    elif fault is Fault.RATE_LIMITED_LONG:
        await _respond(send, 429, b'{"error": {"message": "injected: come back later"}}', retry_after=LONG_RETRY_AFTER)
    elif fault is Fault.INVALID_JSON:
        await _respond(send, 200, b'{"observation": "half an answer", ')
    elif fault is Fault.GARBAGE:
        await _respond(send, 200, b"<html><body>502 Bad Gateway</body></html>", b"text/html")
    elif fault is Fault.TRUNCATED_JSON:
        await _respond(send, 200, b'{"id": "cmpl-1", "object": "chat.completion", "choices": [{"index": 0, "mess')
    elif fault is Fault.CUT_BODY:
        start = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")],
        }
        await send(start)
        await send({"type": "http.response.body", "body": b'{"id": "cmpl-1", "choi', "more_body": True})
        raise AbortConnection("injected: connection closed mid-body")
    elif fault is Fault.CUT_STREAM:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b'data: {"id": "cmpl-1", "choices": [', "more_body": True})
        raise AbortConnection("injected: stream closed before its last chunk")
    elif fault is Fault.HANG:
        await _hold(HANG_SECONDS, release)
        await _respond(send, 504, b'{"detail": "too late"}')
    elif fault is Fault.TRICKLE:
        start = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")],
        }
        await send(start)
        for _ in range(int(HANG_SECONDS / TRICKLE_SECONDS)):
            # Leading whitespace is valid JSON: a client that waited would still be reading a well-formed reply.
            await send({"type": "http.response.body", "body": b" ", "more_body": True})
            if await _hold(TRICKLE_SECONDS, release):
                break
        raise AbortConnection("injected: the trickle stopped")
    elif fault is Fault.DIE:
        if on_die is not None:
            on_die()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"512")]})
        await send({"type": "http.response.body", "body": b'{"observ', "more_body": True})
        raise AbortConnection("injected: server died mid-request")
    else:  # pragma: no cover - exhaustive over Fault
        raise AssertionError(fault)


class FaultControl:
    """Stops a BackgroundServer from another thread (it cannot join its own thread from a request).
    `release` ends hanging answers, so a test's teardown is not held up by them."""

    def __init__(self) -> None:
        self.server: BackgroundServer | None = None
        self.died = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        if self.died.is_set():
            return
        self.died.set()
        server = self.server
        if server is not None:
            threading.Thread(target=server.stop, name="fault-die", daemon=True).start()


# -- tool server ---------------------------------------------------------------------------------------


@dataclass
class ToolFaultRule:
    """Which requests of a tool server break.

    A workspace becomes *faulty* when it is the `nth_workspace`-th one created (1-based), or when a `/step`
    request to it carries `step_contains` in its body (the call that carries it is already faulted). Requests
    to a faulty workspace's `route` (`step`, `snapshot`, `seed`, `tools`, ...) get `fault`. `route="create"`
    faults the `nth_workspace`-th `POST /workspaces` itself. With neither selector, every workspace is faulty.
    `times` caps the faults injected (None: no cap), for a fault that passes, as a retry would find.
    """

    fault: Fault
    route: str = "step"
    step_contains: str | None = None
    nth_workspace: int | None = None
    times: int | None = None


@dataclass
class FaultyToolServer:
    """ASGI wrapper around one built-in tool server app (`toolservers.app.create_app(...)`)."""

    inner: AsgiApp
    rule: ToolFaultRule
    control: FaultControl = field(default_factory=FaultControl)
    workspaces: list[str] = field(default_factory=list)
    faulty: set[str] = field(default_factory=set)
    injected: list[str] = field(default_factory=list)
    creates: int = 0

    def _track(self, workspace_id: str) -> None:
        if workspace_id not in self.workspaces:
            self.workspaces.append(workspace_id)
            if self.rule.nth_workspace == len(self.workspaces):
                self.faulty.add(workspace_id)

    def _selects_all(self) -> bool:
        return self.rule.step_contains is None and self.rule.nth_workspace is None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        path: str = scope["path"]
        if self.control.died.is_set():
            # Between "died" and the listener closing, behave like a dead process: cut every answer off.
            await inject(Fault.DIE, send)
            return
        if path.rstrip("/") == "/workspaces" and scope["method"] == "POST":
            self.creates += 1
            if self.rule.route == "create" and (self._selects_all() or self.rule.nth_workspace == self.creates):
                self.injected.append(f"create#{self.creates}")
                await inject(self.rule.fault, send, on_die=self.control, release=self.control.release)
                return
            await self.inner(scope, receive, send)
            return
        match = _WORKSPACE_PATH.match(path)
        if match is None:
            await self.inner(scope, receive, send)
            return
        workspace_id, route = match["id"], match["route"] or "workspace"
        self._track(workspace_id)
        body = await _read_body(receive)
        if route == "step" and self.rule.step_contains is not None and self.rule.step_contains in body.decode():
            self.faulty.add(workspace_id)
        spent = self.rule.times is not None and len(self.injected) >= self.rule.times
        if route == self.rule.route and not spent and (self._selects_all() or workspace_id in self.faulty):
            self.injected.append(f"{route}:{workspace_id}")
            await inject(self.rule.fault, send, on_die=self.control, release=self.control.release)
            return
        await self.inner(scope, _replay(body), send)


# -- model endpoint ------------------------------------------------------------------------------------


@dataclass
class ModelFaultRule:
    """Which chat-completion requests break: those whose task instruction (first user message) contains
    `instruction_contains` (every request if None), from that task's `from_turn`-th model call on (1-based,
    retries included), for at most `times` calls per task (None: every later call). Calls are counted per
    instruction, so the tests run each task once (rollout_count 1)."""

    fault: Fault
    instruction_contains: str | None = None
    from_turn: int = 1
    times: int | None = None


@dataclass
class FaultyModel:
    """ASGI wrapper around an OpenAI-compatible app (the simulated models). Records every request's
    Authorization header and whether it was faulted."""

    inner: AsgiApp
    rule: ModelFaultRule | None = None
    turns: dict[str, int] = field(default_factory=dict)
    faulted: dict[str, int] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    control: FaultControl = field(default_factory=FaultControl)

    @staticmethod
    def _instruction(payload: dict[str, Any]) -> str:
        for message in payload.get("messages") or []:
            if isinstance(message, dict) and message.get("role") == "user":
                return str(message.get("content") or "")
        return ""

    def _should_fault(self, instruction: str) -> bool:
        rule = self.rule
        if rule is None:
            return False
        if rule.instruction_contains is not None and rule.instruction_contains not in instruction:
            return False
        turn = self.turns[instruction]
        if turn < rule.from_turn:
            return False
        if rule.times is not None and self.faulted.get(instruction, 0) >= rule.times:
            return False
        self.faulted[instruction] = self.faulted.get(instruction, 0) + 1
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await self.inner(scope, receive, send)
            return
        body = await _read_body(receive)
        headers = dict(scope.get("headers") or [])
        payload: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            payload = json.loads(body)
        instruction = self._instruction(payload)
        self.turns[instruction] = self.turns.get(instruction, 0) + 1
        faulted = self._should_fault(instruction)
        self.requests.append(
            {
                "authorization": headers.get(b"authorization", b"").decode(),
                "instruction": instruction,
                "model": payload.get("model"),
                "has_tools": bool(payload.get("tools")),
                "faulted": faulted,
            }
        )
        if faulted:
            assert self.rule is not None
            await inject(self.rule.fault, send, on_die=self.control, release=self.control.release)
            return
        await self.inner(scope, _replay(body), send)


ToolServerFactory = Callable[[ToolFaultRule], tuple[FaultyToolServer, BackgroundServer]]
ModelFactory = Callable[[ModelFaultRule | None], tuple[FaultyModel, BackgroundServer]]
