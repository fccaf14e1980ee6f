"""The pure parts of lib/retry: Retry-After parsing and the back-off schedule."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from eval_pipelines.lib.redact import redact_url
from eval_pipelines.lib.retry import (
    DEFAULT_RETRY_STATUSES,
    LLM_RETRY_STATUSES,
    RetryPolicy,
    backoff_delay,
    parse_retry_after,
)

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0.1", 0.1), ("3", 3.0), (" 2 ", 2.0), ("0", 0.0), ("-5", 0.0), ("120", 30.0), ("inf", 30.0)],
)
def test_parse_retry_after_seconds(value: str, expected: float) -> None:
    assert parse_retry_after(value, max_delay=30.0) == expected


@pytest.mark.parametrize("value", [None, "", "soon", "nan", "Mon, 99 Foo 2025"])
def test_parse_retry_after_unreadable_is_none(value: str | None) -> None:
    assert parse_retry_after(value) is None


def test_parse_retry_after_http_date() -> None:
    in_ten = format_datetime(NOW + timedelta(seconds=10), usegmt=True)
    assert parse_retry_after(in_ten, now=NOW) == 10.0
    assert parse_retry_after(in_ten, now=NOW, max_delay=4.0) == 4.0
    past = format_datetime(NOW - timedelta(minutes=5), usegmt=True)
    assert parse_retry_after(past, now=NOW) == 0.0


def test_backoff_is_exponential_capped_and_jittered_within_bounds() -> None:
    fixed = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=0.0)
    assert [backoff_delay(a, fixed) for a in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff_delay(10_000, fixed) == 3.0

    full = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=1.0)
    rng = random.Random(1)
    delays = [backoff_delay(3, full, rng=rng) for _ in range(200)]
    assert all(0.0 <= d <= 2.0 for d in delays) and len(set(delays)) > 100

    half = RetryPolicy(base_delay=1.0, max_delay=30.0, jitter=0.5)
    assert all(1.0 <= backoff_delay(2, half, rng=rng) <= 2.0 for _ in range(200))


def test_retry_after_wins_over_the_schedule_but_stays_capped() -> None:
    policy = RetryPolicy(base_delay=5.0, max_delay=10.0)
    assert backoff_delay(1, policy, retry_after=0.1) == 0.1
    assert backoff_delay(1, policy, retry_after=60.0) == 10.0


def test_policy_defaults_and_validation() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.base_delay, policy.max_delay) == (4, 0.5, 30.0)
    assert policy.retry_statuses == DEFAULT_RETRY_STATUSES == frozenset({429, 502, 503, 504})
    assert RetryPolicy.for_llm().retry_statuses == LLM_RETRY_STATUSES and 500 in LLM_RETRY_STATUSES
    assert RetryPolicy(retry_statuses={500}).retry_statuses == frozenset({500})  # type: ignore[arg-type]
    for bad in ({"max_attempts": 0}, {"jitter": 1.5}, {"base_delay": -1.0}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)


def test_redact_url_drops_credentials_and_query() -> None:
    assert redact_url("https://user:pw@api.example.com/v1/chat?key=secret#x") == "https://api.example.com/v1/chat"
