"""A keep-alive HTTP/1.1 transport for plain-http endpoints: asyncio protocols and httptools' C parser.

A rollout makes about fourteen requests to loopback servers (its model calls and tool-server steps). Under
httpx's default transport each one passes through httpcore's pool, h11's pure-Python parser and anyio's stream
and lock wrappers, and that stack was three fifths of the runner's CPU (docs/reliability.md). This transport
serves the same requests with one protocol object per connection, the parser uvicorn uses, and an O(1) pool of
idle connections per origin. httpx stays the API and the seam: `https://` URLs (and anything else) go to the
fallback transport, which is httpx's own, and proxies from the environment keep the client's proxy mounts.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator

import httptools
import httpx

#: An idle connection older than this is closed rather than reused (httpcore's default too): a server may close
#: a kept-alive connection at any moment after its own keep-alive timeout, and a request sent on it as it does
#: is lost. Servers keep connections at least this long (uvicorn 5 s, nginx 75 s).
KEEPALIVE_EXPIRY_SECONDS = 5.0

#: Unread body beyond this pauses reading from the socket until the caller consumes it.
READ_HIGH_WATER_BYTES = 256 * 1024

#: A response whose status line and headers run past this is refused (h11's limit is 16 KiB): the parser keeps
#: them in memory, and a server that never ends its headers would otherwise grow it without bound.
MAX_HEADER_BYTES = 64 * 1024

#: An idle connection is reused up to this much less than the server's announced keep-alive timeout: the
#: margin covers a request still on its way as the server closes the connection.
KEEPALIVE_MARGIN_SECONDS = 1.0
#: The longest a server's announcement can keep an idle connection here.
MAX_KEEPALIVE_EXPIRY_SECONDS = 300.0

_Origin = tuple[str, int]


def announced_keepalive(headers: list[tuple[bytes, bytes]]) -> float | None:
    """How long to keep this connection idle by the server's `Keep-Alive: timeout=N` header, if it sent one."""
    for name, value in headers:
        if name.lower() != b"keep-alive":
            continue
        for part in value.split(b","):
            key, _, number = part.strip().partition(b"=")
            if key.strip().lower() == b"timeout" and number.strip().isdigit():
                return min(max(int(number) - KEEPALIVE_MARGIN_SECONDS, 0.0), MAX_KEEPALIVE_EXPIRY_SECONDS)
    return None


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection, one request at a time; the parser's callbacks fill the current response."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.reset_error: BaseException | None = None
        self.idle_since = 0.0
        #: how long this connection may stay idle and still be reused, when its server said (None: the default).
        self.keepalive_expiry: float | None = None
        self.in_use = False
        self._waiter: asyncio.Future[bool] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._start_response(head=False)

    def _start_response(self, *, head: bool) -> None:
        self.head = head
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.header_bytes = 0
        self.informational = False
        self.body: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.message_done = False
        self.keep_alive = False
        self.failure: str | None = None
        self.received_any = False
        self.reading_paused = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.in_use or self.message_done:
            # Bytes nobody asked for (a server talking out of turn): the connection cannot be trusted again.
            self.close()
            return
        self.received_any = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail("the server switched protocols")
        except httptools.HttpParserError as exc:
            self._fail(f"malformed HTTP response: {exc}")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reset_error = exc
        if self.in_use and not self.message_done and self.failure is None:
            if self.headers_done and self._delimited_by_close():
                self.message_done = True
            elif not self.received_any:
                self.failure = "Server disconnected without sending a response."
            else:
                self.failure = "Server disconnected before the response was complete."
        self._wake()
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    # httptools callbacks

    def on_status(self, status: bytes) -> None:
        self.reason += status
        self._count_header_bytes(len(status))

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        self._count_header_bytes(len(name) + len(value))

    def _count_header_bytes(self, size: int) -> None:
        self.header_bytes += size
        if self.header_bytes > MAX_HEADER_BYTES and self.failure is None:
            self._fail(f"the response headers ran past {MAX_HEADER_BYTES} bytes")

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            # An informational answer (103 Early Hints, an unasked-for 100 Continue) precedes the real one.
            self.informational = True
            self.headers.clear()
            self.reason = b""
            return
        self.status = status
        self.headers_done = True
        if self.head:
            # A HEAD response announces a body it does not send; the parser cannot know, so the connection ends.
            self.message_done = True
            self.close()
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > READ_HIGH_WATER_BYTES and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.informational:
            self.informational = False
            return
        # Asked here: once the parser moves on, it answers for the next message.
        self.keep_alive = self.parser.should_keep_alive()
        if self.keep_alive:
            self.keepalive_expiry = announced_keepalive(self.headers)
        self.message_done = True
        self._wake()

    # used by the transport

    def _delimited_by_close(self) -> bool:
        names = {name.lower() for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def _fail(self, message: str) -> None:
        self.failure = message
        self.close()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(True)

    def reusable(self) -> bool:
        return not self.closed and self.message_done and self.failure is None and self.keep_alive

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def take_body(self) -> bytes:
        chunk = b"".join(self.body) if len(self.body) != 1 else self.body[0]
        self.body.clear()
        self.buffered = 0
        if self.reading_paused and not self.closed and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()
        return chunk

    async def wait(self, request: httpx.Request, timeout: float | None) -> None:
        """Until the parser reports progress (or the connection ends); raise what ends the request."""
        waiter: asyncio.Future[bool] = self.loop.create_future()
        self._waiter = waiter
        timer = self.loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            progressed = await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        if not progressed:
            raise httpx.ReadTimeout(f"no data from the server within {timeout:g}s", request=request)

    def raise_failure(self, request: httpx.Request) -> None:
        if self.failure is None:
            return
        if self.reset_error is not None:
            raise httpx.ReadError(f"{self.failure} ({self.reset_error})", request=request)
        raise httpx.RemoteProtocolError(self.failure, request=request)

    async def send(self, request: httpx.Request, timeout: float | None) -> None:
        self._start_response(head=request.method == "HEAD")
        self.in_use = True
        url = request.url
        parts = [request.method.encode("ascii"), b" ", url.raw_path, b" HTTP/1.1\r\n"]
        for name, value in request.headers.raw:
            parts += (name, b": ", value, b"\r\n")
        parts.append(b"\r\n")
        try:
            content: bytes | None = request.content
        except httpx.RequestNotRead:
            content = None
        if content is not None:
            parts.append(content)
            self._write(b"".join(parts), request)
        else:
            self._write(b"".join(parts), request)
            chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
            async for chunk in request.stream:  # type: ignore[union-attr]
                if not chunk:
                    continue
                self._write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk, request)
                await self._drained(request, timeout)
            if chunked:
                self._write(b"0\r\n\r\n", request)
        await self._drained(request, timeout)

    def _write(self, data: bytes, request: httpx.Request) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            raise httpx.WriteError("the connection closed before the request was sent", request=request)
        self.transport.write(data)

    async def _drained(self, request: httpx.Request, timeout: float | None) -> None:
        if not self._writing_paused or self.closed:
            return
        self._drain = self.loop.create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._drain
        except TimeoutError:
            raise httpx.WriteTimeout(f"the request was not sent within {timeout:g}s", request=request) from None
        finally:
            self._drain = None
        if self.closed:
            raise httpx.WriteError("the connection closed while the request was sent", request=request)


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class _ResponseBody(httpx.AsyncByteStream):
    """A response's body as the connection receives it; at its end the connection goes back to the pool."""

    def __init__(
        self,
        pool: KeepAliveTransport,
        origin: _Origin,
        connection: _Connection,
        request: httpx.Request,
        read_timeout: float | None,
    ) -> None:
        self._pool = pool
        self._origin = origin
        self._connection: _Connection | None = connection
        self._request = request
        self._read_timeout = read_timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        try:
            while True:
                if connection.body:
                    yield connection.take_body()
                    continue
                if connection.message_done:
                    break
                connection.raise_failure(self._request)
                await connection.wait(self._request, self._read_timeout)
        except BaseException:
            self._finish(reuse=False)
            raise
        self._finish(reuse=True)

    def _finish(self, *, reuse: bool) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool._release(self._origin, connection, reuse=reuse)

    async def aclose(self) -> None:
        # Closed before the end of the body: what is left of it would be read as the next response.
        self._finish(reuse=False)


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """`httpx.AsyncClient(transport=KeepAliveTransport(max_connections=64, fallback=httpx.AsyncHTTPTransport()))`.

    At most `max_connections` requests are in flight at once (a request holds its connection until its body is
    read or closed); a request beyond them waits up to the request's pool timeout.
    """

    def __init__(
        self,
        *,
        max_connections: int,
        fallback: httpx.AsyncBaseTransport,
        keepalive_expiry: float = KEEPALIVE_EXPIRY_SECONDS,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self._fallback = fallback
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: dict[_Origin, list[_Connection]] = {}
        self.connections_opened = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            return await self._fallback.handle_async_request(request)
        timeouts = request.extensions.get("timeout", {})
        await self._take_slot(request, timeouts.get("pool"))
        origin = (url.host, url.port or 80)
        try:
            connection = await self._connection(origin, request, timeouts.get("connect"))
            try:
                await connection.send(request, timeouts.get("write"))
                read_timeout = timeouts.get("read")
                while not connection.headers_done:
                    connection.raise_failure(request)
                    await connection.wait(request, read_timeout)
            except BaseException:
                # Cancelled or failed mid-exchange: the connection's state is unknown, so it is not reused.
                connection.close()
                raise
        except BaseException:
            self._slots.release()
            raise
        if connection.message_done and connection.failure is None:
            # The whole answer came with its headers (a small one mostly does): the connection goes back to the
            # pool now and the body is handed over as it is, without a stream to drain it chunk by chunk.
            response = httpx.Response(
                status_code=connection.status,
                headers=connection.headers,
                stream=httpx.ByteStream(connection.take_body()),
                extensions={"http_version": b"HTTP/1.1", "reason_phrase": connection.reason},
            )
            self._release(origin, connection, reuse=True)
            return response
        return httpx.Response(
            status_code=connection.status,
            headers=connection.headers,
            stream=_ResponseBody(self, origin, connection, request, read_timeout),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": connection.reason},
        )

    async def _take_slot(self, request: httpx.Request, timeout: float | None) -> None:
        if not self._slots.locked():
            await self._slots.acquire()
            return
        try:
            async with asyncio.timeout(timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout(f"no connection free within {timeout:g}s", request=request) from None

    async def _connection(self, origin: _Origin, request: httpx.Request, timeout: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.loop is not loop:
                continue  # left by an event loop that has ended: its socket went with it
            expiry = self.keepalive_expiry if connection.keepalive_expiry is None else connection.keepalive_expiry
            if connection.closed or now - connection.idle_since > expiry:
                connection.close()
                continue
            return connection
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(lambda: _Connection(loop), origin[0], origin[1])
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection within {timeout:g}s", request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        self.connections_opened += 1
        return connection

    def _release(self, origin: _Origin, connection: _Connection, *, reuse: bool) -> None:
        connection.in_use = False
        if reuse and connection.reusable():
            connection.idle_since = time.monotonic()
            self._idle.setdefault(origin, []).append(connection)
        else:
            connection.close()
        self._slots.release()

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                with contextlib.suppress(RuntimeError):  # its event loop has ended
                    connection.close()
        self._idle.clear()
        await self._fallback.aclose()


__all__ = ["KEEPALIVE_EXPIRY_SECONDS", "KeepAliveTransport"]
