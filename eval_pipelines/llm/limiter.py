"""Adaptive (AIMD) concurrency for one LLM endpoint, inside one process.

Dagster pools bound how many *steps* talk to a provider at once; they cannot see the dozens of async requests
a single `rollouts` step sends. This limiter does, and adapts to what the provider says:

- multiplicative decrease: a 429 (a "congestion" status) cuts the concurrency in use (the requests in flight,
  at most the limit) by `decrease_factor`, once per round: answers to attempts that were sent before the last
  cut are the same overload, not a new signal;
- `Retry-After`: no new request starts until the time the provider named has passed;
- additive increase: after `success_window` successes in a row (default: the current limit, i.e. about one
  round of requests) the limit grows by `increase_step`, up to `maximum`.

`stats()` and `history` expose the current limit, the counters and every change, for logs and metrics;
each change is also logged (logger `eval_pipelines.llm.limiter`, INFO).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Literal

logger = logging.getLogger(__name__)

#: Statuses that mean "you are sending too much": the limit shrinks on these.
DEFAULT_CONGESTION_STATUSES: frozenset[int] = frozenset({429})
DEFAULT_HISTORY_SIZE = 1000

Clock = Callable[[], float]
SleepFn = Callable[[float], Awaitable[None]]
ChangeReason = Literal["rate_limited", "recovered"]


@dataclass(frozen=True)
class LimitChange:
    """One change of the limit. `at` is seconds since the limiter was created."""

    at: float
    old_limit: int
    new_limit: int
    reason: ChangeReason
    status: int | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class LimiterStats:
    """A snapshot for logs and metrics."""

    name: str
    limit: int
    minimum: int
    maximum: int
    in_flight: int
    waiting: int
    max_in_flight: int
    acquired: int
    successes: int
    rate_limited: int
    decreases: int
    increases: int
    paused_for_seconds: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class AdaptiveLimiter:
    """`async with limiter.slot(): ...` around each request; report each answer with `record(...)`."""

    def __init__(
        self,
        maximum: int,
        *,
        minimum: int = 1,
        initial: int | None = None,
        decrease_factor: float = 0.5,
        increase_step: int = 1,
        success_window: int | None = None,
        congestion_statuses: frozenset[int] = DEFAULT_CONGESTION_STATUSES,
        name: str = "",
        clock: Clock = time.monotonic,
        sleep: SleepFn = asyncio.sleep,
        history_size: int = DEFAULT_HISTORY_SIZE,
    ) -> None:
        if minimum < 1:
            raise ValueError("minimum must be at least 1")
        if maximum < minimum:
            raise ValueError("maximum must be at least minimum")
        start = maximum if initial is None else initial
        if not minimum <= start <= maximum:
            raise ValueError("initial must lie within [minimum, maximum]")
        if not 0.0 < decrease_factor < 1.0:
            raise ValueError("decrease_factor must lie strictly between 0 and 1")
        if increase_step < 1:
            raise ValueError("increase_step must be at least 1")
        if success_window is not None and success_window < 1:
            raise ValueError("success_window must be at least 1")
        self.name = name
        self.minimum = minimum
        self.maximum = maximum
        self.decrease_factor = decrease_factor
        self.increase_step = increase_step
        self.success_window = success_window
        self.congestion_statuses = frozenset(congestion_statuses)
        self._clock = clock
        self._sleep = sleep
        self._created_at = clock()
        self._limit = start
        self._in_flight = 0
        self._max_in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._paused_until = -math.inf
        self._paused_for = 0.0
        self._last_decrease_at = -math.inf
        self._successes_in_window = 0
        self._acquired = 0
        self._successes = 0
        self._rate_limited = 0
        self._decreases = 0
        self._increases = 0
        self._history: deque[LimitChange] = deque(maxlen=history_size)

    def __repr__(self) -> str:
        return f"AdaptiveLimiter(name={self.name!r}, limit={self._limit}, range=[{self.minimum}, {self.maximum}])"

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def history(self) -> tuple[LimitChange, ...]:
        return tuple(self._history)

    def now(self) -> float:
        """The limiter's clock: pass this to `record(started_at=...)`."""
        return self._clock()

    def stats(self) -> LimiterStats:
        return LimiterStats(
            name=self.name,
            limit=self._limit,
            minimum=self.minimum,
            maximum=self.maximum,
            in_flight=self._in_flight,
            waiting=len(self._waiters),
            max_in_flight=self._max_in_flight,
            acquired=self._acquired,
            successes=self._successes,
            rate_limited=self._rate_limited,
            decreases=self._decreases,
            increases=self._increases,
            paused_for_seconds=round(self._paused_for, 3),
        )

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()

    async def acquire(self) -> None:
        """Wait until no Retry-After pause is running and fewer than `limit` requests are in flight."""
        while True:
            pause = self._paused_until - self._clock()
            if pause > 0:
                await self._sleep(pause)
                continue
            if self._in_flight < self._limit:
                break
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self._in_flight += 1
        self._acquired += 1
        self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def release(self) -> None:
        self._in_flight -= 1
        self._wake_waiters()

    def record(self, status: int, *, started_at: float, retry_after: float | None = None) -> None:
        """Report the answer to one attempt that was sent at `started_at` (from `now()`)."""
        if status in self.congestion_statuses:
            self._on_congestion(status, started_at, retry_after)
        elif 200 <= status < 300:
            self._on_success()

    def _on_congestion(self, status: int, started_at: float, retry_after: float | None) -> None:
        self._rate_limited += 1
        self._successes_in_window = 0
        now = self._clock()
        if retry_after is not None and retry_after > 0 and now + retry_after > self._paused_until:
            self._paused_for += now + retry_after - max(now, self._paused_until)
            self._paused_until = now + retry_after
        if started_at < self._last_decrease_at:
            return  # sent before the last cut: the same overload, already answered
        self._last_decrease_at = now
        # Cut what was actually in use: halving an idle headroom (limit 64, 8 in flight) would change nothing.
        in_use = min(self._limit, max(self._in_flight, 1))
        new_limit = max(self.minimum, math.floor(in_use * self.decrease_factor))
        if new_limit < self._limit:
            self._decreases += 1
            self._change(new_limit, "rate_limited", status=status, retry_after=retry_after)

    def _on_success(self) -> None:
        self._successes += 1
        self._successes_in_window += 1
        window = self.success_window or self._limit
        if self._successes_in_window < window or self._limit >= self.maximum:
            return
        self._successes_in_window = 0
        self._increases += 1
        self._change(min(self.maximum, self._limit + self.increase_step), "recovered")
        self._wake_waiters()

    def _change(
        self, new_limit: int, reason: ChangeReason, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        change = LimitChange(
            at=round(self._clock() - self._created_at, 4),
            old_limit=self._limit,
            new_limit=new_limit,
            reason=reason,
            status=status,
            retry_after=retry_after,
        )
        self._limit = new_limit
        self._history.append(change)
        if reason == "rate_limited":
            pause = f", pausing new requests {retry_after:.2f}s (Retry-After)" if retry_after else ""
            logger.info(
                "llm limiter %s: concurrency %d -> %d after HTTP %s%s",
                self.name or "-",
                change.old_limit,
                new_limit,
                status,
                pause,
            )
        else:
            logger.info(
                "llm limiter %s: concurrency %d -> %d after %d successes",
                self.name or "-",
                change.old_limit,
                new_limit,
                self.success_window or change.old_limit,
            )

    def _wake_waiters(self) -> None:
        # Wake everyone and let each re-check: simpler than counting free slots, and the queues are short.
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)


__all__ = ["DEFAULT_CONGESTION_STATUSES", "AdaptiveLimiter", "LimitChange", "LimiterStats"]
