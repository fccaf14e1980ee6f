"""aio.run: uvloop when installed, and the startup freeze is undone when the run ends."""

from __future__ import annotations

import asyncio
import gc

import pytest

from eval_pipelines.lib import aio


def test_runs_on_uvloop_when_installed() -> None:
    pytest.importorskip("uvloop")

    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert aio.run(loop_module()).startswith("uvloop")


@pytest.mark.usefixtures("no_frozen_objects")
def test_objects_are_frozen_only_while_the_run_lasts() -> None:
    before = gc.get_freeze_count()

    async def frozen_during() -> int:
        return gc.get_freeze_count()

    assert aio.run(frozen_during()) > before
    assert gc.get_freeze_count() == before


@pytest.mark.usefixtures("no_frozen_objects")
def test_an_exception_still_unfreezes() -> None:
    before = gc.get_freeze_count()

    async def fail() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        aio.run(fail())
    assert gc.get_freeze_count() == before


@pytest.mark.usefixtures("no_frozen_objects")
def test_a_block_inside_another_freezes_what_came_alive_since_until_the_outer_one_ends() -> None:
    before = gc.get_freeze_count()
    with aio.startup_objects_frozen():
        outer = gc.get_freeze_count()
        born_after = [[index] for index in range(1000)]  # containers: the collector tracks them
        with aio.startup_objects_frozen():
            assert gc.get_freeze_count() >= outer + len(born_after)
        # A run on a server's loop ended; the server still serves, and what it froze stays frozen.
        assert gc.get_freeze_count() >= outer + len(born_after)
    assert gc.get_freeze_count() == before


@pytest.mark.usefixtures("no_frozen_objects")
def test_blocks_inside_another_freeze_again_only_a_bounded_number_of_times() -> None:
    with aio.startup_objects_frozen():
        grew, kept = [], []
        for _ in range(aio.MAX_NESTED_FREEZES + 2):
            before = gc.get_freeze_count()
            kept.append([[index] for index in range(100)])  # alive until the end: a freed one leaves the count
            with aio.startup_objects_frozen():
                grew.append(gc.get_freeze_count() >= before + 100)
    # A server whose runs always overlap keeps only what the first few froze from the collector.
    assert grew == [True] * aio.MAX_NESTED_FREEZES + [False, False]
