"""A sweep's id per schedule tick: a daily cron's ticks of one day are one sweep, a faster cron's are not."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from eval_pipelines.inputs.sweeps import scheduled_sweep_id
from eval_pipelines.schemas.sweep import SweepConfig

MODEL = {"name": "m", "model": "m", "base_url": "sim://local"}
WHEN = dt.datetime(2026, 11, 25, 14, 30, tzinfo=dt.UTC)


def _sweep(cron: str | None) -> SweepConfig:
    return SweepConfig.model_validate({"name": "nightly", "scenarios": ["*"], "models": [MODEL], "cron": cron})


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        ("0 2 * * *", "nightly-20261125"),
        ("0 2 * * 1", "nightly-20261125"),
        ("*/30 * * * *", "nightly-20261125T1430"),
        ("0 */6 * * *", "nightly-20261125T1430"),
        ("0,30 2 * * *", "nightly-20261125T1430"),
        ("@daily", "nightly-20261125"),
        ("@weekly", "nightly-20261125"),
        ("@hourly", "nightly-20261125T1430"),
    ],
)
def test_each_tick_of_a_faster_than_daily_cron_is_a_sweep_of_its_own(cron: str, expected: str) -> None:
    assert scheduled_sweep_id(_sweep(cron), WHEN) == expected


def test_the_tick_time_is_read_in_utc() -> None:
    late = dt.datetime(2026, 11, 25, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert scheduled_sweep_id(_sweep("0 2 * * *"), late) == "nightly-20261126"


def test_a_cron_without_five_fields_is_a_config_error_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="cron must have five fields"):
        _sweep("daily")
