"""An in-process server leaves the host process's logging alone, and keeps start-up objects out of the
collector's scans only while it serves."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI

from eval_pipelines.lib.serving import BackgroundServer
from tests.support.collector import is_frozen


class RecordingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())

    def close(self) -> None:
        self.closed = True
        super().close()


def test_a_background_server_does_not_reconfigure_the_process_logging() -> None:
    """uvicorn's default logging config closes every handler of the process under logging's module lock; a
    server started inside a Dagster run then deadlocked against a thread that was logging. The servers this
    project starts in-process must not touch the process's handlers at all."""
    handler = RecordingHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with BackgroundServer(FastAPI()):
            logging.getLogger("eval_pipelines.test").warning("still heard")
        assert not handler.closed
        assert handler in root.handlers and "still heard" in handler.records
    finally:
        root.removeHandler(handler)


@pytest.mark.usefixtures("no_frozen_objects")
def test_a_background_server_freezes_start_up_objects_while_it_serves() -> None:
    alive_at_start = [["start-up"]]
    with BackgroundServer(FastAPI()):
        assert is_frozen(alive_at_start)
    assert not is_frozen(alive_at_start)
