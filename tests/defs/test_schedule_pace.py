"""A schedule that fires faster than its sweep's runs finish is said so: the cron's shortest interval, the last
sweep's wall time from its runs, and the warning a tick logs (runs still queued, or a last sweep longer than the
interval)."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.events import DagsterEvent, DagsterEventType
from dagster._core.events.log import EventLogEntry

from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.automation import build_schedules, schedule_pace_warning
from eval_pipelines.inputs.sweeps import load_sweep
from eval_pipelines.pipeline.schedule_pace import RunSpan, last_sweep_seconds, pace_warning, shortest_interval_seconds


@pytest.mark.parametrize(
    ("cron", "seconds"),
    [
        ("* * * * *", 60),
        ("*/5 * * * *", 300),
        ("0,10,45 * * * *", 600),  # 0 -> 10 is the closest pair
        ("0 */6 * * *", 6 * 3600),
        ("30 9-17 * * 1-5", 3600),  # working hours on weekdays: hourly within a day
        ("0 2 * * *", 86400),
        ("0 23,1 * * *", 2 * 3600),  # 23:00 to 01:00 the next day
        ("@hourly", 3600),
        ("@daily", 86400),
    ],
)
def test_the_shortest_interval_of_a_cron(cron: str, seconds: float) -> None:
    assert shortest_interval_seconds(cron) == seconds


@pytest.mark.parametrize("cron", ["0 2 * * 1", "@weekly", "0 2 1 * *", "0 2 * * MON", "61 * * * *", "*/0 * * * *"])
def test_a_cron_that_fires_at_most_daily_on_some_days_or_is_beyond_the_reading_gives_none(cron: str) -> None:
    assert shortest_interval_seconds(cron) is None


def test_the_last_sweep_is_the_newest_one_whose_runs_all_ended() -> None:
    runs = [
        RunSpan("s-1", started=100.0, ended=400.0),
        RunSpan("s-1", started=150.0, ended=500.0),  # s-1: 100 -> 500
        RunSpan("s-2", started=600.0, ended=700.0),
        RunSpan("s-2", started=610.0, ended=None),  # still running: s-2 has not finished
    ]
    assert last_sweep_seconds(runs) == 400.0
    assert last_sweep_seconds([*runs, RunSpan("s-0", started=0.0, ended=50.0)]) == 400.0  # older, not newest
    assert last_sweep_seconds([RunSpan("s-3", started=None, ended=None)]) is None


def test_the_warning_says_why_and_stays_quiet_otherwise() -> None:
    slow = pace_warning("fast", "* * * * *", last_sweep_seconds=300)
    assert slow is not None
    assert "'* * * * *' fires every 60s" in slow and "its last sweep took 5 min" in slow
    queued = pace_warning("fast", "*/5 * * * *", unfinished_runs=4)
    assert queued is not None and "4 run(s) of earlier ticks are still queued or running" in queued
    assert pace_warning("fast", "* * * * *", last_sweep_seconds=30) is None
    assert pace_warning("weekly", "@weekly", last_sweep_seconds=10**6, unfinished_runs=3) is None


def _record_run(
    instance: dg.DagsterInstance, sweep: str, sweep_id: str, start: float | None = None, end: float | None = None
) -> None:
    """A run of the sweep's partition job as the daemon records it: STARTED, or (with `end`) finished at `end`."""
    run_id = str(uuid.uuid4())
    instance.add_run(
        dg.DagsterRun(
            job_name="sweep_partition",
            run_id=run_id,
            tags={SWEEP_TAG: sweep, SWEEP_ID_TAG: sweep_id},
            status=dg.DagsterRunStatus.NOT_STARTED,
        )
    )
    events = [(DagsterEventType.RUN_START, start)]
    if end is not None:
        events.append((DagsterEventType.RUN_SUCCESS, end))
    for kind, when in events:
        entry = EventLogEntry(
            error_info=None,
            level=logging.INFO,
            user_message="",
            run_id=run_id,
            timestamp=when or 0.0,
            dagster_event=DagsterEvent(kind.value, job_name="sweep_partition"),
        )
        instance.handle_new_event(entry)


SWEEP = """name: every-minute
scenarios: ["email_ops:1.0.0"]
cron: "* * * * *"
models:
  - {name: a, model: sim-oracle, base_url: 'sim://local'}
"""


@pytest.fixture
def sweeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "sweeps"
    folder.mkdir()
    (folder / "every-minute.yaml").write_text(SWEEP)
    monkeypatch.setenv("EVAL_PIPELINES_SWEEPS_DIR", str(folder))
    return folder


def test_a_tick_logs_the_warning_from_the_runs_it_sees(sweeps: Path, capfd: pytest.CaptureFixture[str]) -> None:
    sweep = load_sweep(sweeps / "every-minute.yaml")
    with dg.instance_for_test() as instance:
        assert schedule_pace_warning(instance, sweep) is None  # no run yet: nothing to say
        _record_run(instance, "every-minute", "every-minute-20260101T0000", start=1000.0, end=1040.0)
        _record_run(instance, "other-sweep", "other-sweep-20260101", start=0.0, end=5000.0)  # not this sweep's
        assert schedule_pace_warning(instance, sweep) is None  # 40 s within a 60 s cron
        _record_run(instance, "every-minute", "every-minute-20260101T0001", start=1060.0, end=1300.0)
        _record_run(instance, "every-minute", "every-minute-20260101T0001", start=1070.0, end=1360.0)
        slow = schedule_pace_warning(instance, sweep)
        assert slow is not None and "its last sweep took 5 min" in slow  # 1060 -> 1360
        _record_run(instance, "every-minute", "every-minute-20260101T0002", start=1400.0)  # still running
        [schedule] = build_schedules()
        when = dt.datetime(2026, 1, 1, 0, 3, tzinfo=dt.UTC)
        with dg.build_schedule_context(instance=instance, scheduled_execution_time=when) as context:
            requests = schedule(context)
    assert isinstance(requests, list) and requests  # the tick still launches: the user is told, not overruled
    # the tick's log (Dagster's logger: the daemon keeps it with the tick; here it goes to stderr)
    [logged] = [line for line in capfd.readouterr().err.splitlines() if "WARNING" in line and "every-minute" in line]
    assert "its last sweep took 5 min and 1 run(s) of earlier ticks are still queued or running" in logged
