"""pooled_client: plain http on the keep-alive transport, everything else on sharded httpx pools."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from eval_pipelines.lib.http_pool import CONNECTIONS_PER_SHARD, ShardedTransport, default_ssl_context, pooled_client
from eval_pipelines.lib.http_transport import KeepAliveTransport
from eval_pipelines.lib.serving import BackgroundServer, free_port


@pytest.fixture(scope="module")
def echo() -> Iterator[BackgroundServer]:
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict[str, str]:
        return {"ok": "yes"}

    with BackgroundServer(app) as server:
        yield server


def test_connections_are_spread_over_shards() -> None:
    assert len(ShardedTransport(100, connections_per_shard=8).shards) == 13
    assert len(ShardedTransport(2).shards) == 1
    assert len(ShardedTransport(100).shards) == 100 // CONNECTIONS_PER_SHARD


async def test_the_shards_take_requests_in_turn() -> None:
    transport = ShardedTransport(6, connections_per_shard=2)
    seen: list[int] = []
    for index, shard in enumerate(transport.shards):

        async def handle(request: httpx.Request, index: int = index) -> httpx.Response:
            seen.append(index)
            return httpx.Response(200)

        shard.handle_async_request = handle  # type: ignore[method-assign]
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(6):
            await client.get("https://example.invalid/")
    assert seen == [0, 1, 2, 0, 1, 2]


async def test_plain_http_goes_through_the_keep_alive_transport(echo: BackgroundServer) -> None:
    client = pooled_client(4, timeout=5.0)
    try:
        assert isinstance(client._transport, KeepAliveTransport)
        for _ in range(3):
            assert (await client.get(f"{echo.url}/ping")).json() == {"ok": "yes"}
        assert client._transport.connections_opened == 1
    finally:
        await client.aclose()
    assert client.is_closed


def test_every_shard_shares_one_ssl_context() -> None:
    assert default_ssl_context() is default_ssl_context()


@pytest.mark.parametrize(("connections", "per_shard"), [(0, 8), (8, 0)])
def test_bad_sizes_are_refused(connections: int, per_shard: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ShardedTransport(connections, connections_per_shard=per_shard)
    with pytest.raises(ValueError, match="at least 1"):
        pooled_client(0, timeout=1.0)


async def test_a_request_to_a_dead_port_raises_the_usual_httpx_error() -> None:
    client = pooled_client(4, timeout=2.0)
    try:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{free_port()}/")
    finally:
        await client.aclose()


async def test_cookies_a_server_sets_are_kept_and_sent_back() -> None:
    async def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/login":
            return httpx.Response(200, headers={"set-cookie": "session=abc; Path=/"})
        return httpx.Response(200, text=request.headers.get("cookie", "<none>"))

    client = pooled_client(2, timeout=1.0)
    client._transport = httpx.MockTransport(handle)
    try:
        assert (await client.get("http://gateway.test/plain")).text == "<none>"
        assert len(client.cookies) == 0
        await client.get("http://gateway.test/login")
        assert client.cookies["session"] == "abc"
        assert (await client.get("http://gateway.test/again")).text == "session=abc"
        client.cookies = {"other": "1"}
        assert (await client.get("http://gateway.test/again")).text == "other=1"
    finally:
        await client.aclose()


def _echo_client(**kwargs: object) -> httpx.AsyncClient:
    """A pooled client whose transport answers /moved with a redirect to /target and echoes the rest."""

    async def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/moved":
            return httpx.Response(302, headers={"location": "/target"})
        return httpx.Response(200, json={"path": request.url.path, "auth": request.headers.get("authorization")})

    client = pooled_client(2, timeout=1.0)
    client._transport = httpx.MockTransport(handle)
    for name, value in kwargs.items():
        setattr(client, name, value)
    return client


async def test_a_redirect_is_not_followed_and_names_its_next_request() -> None:
    client = _echo_client()
    try:
        response = await client.get("http://gateway.test/moved")
        assert response.status_code == 302
        assert response.history == []
        assert response.next_request is not None and response.next_request.url.path == "/target"
        followed = await client.get("http://gateway.test/moved", follow_redirects=True)
        assert followed.json()["path"] == "/target"
        assert [r.status_code for r in followed.history] == [302]
    finally:
        await client.aclose()


async def test_auth_given_anywhere_is_still_sent() -> None:
    client = _echo_client()
    try:
        plain = await client.get("http://gateway.test/plain")
        assert plain.json() == {"path": "/plain", "auth": None}
        assert (await client.get("http://gateway.test/a", auth=("u", "p"))).json()["auth"].startswith("Basic ")
        assert (await client.get("http://u:p@gateway.test/a")).json()["auth"].startswith("Basic ")
        client.auth = ("client", "secret")
        assert (await client.get("http://gateway.test/a")).json()["auth"].startswith("Basic ")
    finally:
        await client.aclose()


async def test_event_hooks_still_run_and_a_closed_client_refuses() -> None:
    seen: list[str] = []

    async def on_request(request: httpx.Request) -> None:
        seen.append(f"request {request.url.path}")

    async def on_response(response: httpx.Response) -> None:
        seen.append(f"response {response.status_code}")

    client = _echo_client(event_hooks={"request": [on_request], "response": [on_response]})
    await client.get("http://gateway.test/hooked")
    assert seen == ["request /hooked", "response 200"]
    await client.aclose()
    with pytest.raises(RuntimeError):
        await client.get("http://gateway.test/late")


async def test_a_streamed_response_is_left_unread_and_a_plain_one_read(echo: BackgroundServer) -> None:
    client = pooled_client(2, timeout=5.0)
    try:
        streamed = await client.send(client.build_request("GET", f"{echo.url}/ping"), stream=True)
        assert not streamed.is_stream_consumed
        assert (await streamed.aread()) and streamed.json() == {"ok": "yes"}
        await streamed.aclose()
        read = await client.send(client.build_request("GET", f"{echo.url}/ping"))
        assert read.is_stream_consumed and read.json() == {"ok": "yes"}
    finally:
        await client.aclose()


async def test_request_urls_are_parsed_once_and_follow_the_base_url(
    echo: BackgroundServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipelines.lib import http_pool

    client = pooled_client(4, timeout=5.0)
    assert isinstance(client, http_pool.PooledAsyncClient)
    try:
        url = f"{echo.url}/ping?x=1"
        first = client.build_request("GET", url).url
        again = client.build_request("GET", url).url
        assert first == httpx.URL(url) and again == first
        assert client._merged_urls[url] is client._merge_url(url)
        assert (await client.get(url)).json() == {"ok": "yes"}

        client.base_url = httpx.URL(f"{echo.url}/api/")
        assert client.build_request("GET", "ping").url == httpx.URL(f"{echo.url}/api/ping")
        client.base_url = httpx.URL(f"{echo.url}/other/")
        assert client.build_request("GET", "ping").url == httpx.URL(f"{echo.url}/other/ping")

        monkeypatch.setattr(http_pool, "MERGED_URLS_KEPT", 3)
        for i in range(10):
            assert client.build_request("GET", f"/p{i}").url == httpx.URL(f"{echo.url}/other/p{i}")
        assert len(client._merged_urls) <= 3
    finally:
        await client.aclose()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_response_is_freed_without_the_cyclic_collector_and_still_says_how_long_it_took(
    echo: BackgroundServer, stream: bool
) -> None:
    client = pooled_client(4, timeout=5.0)
    gc.collect()
    gc.disable()
    try:
        response = await client.send(client.build_request("GET", f"{echo.url}/ping"), stream=stream)
        if stream:
            await response.aread()
            await response.aclose()
        assert response.json() == {"ok": "yes"}
        assert response.elapsed.total_seconds() > 0
        freed = weakref.ref(response)
        del response
        # Reference counting alone frees it: no cycle holds it until a collection.
        assert freed() is None
    finally:
        gc.enable()
        await client.aclose()
