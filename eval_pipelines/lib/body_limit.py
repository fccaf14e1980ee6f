"""An ASGI middleware that refuses request bodies over a size limit with 413 and a JSON `detail`, before the
application reads them: a declared Content-Length over the limit is refused at once, and a chunked body is
counted as it arrives, so a 50 MB field never reaches a parser, a store or memory whole."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyLimit:
    """`BodyLimit(app, max_bytes, larger=[("/upload", 64 << 20)])`: the first prefix a request path starts with
    sets its limit; every other request gets `max_bytes`."""

    def __init__(self, app: App, max_bytes: int, larger: Sequence[tuple[str, int]] = ()) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.larger = tuple(larger)

    def limit_for(self, path: str) -> int:
        return next((limit for prefix, limit in self.larger if path.startswith(prefix)), self.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(str(scope.get("path", "")))
        declared = next((v for k, v in scope.get("headers", []) if k.lower() == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _refuse(send, limit)
            return
        if declared is not None:
            await self.app(scope, receive, send)  # the server stops reading at the declared length
            return
        # No declared length (chunked): read up to the limit here, so the application never sees more (frameworks
        # turn an error raised while they read into a 4xx of their own).
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            received += len(chunks[-1])
            if received > limit:
                await _refuse(send, limit)
                return
            if not message.get("more_body"):
                break
        await self.app(scope, replay_body(b"".join(chunks), receive), send)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the application `body`, already read, as the whole request, then defers to
    `receive` (a disconnect, say)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _refuse(send: Send, limit: int) -> None:
    body = json.dumps({"detail": f"request body larger than {limit} bytes"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
