"""Whether a sweep's cron fires faster than its runs finish.

A schedule that fires every minute on a sweep that takes five queues a new sweep's runs at each tick while the
last ones still run; on a small machine the queue only grows. Nothing stops it (the runs are what the user
asked for), but the user is told: the schedule's tick logs it (`defs/evals/automation.py`), and
`eval-pipelines sweep` prints it after a sweep whose config has a cron that fires more often than the sweep took.

Only the minute and hour fields set how close two ticks can be; the day fields only leave days out. The
shortest interval is therefore read from the times of day a cron fires (the gap from the day's last tick to the
next day's first counts only when the cron fires every day).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

#: The shortest interval of the cron macros that fire at least daily (the others fire at most once a day, on
#: some days only).
MACRO_INTERVAL_SECONDS = {"@hourly": 3600.0, "@daily": 86400.0, "@midnight": 86400.0}
_MINUTES_PER_DAY = 24 * 60


def _field_values(field: str, low: int, high: int) -> set[int] | None:
    """The values a cron field (`*`, `*/n`, `a`, `a-b`, `a-b/n`, `a/n`, comma lists) allows, or None when the
    field is not in that syntax (the scheduler checks it; here it only means "unknown")."""
    values: set[int] = set()
    for part in field.split(","):
        span, slash, step_text = part.partition("/")
        if slash and not step_text.isdigit():
            return None
        step = int(step_text) if slash else 1
        if step < 1:
            return None
        if span == "*":
            start, end = low, high
        elif "-" in span:
            first, _, last = span.partition("-")
            if not (first.isdigit() and last.isdigit()):
                return None
            start, end = int(first), int(last)
        elif span.isdigit():
            start = int(span)
            end = high if slash else start
        else:
            return None
        if not low <= start <= end <= high:
            return None
        values.update(range(start, end + 1, step))
    return values


def shortest_interval_seconds(cron: str) -> float | None:
    """The shortest time between two ticks of `cron`, or None when it fires at most once a day on some days only,
    or its fields are beyond this reading (names, `L`, `#`): no warning is better than a wrong one."""
    if cron.startswith("@"):
        return MACRO_INTERVAL_SECONDS.get(cron)
    fields = cron.split()
    if len(fields) != 5:
        return None
    minutes = _field_values(fields[0], 0, 59)
    hours = _field_values(fields[1], 0, 23)
    if not minutes or not hours:
        return None
    every_day = all(f in ("*", "?") for f in fields[2:])
    times = sorted(h * 60 + m for h in hours for m in minutes)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    if every_day:
        gaps.append(times[0] + _MINUTES_PER_DAY - times[-1])
    return min(gaps) * 60.0 if gaps else None


@dataclass(frozen=True)
class RunSpan:
    """One run of a sweep's partition as the scheduler recorded it (epoch seconds); `ended` None while queued or
    running."""

    sweep_id: str
    started: float | None
    ended: float | None


def last_sweep_seconds(runs: Iterable[RunSpan]) -> float | None:
    """The wall time of the newest sweep (by its last run's end) all of whose runs ended: its first run's start
    to its last run's end. None when no sweep has finished."""
    by_sweep: dict[str, list[RunSpan]] = {}
    for run in runs:
        by_sweep.setdefault(run.sweep_id, []).append(run)
    finished = [spans for spans in by_sweep.values() if all(s.ended is not None for s in spans)]
    if not finished:
        return None
    newest = max(finished, key=lambda spans: max(s.ended or 0.0 for s in spans))
    end = max(s.ended or 0.0 for s in newest)
    start = min(s.started if s.started is not None else (s.ended or end) for s in newest)
    return max(0.0, end - start)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def pace_warning(
    sweep_name: str, cron: str, *, last_sweep_seconds: float | None = None, unfinished_runs: int = 0
) -> str | None:
    """The warning when `cron` fires faster than the sweep's runs finish: its last sweep took longer than the
    shortest interval between ticks, or runs of earlier ticks are still queued or running at a tick. None
    otherwise, and for a cron that fires at most once a day on some days only."""
    interval = shortest_interval_seconds(cron)
    if interval is None:
        return None
    why = []
    if last_sweep_seconds is not None and last_sweep_seconds > interval:
        why.append(f"its last sweep took {_duration(last_sweep_seconds)}")
    if unfinished_runs:
        why.append(f"{unfinished_runs} run(s) of earlier ticks are still queued or running")
    if not why:
        return None
    return (
        f"sweep {sweep_name!r}: its cron {cron!r} fires every {_duration(interval)}, but {' and '.join(why)}: each "
        "tick queues runs faster than they finish, and the queue grows; make the cron less frequent or the sweep "
        "smaller (fewer models or scenarios, a lower rollout_count)"
    )
