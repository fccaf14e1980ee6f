"""The httpx client of the hot paths: model calls and tool-server steps, many rollouts' worth at once.

Plain-http endpoints (the loopback tool servers and simulated models, a local vLLM or Ollama) go through
`KeepAliveTransport` (lib/http_transport.py). Everything else, TLS first of all, goes through httpx's own
transport, split into shards of a few connections: httpcore looks at every connection of a pool (expired?
closed by the peer?) whenever it assigns a request or releases a connection, so one pool shared by N
concurrent rollouts costs O(N) per request, and at a sweep's concurrency (50-200) that scan was the largest
CPU cost of a rollout. Shards of a few connections each keep it constant.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import math
import ssl
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx._client import USE_CLIENT_DEFAULT, BoundAsyncStream, ClientState, UseClientDefault

from eval_pipelines.lib.http_transport import KeepAliveTransport

#: Connections each shard of httpx's transport keeps: the per-request scan visits every connection of the
#: shard, so the fewer the cheaper; round-robin over the shards keeps each one's few connections warm.
CONNECTIONS_PER_SHARD = 2

#: Parsed request URLs a pooled client keeps (a few per rollout in flight).
MERGED_URLS_KEPT = 4096


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once: building one costs milliseconds of CPU per client."""
    return httpx.create_ssl_context()


class ShardedTransport(httpx.AsyncBaseTransport):
    """httpx's transport as several small pools, a request to each in turn.

    `max_connections` is spread over the shards. Each shard may open twice its share, so an uneven spread of
    slow requests queues nowhere: the caller's own bound (a semaphore, a limiter) caps what is in flight.
    """

    def __init__(self, max_connections: int, *, connections_per_shard: int = CONNECTIONS_PER_SHARD) -> None:
        if max_connections < 1 or connections_per_shard < 1:
            raise ValueError("max_connections and connections_per_shard must be at least 1")
        count = math.ceil(max_connections / connections_per_shard)
        share = math.ceil(max_connections / count)
        limits = httpx.Limits(max_connections=2 * share, max_keepalive_connections=share)
        self.shards = [httpx.AsyncHTTPTransport(verify=default_ssl_context(), limits=limits) for _ in range(count)]
        self._cycle = itertools.cycle(self.shards)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await next(self._cycle).handle_async_request(request)

    async def aclose(self) -> None:
        for shard in self.shards:
            await shard.aclose()


class _TimedStream(httpx.AsyncByteStream):
    """httpx's `BoundAsyncStream` (sets `response.elapsed` when the body is closed) without its reference cycle:
    that stream holds its response and the response holds it, so every response of every request was garbage only
    the cyclic collector could free, a dozen objects each, and with hundreds of rollouts in flight each of its
    collections also walked every rollout's live objects. A weak reference to the response breaks the cycle."""

    __slots__ = ("_response", "_start", "_stream")

    def __init__(self, stream: httpx.AsyncByteStream, response: httpx.Response, start: float) -> None:
        self._stream = stream
        self._response = weakref.ref(response)
        self._start = start

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        response = self._response()
        if response is not None:
            response.elapsed = datetime.timedelta(seconds=time.perf_counter() - self._start)
        await self._stream.aclose()


class _SetCookies(httpx.Cookies):
    """httpx's cookie jar, asked about a response only when it sets a cookie: httpx otherwise wraps every
    response and its request in urllib objects to find none (a visible share of a request's client CPU)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers:
            super().extract_cookies(response)


class PooledAsyncClient(httpx.AsyncClient):
    """httpx's client with `_SetCookies` as its jar; cookies behave as they do in httpx.

    A request with nothing for httpx's auth flow and redirect loop to do (no auth, redirects not followed, no
    event hooks: every request of the hot paths) skips both and goes straight to the transport: those two
    layers, an async generator and a loop around every request, cost a visible share of a rollout's client CPU.
    The response is what httpx's own `send` gives (history, `next_request` of a redirect, cookies, timeout).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cookies = self.cookies
        self._merged_urls: dict[str, httpx.URL] = {}
        self._merged_base = self._base_url

    def _merge_url(self, url: httpx.URL | str) -> httpx.URL:
        # A rollout asks the same few URLs again and again (its model endpoint, its workspace's step route), and
        # parsing a URL was the largest part of building a request. httpx URLs are immutable, so one can be
        # handed out twice. The cache is emptied when full rather than kept in order: it refills in a few calls.
        if not isinstance(url, str):
            return super()._merge_url(url)
        if self._merged_base is not self._base_url:  # merged with another base URL
            self._merged_urls.clear()
            self._merged_base = self._base_url
        merged = self._merged_urls.get(url)
        if merged is None:
            merged = super()._merge_url(url)
            if len(self._merged_urls) >= MERGED_URLS_KEPT:
                self._merged_urls.clear()
            self._merged_urls[url] = merged
        return merged

    async def send(
        self,
        request: httpx.Request,
        *,
        stream: bool = False,
        auth: httpx._types.AuthTypes | UseClientDefault | None = USE_CLIENT_DEFAULT,
        follow_redirects: bool | UseClientDefault = USE_CLIENT_DEFAULT,
    ) -> httpx.Response:
        follows = self.follow_redirects if isinstance(follow_redirects, UseClientDefault) else follow_redirects
        if (
            follows
            or not isinstance(auth, UseClientDefault)
            or self._auth is not None
            or request.url.userinfo  # httpx makes basic auth of it
            or self._event_hooks["request"]
            or self._event_hooks["response"]
            or self._state == ClientState.CLOSED
        ):
            return await super().send(request, stream=stream, auth=auth, follow_redirects=follow_redirects)
        self._state = ClientState.OPENED
        self._set_timeout(request)
        response = await self._send_single_request(request)
        try:
            response.history = []
            if response.has_redirect_location:
                response.next_request = self._build_redirect_request(request, response)
            if not stream:
                await response.aread()
            return response
        except BaseException:
            await response.aclose()
            raise

    async def _send_single_request(self, request: httpx.Request) -> httpx.Response:
        response = await super()._send_single_request(request)
        bound = response.stream
        if isinstance(bound, BoundAsyncStream):
            response.stream = _TimedStream(bound._stream, response, bound._start)
        return response

    @property
    def cookies(self) -> httpx.Cookies:
        return self._cookies

    @cookies.setter
    def cookies(self, cookies: httpx._types.CookieTypes) -> None:
        self._cookies = _SetCookies(cookies)


def pooled_client(max_connections: int, *, timeout: httpx.Timeout | float) -> httpx.AsyncClient:
    """`client = pooled_client(100, timeout=10.0); await client.get(url); await client.aclose()`.

    At most `max_connections` plain-http requests are in flight at once; the caller's own bound should be no
    larger. Proxies named by the environment still apply: httpx mounts its own transports for them.
    """
    if max_connections < 1:
        raise ValueError("max_connections must be at least 1")
    transport = KeepAliveTransport(max_connections=max_connections, fallback=ShardedTransport(max_connections))
    return PooledAsyncClient(timeout=timeout, verify=default_ssl_context(), transport=transport)
