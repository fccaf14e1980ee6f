"""KeepAliveTransport against real servers: uvicorn for well-behaved HTTP, raw sockets for the ill-behaved."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from eval_pipelines.lib.http_transport import (
    KEEPALIVE_MARGIN_SECONDS,
    MAX_KEEPALIVE_EXPIRY_SECONDS,
    READ_HIGH_WATER_BYTES,
    KeepAliveTransport,
    announced_keepalive,
)
from eval_pipelines.lib.serving import KEEP_ALIVE_SECONDS, BackgroundServer, free_port


class CountingFallback(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.urls: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        return httpx.Response(299, content=b"fallback")


def _app() -> FastAPI:
    app = FastAPI()
    peers: set[str] = set()

    @app.post("/echo")
    async def echo(request: Request) -> Response:
        body = await request.body()
        headers = {"x-method": request.method, "x-query": request.url.query}
        return Response(body, headers=headers, media_type="application/octet-stream")

    @app.get("/peers")
    async def seen(request: Request) -> dict[str, int]:
        assert request.client is not None
        peers.add(f"{request.client.host}:{request.client.port}")
        return {"peers": len(peers)}

    @app.get("/stream")
    async def stream(parts: int = 3, size: int = 10) -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            for index in range(parts):
                yield bytes([65 + index % 26]) * size
                await asyncio.sleep(0.01)

        return StreamingResponse(chunks(), media_type="application/octet-stream")

    @app.get("/brief")
    async def brief() -> PlainTextResponse:
        return PlainTextResponse("soon", headers={"keep-alive": "timeout=1"})

    @app.get("/close")
    async def close() -> PlainTextResponse:
        return PlainTextResponse("bye", headers={"connection": "close"})

    @app.get("/slow")
    async def slow(seconds: float) -> dict[str, bool]:
        await asyncio.sleep(seconds)
        return {"slept": True}

    @app.get("/gzip")
    async def gzipped() -> Response:
        return Response(gzip.compress(b"squeezed" * 100), headers={"content-encoding": "gzip"})

    @app.head("/head")
    async def head() -> Response:
        return Response(headers={"content-length": "1000"})

    return app


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(_app()) as running:
        yield running


def _client(max_connections: int = 8, fallback: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    transport = KeepAliveTransport(max_connections=max_connections, fallback=fallback or CountingFallback())
    return httpx.AsyncClient(transport=transport, timeout=5.0)


def _transport(client: httpx.AsyncClient) -> KeepAliveTransport:
    transport = client._transport
    assert isinstance(transport, KeepAliveTransport)
    return transport


async def test_a_body_goes_out_and_comes_back_byte_for_byte(server: BackgroundServer) -> None:
    payload = bytes(range(256)) * 40
    async with _client() as client:
        response = await client.post(f"{server.url}/echo?a=1&b=%20", content=payload)
    assert response.status_code == 200
    assert response.content == payload
    assert response.headers["x-method"] == "POST"
    assert response.headers["x-query"] == "a=1&b=%20"
    assert response.http_version == "HTTP/1.1"
    assert response.reason_phrase == "OK"


async def test_a_streamed_request_body_is_sent_chunked(server: BackgroundServer) -> None:
    async def parts() -> AsyncIterator[bytes]:
        for part in (b"one,", b"", b"two,", b"three"):
            yield part

    async with _client() as client:
        response = await client.post(f"{server.url}/echo", content=parts())
    assert response.content == b"one,two,three"


async def test_a_response_that_came_whole_frees_its_connection_before_its_body_is_read(
    server: BackgroundServer,
) -> None:
    async with _client(max_connections=1) as client:
        transport = _transport(client)
        first = await client.send(client.build_request("GET", f"{server.url}/peers"), stream=True)
        # Unread, yet its connection is back in the pool: a second request gets it instead of waiting.
        second = await asyncio.wait_for(client.get(f"{server.url}/peers"), timeout=2)
        body = await first.aread()
        await first.aclose()
    assert body == b'{"peers":1}'
    assert second.json() == {"peers": 1}
    assert transport.connections_opened == 1


async def test_a_body_still_arriving_after_the_headers_is_streamed(server: BackgroundServer) -> None:
    async with _client(max_connections=1) as client:
        transport = _transport(client)
        async with client.stream("GET", f"{server.url}/stream?parts=3&size=4") as response:
            # The connection stays with the response until its body is read out.
            assert transport._slots.locked()
            chunks = [chunk async for chunk in response.aiter_bytes()]
        assert not transport._slots.locked()
    assert b"".join(chunks) == b"AAAABBBBCCCC"


async def test_sequential_requests_share_one_connection(server: BackgroundServer) -> None:
    async with _client() as client:
        counts = [(await client.get(f"{server.url}/peers")).json()["peers"] for _ in range(5)]
        opened = _transport(client).connections_opened
    assert opened == 1
    assert len(set(counts)) == 1


async def test_concurrent_requests_open_connections_up_to_the_limit_and_queue_beyond_it(
    server: BackgroundServer,
) -> None:
    async with _client(max_connections=3) as client:
        responses = await asyncio.gather(*(client.get(f"{server.url}/slow?seconds=0.1") for _ in range(9)))
        assert [r.json() for r in responses] == [{"slept": True}] * 9
        assert _transport(client).connections_opened == 3


async def test_a_request_waiting_past_the_pool_timeout_gets_pool_timeout(server: BackgroundServer) -> None:
    async with _client(max_connections=1) as client:
        busy = asyncio.create_task(client.get(f"{server.url}/slow?seconds=1"))
        await asyncio.sleep(0.1)
        with pytest.raises(httpx.PoolTimeout):
            await client.get(f"{server.url}/peers", timeout=httpx.Timeout(5.0, pool=0.1))
        assert (await busy).status_code == 200
        # The slot the timed-out request waited for was never taken: the next request still goes through.
        assert (await client.get(f"{server.url}/peers")).status_code == 200


async def test_a_chunked_response_streams_in_order(server: BackgroundServer) -> None:
    async with _client() as client, client.stream("GET", f"{server.url}/stream?parts=5&size=3") as response:
        received = [chunk async for chunk in response.aiter_raw()]
    assert b"".join(received) == b"AAABBBCCCDDDEEE"
    assert len(received) > 1


async def test_a_large_response_pauses_reading_and_arrives_whole(server: BackgroundServer) -> None:
    size = READ_HIGH_WATER_BYTES
    async with _client() as client:
        async with client.stream("GET", f"{server.url}/stream?parts=8&size={size}") as response:
            await asyncio.sleep(0.3)  # the server writes far more than the high-water mark meanwhile
            body = b"".join([chunk async for chunk in response.aiter_raw()])
        assert len(body) == 8 * size
        assert body[:size] == b"A" * size and body[-size:] == b"H" * size
        # Fully read, so the connection is reused.
        assert (await client.get(f"{server.url}/peers")).status_code == 200
        assert _transport(client).connections_opened == 1


async def test_content_encoding_is_decoded_by_httpx(server: BackgroundServer) -> None:
    async with _client() as client:
        response = await client.get(f"{server.url}/gzip")
    assert response.content == b"squeezed" * 100


async def test_connection_close_is_honoured(server: BackgroundServer) -> None:
    async with _client() as client:
        assert (await client.get(f"{server.url}/close")).text == "bye"
        assert (await client.get(f"{server.url}/close")).text == "bye"
        assert _transport(client).connections_opened == 2


async def test_a_head_response_ends_at_its_headers(server: BackgroundServer) -> None:
    async with _client() as client:
        response = await client.head(f"{server.url}/head")
        assert response.status_code == 200 and response.content == b""
        assert (await client.get(f"{server.url}/peers")).status_code == 200


async def test_a_response_closed_unread_does_not_poison_the_next(server: BackgroundServer) -> None:
    async with _client() as client:
        async with client.stream("GET", f"{server.url}/stream?parts=50&size=5") as response:
            async for _ in response.aiter_raw():
                break  # left mid-body
        response = await client.post(f"{server.url}/echo", content=b"after")
        assert response.content == b"after"


async def test_a_cancelled_request_leaves_the_pool_usable(server: BackgroundServer) -> None:
    async with _client(max_connections=1) as client:
        task = asyncio.create_task(client.get(f"{server.url}/slow?seconds=2"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        response = await client.post(f"{server.url}/echo", content=b"fresh")
        assert response.content == b"fresh"
        assert _transport(client).connections_opened == 2


async def test_read_timeout(server: BackgroundServer) -> None:
    async with _client() as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(f"{server.url}/slow?seconds=1", timeout=0.2)
        assert (await client.get(f"{server.url}/peers")).status_code == 200


async def test_a_dead_port_is_a_connect_error() -> None:
    async with _client() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{free_port()}/")


async def test_an_idle_connection_past_the_server_s_announced_keep_alive_is_replaced(server: BackgroundServer) -> None:
    # The route's own `Keep-Alive: timeout=1` comes before the one our servers add: 1 s less the margin is 0.
    transport = KeepAliveTransport(max_connections=2, fallback=CountingFallback(), keepalive_expiry=60.0)
    async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
        await client.get(f"{server.url}/brief")
        await asyncio.sleep(0.1)
        await client.get(f"{server.url}/brief")
    assert transport.connections_opened == 2


async def test_our_servers_announce_their_keep_alive_and_it_outlasts_the_default_expiry(
    server: BackgroundServer,
) -> None:
    transport = KeepAliveTransport(max_connections=2, fallback=CountingFallback(), keepalive_expiry=0.05)
    async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
        first = await client.get(f"{server.url}/peers")
        await asyncio.sleep(0.1)
        await client.get(f"{server.url}/peers")
    assert first.headers["keep-alive"] == f"timeout={KEEP_ALIVE_SECONDS}"
    assert transport.connections_opened == 1


def test_a_keep_alive_announcement_is_read_with_its_margin_and_bounds() -> None:
    assert announced_keepalive([(b"Keep-Alive", b"timeout=30, max=100")]) == 30 - KEEPALIVE_MARGIN_SECONDS
    assert announced_keepalive([(b"keep-alive", b"max=5")]) is None
    assert announced_keepalive([(b"content-type", b"text/plain")]) is None
    assert announced_keepalive([(b"keep-alive", b"timeout=0")]) == 0.0
    assert announced_keepalive([(b"keep-alive", b"timeout=99999")]) == MAX_KEEPALIVE_EXPIRY_SECONDS


async def test_an_idle_connection_past_the_default_expiry_is_replaced_when_nothing_was_announced() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.readuntil(b"\r\n\r\n"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    transport = KeepAliveTransport(max_connections=2, fallback=CountingFallback(), keepalive_expiry=0.05)
    try:
        async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
            await client.get(f"http://127.0.0.1:{port}/")
            await client.get(f"http://127.0.0.1:{port}/")  # within the expiry: the same connection
            await asyncio.sleep(0.1)
            await client.get(f"http://127.0.0.1:{port}/")
    finally:
        listener.close()
    assert transport.connections_opened == 2


async def test_other_schemes_go_to_the_fallback() -> None:
    fallback = CountingFallback()
    async with _client(fallback=fallback) as client:
        response = await client.get("https://example.invalid/x")
    assert response.status_code == 299
    assert fallback.urls == ["https://example.invalid/x"]


# Raw servers: what uvicorn never sends.

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _raw_server(handler: Handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


async def _read_request(reader: asyncio.StreamReader) -> None:
    await reader.readuntil(b"\r\n\r\n")


async def test_a_server_that_hangs_up_without_answering_is_a_protocol_error() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.close()

    server, url = await _raw_server(hang_up)
    async with server, _client() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await client.get(url)


async def test_a_body_cut_short_is_a_protocol_error() -> None:
    async def cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this")
        await writer.drain()
        writer.close()

    server, url = await _raw_server(cut_short)
    async with server, _client() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="before the response was complete"):
            await client.get(url)


async def test_garbage_is_a_protocol_error_and_the_connection_is_dropped() -> None:
    calls = 0

    async def garbage_then_good(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        await _read_request(reader)
        if calls == 1:
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        await reader.read()
        writer.close()

    server, url = await _raw_server(garbage_then_good)
    async with server, _client() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
            await client.get(url)
        assert (await client.get(url)).text == "ok"


async def test_a_body_delimited_by_the_close_of_the_connection_is_read_whole() -> None:
    async def old_style(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end")
        await writer.drain()
        writer.close()

    server, url = await _raw_server(old_style)
    async with server, _client() as client:
        assert (await client.get(url)).text == "until the end"


async def test_bytes_sent_out_of_turn_retire_the_connection() -> None:
    async def chatty(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstale")
            await writer.drain()
        writer.close()

    server, url = await _raw_server(chatty)
    async with server, _client() as client:
        assert (await client.get(url)).text == "ok"
        await asyncio.sleep(0.2)
        assert (await client.get(url)).text == "ok"  # not the stale answer queued on the first connection
        assert _transport(client).connections_opened == 2


def test_a_pool_needs_at_least_one_connection() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        KeepAliveTransport(max_connections=0, fallback=CountingFallback())


async def test_an_informational_answer_before_the_real_one_is_skipped() -> None:
    async def early_hints(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            await _read_request(reader)
            writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\nx-final: yes\r\n\r\nreal")
            await writer.drain()
        writer.close()

    server, url = await _raw_server(early_hints)
    async with server, _client() as client:
        for _ in range(2):  # the same connection, twice: the parser is where the next answer starts
            response = await client.get(url)
            assert (response.status_code, response.text) == (200, "real")
            assert "link" not in response.headers and response.headers["x-final"] == "yes"
        assert _transport(client).connections_opened == 1


async def test_headers_that_never_end_are_refused_and_the_connection_dropped() -> None:
    async def endless_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n")
        with contextlib.suppress(ConnectionError):
            for index in range(10_000):
                writer.write(b"x-filler-%d: %b\r\n" % (index, b"a" * 100))
                await writer.drain()
        writer.close()

    server, url = await _raw_server(endless_headers)
    async with server, _client() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="headers ran past"):
            await client.get(url)
