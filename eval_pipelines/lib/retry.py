"""Retries with exponential backoff for every outbound HTTP client in the project.

Callers map the final status to their own typed errors; this module only decides *whether* and *when* to
send again. It never logs headers: the clients put credentials there.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from eval_pipelines.lib.redact import redact_url

logger = logging.getLogger(__name__)

#: Statuses that mean "try again later" on any API.
DEFAULT_RETRY_STATUSES: frozenset[int] = frozenset({429, 502, 503, 504})
#: LLM endpoints (vLLM, proxies, hosted providers) routinely answer 500 for transient overload.
LLM_RETRY_STATUSES: frozenset[int] = DEFAULT_RETRY_STATUSES | {500}

DEFAULT_MAX_DELAY = 30.0

RequestFactory = Callable[[], httpx.Request]
SleepFn = Callable[[float], Awaitable[None]]

# Retrying cannot fix a malformed request or an unsupported URL scheme.
_PERMANENT_TRANSPORT_ERRORS: tuple[type[httpx.TransportError], ...] = (
    httpx.UnsupportedProtocol,
    httpx.LocalProtocolError,
)


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to send, and how long to wait in between.

    `jitter` is the fraction of the exponential delay that is randomised: 1.0 is "full jitter" (uniform in
    [0, delay]), 0.0 is a fixed schedule. Full jitter spreads out many rollouts that hit a 429 together.
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = DEFAULT_MAX_DELAY
    jitter: float = 1.0
    retry_statuses: frozenset[int] = field(default=DEFAULT_RETRY_STATUSES)
    retry_transport_errors: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("base_delay and max_delay must not be negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be between 0.0 and 1.0")
        # Accept any iterable of ints (a set literal, a list from YAML) but keep the dataclass hashable.
        object.__setattr__(self, "retry_statuses", frozenset(int(s) for s in self.retry_statuses))

    @classmethod
    def for_llm(cls, **overrides: Any) -> RetryPolicy:
        """The policy for chat-completion endpoints: 500 is retried as well."""
        overrides.setdefault("retry_statuses", LLM_RETRY_STATUSES)
        return cls(**overrides)

    def should_retry_status(self, status: int) -> bool:
        return status in self.retry_statuses


def parse_retry_after(
    value: str | None, *, max_delay: float = DEFAULT_MAX_DELAY, now: datetime | None = None
) -> float | None:
    """Seconds to wait from a `Retry-After` value (delta-seconds or HTTP-date), capped at `max_delay`.

    Returns None when the value is absent or unreadable, so the caller falls back to its own backoff.
    A date in the past means "now" (0.0).
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    seconds: float | None
    try:
        seconds = float(text)
    except ValueError:
        seconds = None
    if seconds is None:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), max_delay)


def backoff_delay(
    attempt: int, policy: RetryPolicy, retry_after: float | None = None, *, rng: random.Random | None = None
) -> float:
    """Delay before the attempt after `attempt` (1-based: the attempt that just failed).

    A server-given Retry-After wins over the computed schedule: the server knows when it will have capacity.
    """
    if retry_after is not None:
        return min(max(retry_after, 0.0), policy.max_delay)
    # Cap the exponent: a long-running retry loop must not overflow a float.
    exponential = policy.base_delay * (2.0 ** min(max(attempt - 1, 0), 62))
    capped = min(exponential, policy.max_delay)
    randomised = capped * policy.jitter
    return capped - randomised + (rng or random).uniform(0.0, randomised)


def retry_after_seconds(response: httpx.Response, *, max_delay: float = DEFAULT_MAX_DELAY) -> float | None:
    """Retry-After of a response; `retry-after-ms` (sent by some OpenAI-compatible servers) is preferred."""
    millis = response.headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = math.nan
        if not math.isnan(value):
            return min(max(value, 0.0), max_delay)
    return parse_retry_after(response.headers.get("retry-after"), max_delay=max_delay)


def _is_retryable_transport_error(exc: httpx.TransportError, policy: RetryPolicy) -> bool:
    return policy.retry_transport_errors and not isinstance(exc, _PERMANENT_TRANSPORT_ERRORS)


async def _send_once(
    client: httpx.AsyncClient, request: httpx.Request, attempt_timeout: float | None
) -> httpx.Response:
    if attempt_timeout is None:
        return await client.send(request)
    # httpx timeouts bound each read, not the whole response: a server trickling bytes could hang forever.
    try:
        async with asyncio.timeout(attempt_timeout):
            return await client.send(request)
    except TimeoutError as exc:
        raise httpx.ReadTimeout(f"no complete response within {attempt_timeout:g}s", request=request) from exc


async def send_with_retries(
    client: httpx.AsyncClient,
    method: str | None = None,
    url: httpx.URL | str | None = None,
    *,
    policy: RetryPolicy | None = None,
    request_factory: RequestFactory | None = None,
    sleep: SleepFn = asyncio.sleep,
    attempt_timeout: float | None = None,
    rng: random.Random | None = None,
    **request_kwargs: Any,
) -> httpx.Response:
    """Send a request, retrying on the policy's statuses and on transport errors (timeouts included).

    Give either `method` + `url` (+ `client.build_request` kwargs such as `json=`, `headers=`, `timeout=`) or a
    `request_factory`; a fresh request is built for every attempt because a consumed body cannot be resent.
    Other 4xx are never retried. Returns the last response whatever its status; re-raises the last
    transport error when the attempts run out. `attempt_timeout` is a hard wall-clock limit per attempt.
    """
    if (request_factory is None) == (method is None or url is None):
        raise TypeError("give either request_factory or both method and url")
    if request_factory is not None and request_kwargs:
        raise TypeError("request kwargs are only accepted together with method and url")
    policy = policy or RetryPolicy()

    def build() -> httpx.Request:
        if request_factory is not None:
            return request_factory()
        assert method is not None and url is not None
        return client.build_request(method, url, **request_kwargs)

    attempt = 0
    while True:
        attempt += 1
        request = build()
        try:
            response = await _send_once(client, request, attempt_timeout)
        except httpx.TransportError as exc:
            if attempt >= policy.max_attempts or not _is_retryable_transport_error(exc, policy):
                raise
            delay = backoff_delay(attempt, policy, rng=rng)
            logger.info(
                "retrying %s %s after %s: %s (attempt %d of %d, waiting %.2fs)",
                request.method,
                redact_url(request.url),
                type(exc).__name__,
                exc,
                attempt,
                policy.max_attempts,
                delay,
            )
            await sleep(delay)
            continue

        if attempt >= policy.max_attempts or not policy.should_retry_status(response.status_code):
            return response
        delay = backoff_delay(attempt, policy, retry_after_seconds(response, max_delay=policy.max_delay), rng=rng)
        await response.aclose()
        logger.info(
            "retrying %s %s after HTTP %d (attempt %d of %d, waiting %.2fs)",
            request.method,
            redact_url(request.url),
            response.status_code,
            attempt,
            policy.max_attempts,
            delay,
        )
        await sleep(delay)
