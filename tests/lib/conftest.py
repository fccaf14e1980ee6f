"""Fixtures of the lib tests."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from eval_pipelines.lib import aio


@pytest.fixture
def no_frozen_objects(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process with no freeze in force, as these tests examine one. A server that another test module left
    running (a session fixture's) holds the outer freeze of the whole test process; it gets it back after."""
    held = aio._freeze_depth > 0
    monkeypatch.setattr(aio, "_freeze_depth", 0)
    monkeypatch.setattr(aio, "_nested_freezes", 0)
    gc.unfreeze()
    yield
    if held:
        gc.freeze()
