"""aio.run: uvloop when installed, and the startup freeze is undone when the run ends."""

from __future__ import annotations

import asyncio

import pytest

from eval_pipelines.lib import aio
from tests.support.collector import is_frozen


def test_runs_on_uvloop_when_installed() -> None:
    pytest.importorskip("uvloop")

    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert aio.run(loop_module()).startswith("uvloop")


@pytest.mark.usefixtures("no_frozen_objects")
def test_objects_are_frozen_only_while_the_run_lasts() -> None:
    alive_at_start = [["start-up"]]

    async def frozen_during() -> bool:
        return is_frozen(alive_at_start)

    assert aio.run(frozen_during())
    assert not is_frozen(alive_at_start)


@pytest.mark.usefixtures("no_frozen_objects")
def test_an_exception_still_unfreezes() -> None:
    alive_at_start = [["start-up"]]

    async def fail() -> None:
        assert is_frozen(alive_at_start)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        aio.run(fail())
    assert not is_frozen(alive_at_start)


@pytest.mark.usefixtures("no_frozen_objects")
def test_a_block_inside_another_freezes_what_came_alive_since_until_the_outer_one_ends() -> None:
    with aio.startup_objects_frozen():
        born_after = [["after the outer block began"]]
        assert not is_frozen(born_after)
        with aio.startup_objects_frozen():
            assert is_frozen(born_after)
        # A run on a server's loop ended; the server still serves, and what it froze stays frozen.
        assert is_frozen(born_after)
    assert not is_frozen(born_after)


@pytest.mark.usefixtures("no_frozen_objects")
def test_blocks_inside_another_freeze_again_only_a_bounded_number_of_times() -> None:
    with aio.startup_objects_frozen():
        frozen_by_block = []
        for _ in range(aio.MAX_NESTED_FREEZES + 2):
            born = [["before this block"]]
            with aio.startup_objects_frozen():
                frozen_by_block.append(is_frozen(born))
    # A server whose runs always overlap keeps only what the first few froze from the collector.
    assert frozen_by_block == [True] * aio.MAX_NESTED_FREEZES + [False, False]
