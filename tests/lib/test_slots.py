"""SlotPool: a semaphore whose slots can be granted and handed over, never exceeding what it was given."""

from __future__ import annotations

import asyncio

import pytest

from eval_pipelines.lib.slots import SlotPool


async def _hold(pool: SlotPool, started: list[int], release: asyncio.Event, index: int) -> None:
    async with pool:
        started.append(index)
        await release.wait()


async def test_behaves_as_a_semaphore_and_serves_waiters_in_order() -> None:
    pool = SlotPool(2)
    started: list[int] = []
    release = asyncio.Event()
    tasks = [asyncio.create_task(_hold(pool, started, release, i)) for i in range(5)]
    await asyncio.sleep(0.01)
    assert started == [0, 1] and pool.in_use == 2
    release.set()
    await asyncio.gather(*tasks)
    assert started == [0, 1, 2, 3, 4] and pool.in_use == 0 and pool.size == 2


async def test_grant_adds_slots_and_wakes_a_waiter() -> None:
    pool = SlotPool(0, capacity=3)
    assert pool.capacity == 3
    started: list[int] = []
    release = asyncio.Event()
    tasks = [asyncio.create_task(_hold(pool, started, release, i)) for i in range(3)]
    await asyncio.sleep(0.01)
    assert started == []
    pool.grant()
    await asyncio.sleep(0.01)
    assert started == [0]
    pool.grant(2)
    await asyncio.sleep(0.01)
    assert started == [0, 1, 2] and pool.size == 3
    release.set()
    await asyncio.gather(*tasks)


async def test_hand_over_gives_idle_slots_now_and_busy_ones_on_release() -> None:
    pool = SlotPool(4)
    given: list[str] = []
    release = asyncio.Event()
    started: list[int] = []
    busy = [asyncio.create_task(_hold(pool, started, release, i)) for i in range(3)]
    await asyncio.sleep(0.01)
    pool.hand_over(3, lambda: given.append("slot"))
    assert given == ["slot"]  # the one idle slot went at once
    waiting = asyncio.create_task(_hold(pool, started, release, 9))
    await asyncio.sleep(0.01)
    assert 9 not in started  # every slot is busy or gone
    release.set()
    await asyncio.gather(*busy)
    await asyncio.sleep(0.01)
    # Two releases paid what was still owed; the third slot served the waiter.
    assert given == ["slot", "slot", "slot"] and 9 in started
    await waiting
    assert pool.size == 1 and pool.in_use == 0


async def test_in_flight_never_exceeds_the_pool_plus_what_was_handed_away() -> None:
    pool = SlotPool(5)
    in_flight = 0
    peak = 0
    handed = 0

    async def work() -> None:
        nonlocal in_flight, peak
        async with pool:
            in_flight += 1
            peak = max(peak, in_flight + handed)
            await asyncio.sleep(0.001)
            in_flight -= 1

    def receive() -> None:
        nonlocal handed
        handed += 1

    tasks = [asyncio.create_task(work()) for _ in range(50)]
    await asyncio.sleep(0.002)
    pool.hand_over(3, receive)
    await asyncio.gather(*tasks)
    assert peak <= 5 and handed == 3 and pool.size == 2


async def test_a_cancelled_waiter_does_not_lose_the_slot() -> None:
    pool = SlotPool(1)
    release = asyncio.Event()
    started: list[int] = []
    holder = asyncio.create_task(_hold(pool, started, release, 0))
    await asyncio.sleep(0.01)
    cancelled = asyncio.create_task(_hold(pool, started, release, 1))
    later = asyncio.create_task(_hold(pool, started, release, 2))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    release.set()
    await asyncio.gather(holder, later)
    assert started == [0, 2] and pool.in_use == 0


def test_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="size"):
        SlotPool(-1)
