"""ProgressReporter: done/total and an ETA on a recorded console, with a scripted clock instead of sleeps."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from eval_pipelines.lib.progress import ProgressReporter
from eval_pipelines.reports import build_report


class ScriptedClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _console() -> Console:
    return Console(file=io.StringIO(), record=True, width=120, force_terminal=False)


def test_shows_done_total_and_eta() -> None:
    console, clock = _console(), ScriptedClock()
    with ProgressReporter(10, "rollouts", console=console, clock=clock) as progress:
        for _ in range(4):
            clock.now += 5.0
            progress.advance()
        progress.update(description="sim-noisy x email_ops:1.0.0")
    text = console.export_text()
    # 4 done in 20 s: 6 left at 5 s each is 30 s.
    assert "sim-noisy x email_ops:1.0.0" in text
    assert "4/10" in text and "0:00:20" in text and "eta 0:00:30" in text
    assert (progress.completed, progress.total) == (4, 10)


def test_update_sets_absolute_counts_for_a_poller() -> None:
    console = _console()
    with ProgressReporter(None, "waiting", console=console, clock=ScriptedClock()) as progress:
        progress.update(total=8, completed=3)
        progress.update(completed=8, description="done")
    text = console.export_text()
    assert "8/8" in text and "done" in text


def test_track_advances_after_each_item() -> None:
    console = _console()
    seen = []
    with ProgressReporter(3, console=console, clock=ScriptedClock()) as progress:
        for item in progress.track(["a", "b", "c"], describe="step {item}"):
            seen.append((item, progress.completed))
    assert seen == [("a", 0), ("b", 1), ("c", 2)] and progress.completed == 3
    assert "3/3" in console.export_text()


def test_disabled_reporter_prints_nothing_but_counts() -> None:
    console = _console()
    with ProgressReporter(2, "quiet", console=console, enabled=False) as progress:
        progress.advance(2)
    assert console.export_text() == "" and progress.completed == 2 and not progress.enabled


def test_build_report_reports_its_steps(report_catalog: Path, tmp_path: Path) -> None:
    console = _console()
    with ProgressReporter(None, "report", console=console, clock=ScriptedClock()) as progress:
        build_report(report_catalog, tmp_path / "r.html", progress=progress)
    # Reading the catalog, four charts, the HTML.
    assert (progress.completed, progress.total) == (6, 6)
    assert "6/6" in console.export_text()
