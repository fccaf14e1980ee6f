"""An evaluation-service outage shows on the sweep's progress bar, not only in the sweep's log file.

The sweep's display (`cli.sweep_progress` with `cli.OutageStatus` listening to `clients.backend.outage_listener`)
against a real `EvaluationBackend` whose service refuses connections for a few tries and then answers: the bar's
rendered line says the service is unreachable (with the try count) while it is down and is back to its own
description after, while the client's waiting and recovery lines still go to the sweep's log (`StepLog`, where a
sweep's stderr goes while the bar is drawn).
"""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from rich.console import Console
from rich.progress import Progress

from eval_pipelines.cli import OutageStatus, sweep_progress
from eval_pipelines.clients import backend as backend_module
from eval_pipelines.clients.backend import EvaluationBackend, OutageEvent, outage_listener
from eval_pipelines.clients.errors import ServiceConnectionError
from eval_pipelines.clients.evaluation import EvaluationClientSync
from eval_pipelines.lib.step_log import StepLog

URL = "http://127.0.0.1:9"


def _rendered(progress: Progress) -> str:
    out = Console(file=io.StringIO(), width=240, color_system=None)
    out.print(progress.get_renderable())
    return cast(io.StringIO, out.file).getvalue()


class DownThenUp:
    """A client whose service refuses the first `down` calls; at the last refused one it records what the bar
    shows (the tries before it have been reported)."""

    def __init__(self, down: int, progress: Progress) -> None:
        self.client = SimpleNamespace(base_url=URL)
        self.down = down
        self.calls = 0
        self.progress = progress
        self.while_down = ""

    def find_run_by_name(self, name: str) -> None:
        self.calls += 1
        if self.calls <= self.down:
            if self.calls == self.down:
                self.while_down = _rendered(self.progress)
            raise ServiceConnectionError("connection refused", method="GET", path="/runs")
        return None

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend_module, "OUTAGE_POLL_SECONDS", 0.01)


def test_the_bar_says_the_service_is_unreachable_while_it_is_down_and_the_log_keeps_both_lines(tmp_path: Path) -> None:
    progress = sweep_progress(Console(file=io.StringIO(), width=240))
    bar = progress.add_task("rollouts", total=4, errors="")
    status = OutageStatus(progress, bar)
    client = DownThenUp(4, progress)
    backend = EvaluationBackend(cast(EvaluationClientSync, client), outage_seconds=120)
    log = StepLog(tmp_path / "sweep.log", "test sweep")
    client_logger = logging.getLogger(backend_module.__name__)
    with log, outage_listener(status):
        to_log = logging.StreamHandler(sys.stderr)  # the StepLog: where a sweep's stderr goes under the bar
        client_logger.addHandler(to_log)
        try:
            before = _rendered(progress)
            assert backend.find_run("sweep-run") is None
        finally:
            client_logger.removeHandler(to_log)
    after = _rendered(progress)

    assert "unreachable" not in before
    assert f"evaluation service unreachable at {URL}, waiting up to 120 s (attempt 3)" in client.while_down
    assert "unreachable" not in after and "rollouts" in after, after
    assert status.text is None
    text = (tmp_path / "sweep.log").read_text(encoding="utf-8")
    assert f"waiting up to 120s for the evaluation service at {URL}" in text, text
    assert f"the evaluation service at {URL} answers again" in text, text


def test_a_call_that_gives_up_clears_the_line_and_a_failing_listener_does_not_fail_the_call() -> None:
    events: list[OutageEvent] = []

    def broken(event: OutageEvent) -> None:
        raise RuntimeError("a display's bug")

    progress = sweep_progress(Console(file=io.StringIO(), width=240))
    status = OutageStatus(progress, progress.add_task("rollouts", total=1, errors=""))
    client: Any = DownThenUp(10**6, progress)
    backend = EvaluationBackend(cast(EvaluationClientSync, client), outage_seconds=0.05)
    with (
        outage_listener(broken),
        outage_listener(events.append),
        outage_listener(status),
        pytest.raises(ServiceConnectionError),
    ):
        backend.find_run("sweep-run")
    states = [e.state for e in events]
    assert len(states) >= 2 and set(states[:-1]) == {"waiting"} and states[-1] == "gave_up", states
    assert [e.attempt for e in events] == list(range(1, len(events) + 1))
    assert status.text is None and "unreachable" not in _rendered(progress)
    # Outside the context nothing listens any more.
    heard = len(events)
    with pytest.raises(ServiceConnectionError):
        backend.find_run("sweep-run")
    assert len(events) == heard


def test_an_outage_line_goes_when_its_service_recovers_and_names_the_longest_wait() -> None:
    progress = sweep_progress(Console(file=io.StringIO(), width=240))
    bar = progress.add_task("rollouts", total=1, errors="")
    status = OutageStatus(progress, bar)
    assert status.describe("sweep-a-m") == "sweep-a-m"
    status(OutageEvent("waiting", URL, 1, 300.0, 0.0))
    status(OutageEvent("waiting", URL, 2, 300.0, 1.0))
    assert status.describe("sweep-b-m") == f"evaluation service unreachable at {URL}, waiting up to 300 s (attempt 2)"
    assert "attempt 2" in _rendered(progress)
    status(OutageEvent("recovered", URL, 2, 300.0, 2.0))
    assert "unreachable" not in _rendered(progress) and "sweep-b-m" in _rendered(progress)
