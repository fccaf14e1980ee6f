"""Tool servers write timestamps as UTC `YYYY-MM-DDTHH:MM:SSZ`, which sort as strings and read back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from eval_pipelines.toolservers.fields import format_timestamp, parse_timestamp


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC), "2026-03-04T05:06:07Z"),
        (datetime(2026, 1, 1, 1, 30, tzinfo=timezone(timedelta(hours=2))), "2025-12-31T23:30:00Z"),
        (datetime(987, 6, 5, 4, 3, 2, tzinfo=UTC), "0987-06-05T04:03:02Z"),
    ],
)
def test_a_moment_is_written_in_utc_to_the_second_and_reads_back(moment: datetime, text: str) -> None:
    assert format_timestamp(moment) == text
    assert parse_timestamp(text) == moment.replace(microsecond=0)
