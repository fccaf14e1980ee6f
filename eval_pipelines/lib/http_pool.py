"""The httpx client of the hot paths: model calls and tool-server steps, many rollouts' worth at once.

Plain-http endpoints (the loopback tool servers and simulated models, a local vLLM or Ollama) go through
`KeepAliveTransport` (lib/http_transport.py). Everything else, TLS first of all, goes through httpx's own
transport, split into shards of a few connections: httpcore looks at every connection of a pool (expired?
closed by the peer?) whenever it assigns a request or releases a connection, so one pool shared by N
concurrent rollouts costs O(N) per request, and at a sweep's concurrency (50-200) that scan was the largest
CPU cost of a rollout. Shards of a few connections each keep it constant.
"""

from __future__ import annotations

import functools
import itertools
import math
import ssl
from typing import Any

import httpx

from eval_pipelines.lib.http_transport import KeepAliveTransport

#: Connections each shard of httpx's transport keeps: the per-request scan visits every connection of the
#: shard, so the fewer the cheaper; round-robin over the shards keeps each one's few connections warm.
CONNECTIONS_PER_SHARD = 2


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


class _SetCookies(httpx.Cookies):
    """httpx's cookie jar, asked about a response only when it sets a cookie: httpx otherwise wraps every
    response and its request in urllib objects to find none (a visible share of a request's client CPU)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers:
            super().extract_cookies(response)


class PooledAsyncClient(httpx.AsyncClient):
    """httpx's client with `_SetCookies` as its jar; cookies behave as they do in httpx."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cookies = self.cookies

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
