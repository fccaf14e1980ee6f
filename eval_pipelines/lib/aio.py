"""Run a coroutine to completion on the fastest event loop available."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

_freeze_lock = threading.Lock()
_freeze_depth = 0
#: Freezes made by blocks inside another since the outermost one began (see startup_objects_frozen).
_nested_freezes = 0
#: How many blocks inside another may freeze again before the outermost block ends: enough for what a process's
#: first runs import, and a bound on what a server whose runs always overlap keeps from the collector (an object
#: frozen while alive that later becomes cyclic garbage waits for the outermost block to end).
MAX_NESTED_FREEZES = 4


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # e.g. Windows: the standard loop is correct, only slower
        return None
    return uvloop.new_event_loop


@contextmanager
def startup_objects_frozen() -> Iterator[None]:
    """Keep everything alive at the start (modules, schemas, catalogs) out of the cyclic collector's scans
    while the block runs. A full collection otherwise walks all of it and stalls the event loop for up to
    ~100 ms, which every in-flight rollout waits out. What the block allocates is collected as usual, and
    the frozen objects are handed back to the collector when the last block ends. A block that starts inside
    another (a run on a server's loop) freezes what has come alive since, the modules a first run imports
    among them, up to `MAX_NESTED_FREEZES` times."""
    global _freeze_depth, _nested_freezes
    with _freeze_lock:
        _freeze_depth += 1
        if _freeze_depth == 1:
            _nested_freezes = 0
            gc.freeze()
        elif _nested_freezes < MAX_NESTED_FREEZES:
            _nested_freezes += 1
            gc.freeze()
    try:
        yield
    finally:
        with _freeze_lock:
            _freeze_depth -= 1
            if _freeze_depth == 0:
                gc.unfreeze()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run`, on uvloop where it is installed: a run's hundreds of concurrent rollouts spend much of
    their CPU in the loop's socket and callback handling, which uvloop does in C."""
    with startup_objects_frozen(), asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(coroutine)
