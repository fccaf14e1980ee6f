"""Concurrency slots that can move between processes without ever exceeding their total."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from types import TracebackType


class SlotPool:
    """`async with pool: ...` holds one of the pool's slots, like a semaphore, with two additions:

    - `grant(n)` adds slots (a worker process receives its share this way, as its parent frees them);
    - `hand_over(n, give)` takes `n` slots away: idle ones at once, busy ones as they are released, calling
      `give()` once per slot taken so the receiver can start using it.

    A parent can therefore run with every slot while a worker process starts up and pass the worker its
    share only when it is ready: the total in flight never exceeds the run's `max_parallel`.
    Waiters are served first come, first served.
    """

    def __init__(self, size: int, capacity: int | None = None) -> None:
        if size < 0:
            raise ValueError("size must be at least 0")
        self.size = size
        #: the most slots this pool will ever hold (connection pools and limiters are sized by it).
        self.capacity = size if capacity is None else max(capacity, size)
        self._free = size
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._owed: deque[Callable[[], None]] = deque()

    @property
    def in_use(self) -> int:
        return self.size - self._free

    def grant(self, count: int = 1) -> None:
        for _ in range(count):
            self.size += 1
            self._pass_on()

    def hand_over(self, count: int, give: Callable[[], None]) -> None:
        """Give `count` slots away through `give()`: the idle ones now, the rest as they are released."""
        for _ in range(count):
            if self._free > 0:
                self._free -= 1
                self.size -= 1
                give()
            else:
                self._owed.append(give)

    def _pass_on(self) -> None:
        """A slot became available: wake the oldest live waiter with it, or keep it free."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    def _release(self) -> None:
        if self._owed:
            self.size -= 1
            self._owed.popleft()()
            return
        self._pass_on()

    async def __aenter__(self) -> SlotPool:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return self
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # the slot arrived together with the cancellation: pass it on
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._release()
