"""The adaptive limiter: on its own (a fake clock), and inside ChatClient against an OpenAI-compatible server
that answers a burst of requests with 429 + Retry-After and then recovers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.llm import ChatClient, ChatMessage, ChatRequest
from eval_pipelines.llm.limiter import AdaptiveLimiter


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        AdaptiveLimiter(0)
    with pytest.raises(ValueError):
        AdaptiveLimiter(4, minimum=5)
    with pytest.raises(ValueError):
        AdaptiveLimiter(4, initial=9)
    with pytest.raises(ValueError):
        AdaptiveLimiter(4, decrease_factor=1.0)


async def test_decrease_is_multiplicative_once_per_round_and_bounded_below() -> None:
    clock = FakeClock()
    limiter = AdaptiveLimiter(16, minimum=2, clock=clock)
    for _ in range(16):
        await limiter.acquire()
    sent = limiter.now()
    clock.now += 1
    for _ in range(5):  # five answers to attempts sent together: one overload, one cut
        limiter.record(429, started_at=sent)
    assert limiter.limit == 8 and limiter.stats().rate_limited == 5 and limiter.stats().decreases == 1
    for _ in range(5):  # each later attempt that is refused again cuts again, down to the minimum
        clock.now += 1
        limiter.record(429, started_at=limiter.now())
    assert [c.new_limit for c in limiter.history] == [8, 4, 2]
    assert limiter.limit == 2 and all(c.reason == "rate_limited" for c in limiter.history)


async def test_a_decrease_cuts_the_concurrency_in_use_not_idle_headroom() -> None:
    limiter = AdaptiveLimiter(64)
    for _ in range(6):
        await limiter.acquire()
    limiter.record(429, started_at=limiter.now())
    assert limiter.limit == 3  # 6 in flight halved, not 64 halved
    for _ in range(6):
        limiter.release()


def test_increase_is_additive_after_a_window_and_bounded_above() -> None:
    limiter = AdaptiveLimiter(4, initial=1, success_window=3)
    for _ in range(30):
        limiter.record(200, started_at=limiter.now())
    assert [(c.old_limit, c.new_limit) for c in limiter.history] == [(1, 2), (2, 3), (3, 4)]
    assert limiter.limit == 4 and limiter.stats().successes == 30
    limiter.record(500, started_at=limiter.now())  # a server error is no signal either way
    limiter.record(400, started_at=limiter.now())
    assert limiter.limit == 4 and limiter.stats().rate_limited == 0


async def test_retry_after_pauses_new_requests_and_the_limit_bounds_in_flight() -> None:
    clock = FakeClock()
    limiter = AdaptiveLimiter(2, clock=clock, sleep=clock.sleep)
    limiter.record(429, started_at=limiter.now(), retry_after=3.0)
    assert limiter.limit == 1  # nothing in flight: the minimum
    async with limiter.slot():
        assert clock.slept == [3.0]  # the pause ran before the slot was granted
        assert limiter.in_flight == 1
        blocked = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(0.01)
        assert not blocked.done() and limiter.stats().waiting == 1
    await asyncio.wait_for(blocked, 1)
    limiter.release()
    assert limiter.in_flight == 0 and limiter.stats().max_in_flight == 1 and limiter.stats().acquired == 2


# --- over HTTP --------------------------------------------------------------------------------------------------


@dataclass
class BurstState:
    """The first `burst` requests are refused with 429; later ones succeed after a short think."""

    burst: int
    retry_after: str = "0.2"
    hits: int = 0
    refused: int = 0
    served: int = 0
    in_flight: int = 0
    max_in_flight_after_burst: int = 0
    answered: set[str] = field(default_factory=set)


def create_burst_app(state: BurstState) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Response:
        body = await request.json()
        state.hits += 1
        if state.hits <= state.burst:
            state.refused += 1
            return JSONResponse(
                {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}},
                status_code=429,
                headers={"Retry-After": state.retry_after},
            )
        state.in_flight += 1
        state.max_in_flight_after_burst = max(state.max_in_flight_after_burst, state.in_flight)
        try:
            await asyncio.sleep(0.01)
        finally:
            state.in_flight -= 1
        state.served += 1
        tag = body.get("user", "")
        state.answered.add(tag)
        return JSONResponse(
            {
                "id": f"cmpl-{state.hits}",
                "object": "chat.completion",
                "model": body.get("model", "burst"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": tag}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }
        )

    return app


@pytest.fixture
def burst_state() -> BurstState:
    return BurstState(burst=12)


@pytest.fixture
def burst_server(burst_state: BurstState) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_burst_app(burst_state)) as server:
        yield server


def _request(index: int) -> ChatRequest:
    return ChatRequest(model="burst-model", messages=[ChatMessage.user("hi")], user=f"request-{index}")


async def test_a_429_burst_loses_no_request_and_the_limit_drops_then_recovers(
    burst_server: BackgroundServer, burst_state: BurstState, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="eval_pipelines.llm.limiter")
    client = ChatClient(
        f"{burst_server.url}/v1", "sk-test", max_concurrency=8, retry=RetryPolicy.for_llm(max_attempts=6)
    )
    async with client:
        completions = await asyncio.gather(*(client.complete(_request(i)) for i in range(60)))
        stats = client.limiter.stats()
        history = client.limiter.history

    # Zero lost requests: every one was answered, and with its own reply.
    assert [c.text for c in completions] == [f"request-{i}" for i in range(60)]
    assert burst_state.served == 60 and burst_state.answered == {f"request-{i}" for i in range(60)}
    assert burst_state.refused == 12 and stats.rate_limited == 12

    # The limit visibly dropped on the burst and grew back to the maximum afterwards.
    lowest = min(c.new_limit for c in history)
    assert history[0].reason == "rate_limited" and history[0].old_limit == 8 and history[0].retry_after == 0.2
    assert lowest <= 4
    drops = [c for c in history if c.reason == "rate_limited"]
    rises = [c for c in history if c.reason == "recovered"]
    assert all(c.new_limit == c.old_limit + 1 for c in rises)
    assert history[-1].reason == "recovered" and history[-1].new_limit == 8 and stats.limit == 8
    assert stats.decreases == len(drops) and stats.increases == len(rises) >= 8 - lowest
    assert stats.in_flight == 0 and stats.max_in_flight <= 8 and stats.paused_for_seconds > 0

    # ... and said so in the logs.
    messages = [r.getMessage() for r in caplog.records if r.name == "eval_pipelines.llm.limiter"]
    assert any("concurrency 8 -> 4 after HTTP 429" in m and "Retry-After" in m for m in messages)
    assert any(m.endswith("successes") and "-> 8" in m for m in messages)
    assert all("sk-test" not in m for m in messages)


async def test_a_client_can_share_a_configured_limiter(burst_server: BackgroundServer, burst_state: BurstState) -> None:
    burst_state.burst = 0
    limiter = AdaptiveLimiter(3, initial=1, success_window=2, name="shared")
    clients: list[Any] = [ChatClient(f"{burst_server.url}/v1", None, limiter=limiter) for _ in range(2)]
    try:
        await asyncio.gather(*(clients[i % 2].complete(_request(i)) for i in range(20)))
    finally:
        for client in clients:
            await client.aclose()
    assert burst_state.served == 20 and limiter.stats().acquired == 20
    assert limiter.limit == 3 and [c.new_limit for c in limiter.history] == [2, 3]
    assert burst_state.max_in_flight_after_burst <= 3
