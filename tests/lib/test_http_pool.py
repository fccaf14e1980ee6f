"""ShardedAsyncClient: small connection pools in place of one large one, all usable over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from eval_pipelines.lib.http_pool import CONNECTIONS_PER_SHARD, ShardedAsyncClient, default_ssl_context
from eval_pipelines.lib.serving import BackgroundServer


@pytest.fixture(scope="module")
def echo() -> Iterator[BackgroundServer]:
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict[str, str]:
        return {"ok": "yes"}

    with BackgroundServer(app) as server:
        yield server


def test_connections_are_spread_over_shards() -> None:
    pool = ShardedAsyncClient(100, timeout=5.0, connections_per_shard=8)
    assert len(pool.shards) == 13
    one = ShardedAsyncClient(2, timeout=5.0)
    assert len(one.shards) == 1
    assert len(ShardedAsyncClient(100, timeout=5.0).shards) == 100 // CONNECTIONS_PER_SHARD


async def test_next_cycles_through_every_shard(echo: BackgroundServer) -> None:
    pool = ShardedAsyncClient(24, timeout=5.0, connections_per_shard=8)
    try:
        picked = [pool.next() for _ in range(6)]
        assert picked[:3] == pool.shards and picked[3:] == pool.shards
        for client in picked:
            response = await client.get(f"{echo.url}/ping")
            assert response.json() == {"ok": "yes"}
    finally:
        await pool.aclose()
    assert all(shard.is_closed for shard in pool.shards)


def test_every_shard_shares_one_ssl_context() -> None:
    assert default_ssl_context() is default_ssl_context()


@pytest.mark.parametrize(("connections", "per_shard"), [(0, 8), (8, 0)])
def test_bad_sizes_are_refused(connections: int, per_shard: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ShardedAsyncClient(connections, timeout=1.0, connections_per_shard=per_shard)


async def test_a_request_to_a_dead_port_raises_the_usual_httpx_error() -> None:
    from eval_pipelines.lib.serving import free_port

    pool = ShardedAsyncClient(4, timeout=2.0)
    try:
        with pytest.raises(httpx.ConnectError):
            await pool.next().get(f"http://127.0.0.1:{free_port()}/")
    finally:
        await pool.aclose()
