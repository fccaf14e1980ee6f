"""Several small httpx connection pools in place of one large one.

httpcore looks at every connection of a pool (expired? closed by the peer?) whenever it assigns a request or
releases a connection, one socket check per connection. A single pool shared by N concurrent rollouts
therefore costs O(N) per request, and at a sweep's concurrency (50-200) that scan was the largest CPU cost
of a rollout. Shards of a few connections each keep it constant; callers take the next shard per request
(or per rollout, for a sequence of requests).
"""

from __future__ import annotations

import functools
import itertools
import math
import ssl

import httpx

#: Connections each shard keeps: the per-request scan visits every connection of the shard, so the fewer the
#: cheaper; round-robin over the shards keeps each one's few connections warm.
CONNECTIONS_PER_SHARD = 2


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once: building one costs milliseconds of CPU per client."""
    return httpx.create_ssl_context()


class ShardedAsyncClient:
    """`pool = ShardedAsyncClient(100, timeout=10.0); await pool.next().get(url); await pool.aclose()`.

    `max_connections` is spread over the shards. Each shard may open twice its share, so an uneven spread
    of slow requests queues nowhere: the caller's own bound (a semaphore, a limiter) caps what is in flight.
    """

    def __init__(
        self,
        max_connections: int,
        *,
        timeout: httpx.Timeout | float,
        connections_per_shard: int = CONNECTIONS_PER_SHARD,
    ) -> None:
        if max_connections < 1 or connections_per_shard < 1:
            raise ValueError("max_connections and connections_per_shard must be at least 1")
        count = math.ceil(max_connections / connections_per_shard)
        share = math.ceil(max_connections / count)
        limits = httpx.Limits(max_connections=2 * share, max_keepalive_connections=share)
        self.shards = [
            httpx.AsyncClient(timeout=timeout, limits=limits, verify=default_ssl_context()) for _ in range(count)
        ]
        self._cycle = itertools.cycle(self.shards)

    def next(self) -> httpx.AsyncClient:
        return next(self._cycle)

    async def aclose(self) -> None:
        for shard in self.shards:
            await shard.aclose()
