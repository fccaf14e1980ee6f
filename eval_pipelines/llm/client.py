"""Async client for OpenAI-compatible chat-completions endpoints (hosted providers, vLLM, Ollama, proxies,
and the local simulated models)."""

from __future__ import annotations

import asyncio
import logging
import time
from types import TracebackType
from typing import Any, cast

import httpx
import pydantic_core
from pydantic import SecretStr, ValidationError

from eval_pipelines.lib.http_pool import pooled_client
from eval_pipelines.lib.json_http import JSON_CONTENT
from eval_pipelines.lib.redact import redact_url
from eval_pipelines.lib.retry import (
    RetryPolicy,
    SleepFn,
    retry_after_seconds,
    send_with_retries,
)
from eval_pipelines.llm.deadline import PendingRequest, RolloutDeadline, current_deadline
from eval_pipelines.llm.errors import (
    LLMResponseError,
    error_for_status,
    error_for_transport,
    scrub_secrets,
    truncate,
)
from eval_pipelines.llm.limiter import AdaptiveLimiter
from eval_pipelines.llm.metering import current_meter
from eval_pipelines.llm.types import ChatCompletion, ChatRequest
from eval_pipelines.schemas.limits import MAX_MODEL_REPLY_BYTES
from eval_pipelines.schemas.model_config import ModelConfig

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 60.0
DEFAULT_MAX_CONCURRENCY = 16
_ENDPOINT_SUFFIX = "/chat/completions"


def endpoint_url(base_url: str, suffix: str) -> str:
    """`suffix` appended to the base URL's path, keeping its query: some providers take the key as `?key=`."""
    url = httpx.URL(base_url)
    return str(url.copy_with(path=url.path.rstrip("/") + suffix))


def normalise_base_url(base_url: str) -> str:
    """Strip trailing slashes and a pasted `/chat/completions`, so both `.../v1` and the full endpoint work."""
    url = base_url.strip().rstrip("/")
    parsed = httpx.URL(url) if url.startswith(("http://", "https://")) else None
    if parsed is not None and parsed.path.rstrip("/").endswith(_ENDPOINT_SUFFIX):
        url = str(parsed.copy_with(path=parsed.path.rstrip("/")[: -len(_ENDPOINT_SUFFIX)]))
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must be an http(s) URL, got {redact_url(url)!r}")
    return url


class ReplyTooLarge(httpx.HTTPError):
    """The endpoint's answer ran past the reply cap: it is not read further (memory stays bounded)."""


async def _read_capped(response: httpx.Response, limit: int) -> None:
    """Read the body into the response, refusing it past `limit` bytes (declared or streamed)."""
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ReplyTooLarge(f"the reply declares {int(declared)} bytes, more than the {limit}-byte cap")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(f"the reply is larger than the {limit}-byte cap")
        chunks.append(chunk)
    response._content = b"".join(chunks)


class _ObservedHttp:
    """The two methods `send_with_retries` uses, with every attempt's answer reported to the limiter.

    Observing attempts (not only the final answer) is what lets a 429 that a retry later overcame still
    shrink the limit and pause new requests. Inside a rollout, `pending` keeps the latest attempt's answer, so a
    request the rollout's deadline cuts off can say what the endpoint last did.
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        limiter: AdaptiveLimiter,
        max_delay: float,
        pending: PendingRequest | None = None,
    ) -> None:
        self._http = http
        self._limiter = limiter
        self._max_delay = max_delay
        self._pending = pending

    def build_request(self, *args: Any, **kwargs: Any) -> httpx.Request:
        return self._http.build_request(*args, **kwargs)

    async def send(self, request: httpx.Request) -> httpx.Response:
        started_at = self._limiter.now()
        try:
            response = await self._http.send(request, stream=True)
            try:
                await _read_capped(response, MAX_MODEL_REPLY_BYTES)
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            if self._pending is not None:
                self._pending.last_answer = type(exc).__name__
            raise
        if self._pending is not None:
            self._pending.last_answer = f"HTTP {response.status_code}"
        self._limiter.record(
            response.status_code,
            started_at=started_at,
            retry_after=retry_after_seconds(response, max_delay=self._max_delay),
        )
        return response


class ChatClient:
    """`async with ChatClient(url, key) as llm: completion = await llm.complete(request)`.

    Every request holds a slot of `limiter` (an `AdaptiveLimiter` of at most `max_concurrency` slots) for its
    whole retry sequence, back-off included, so a rate-limited endpoint sees back-pressure rather than more
    traffic. The limiter halves on 429, pauses new requests for the server's Retry-After and grows back after
    successes; `client.limiter.stats()` shows where it stands. Every attempt is bounded by `timeout_seconds`;
    inside a rollout, the whole request (slot, attempts and back-offs) also by what remains of the rollout's
    time (see `llm/deadline.py`).
    The key is sent per request, never stored on a shared `http_client`, and never shown in repr or errors.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        http_client: httpx.AsyncClient | None = None,
        sleep: SleepFn | None = None,
        limiter: AdaptiveLimiter | None = None,
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.base_url = normalise_base_url(base_url)
        self.endpoint = endpoint_url(self.base_url, _ENDPOINT_SUFFIX)
        # Parsed once: httpx parses a URL given as text on every request.
        self._endpoint_url = httpx.URL(self.endpoint)
        # Redacted once: redacting parses the URL, which per request was a tenth of a busy rollout loop's CPU.
        self._redacted_endpoint = redact_url(self.endpoint)
        self.timeout_seconds = timeout_seconds
        self.retry = retry or RetryPolicy.for_llm()
        self.max_concurrency = max_concurrency
        # SecretStr: an accidental print or vars() dump shows '**********'.
        self._api_key = SecretStr(api_key) if api_key else None
        self.limiter = limiter or AdaptiveLimiter(max_concurrency, name=redact_url(self.base_url))
        self._sleep: SleepFn = sleep or asyncio.sleep
        # A caller's client is used as is (and left open); otherwise a pooled one of our own (see lib/http_pool).
        self._given_http = http_client
        self._pool = None if http_client else pooled_client(max_concurrency, timeout=timeout_seconds)

    @classmethod
    def from_model_config(
        cls,
        cfg: ModelConfig,
        *,
        timeout_seconds: float | None = None,
        retry: RetryPolicy | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        http_client: httpx.AsyncClient | None = None,
        sleep: SleepFn | None = None,
        limiter: AdaptiveLimiter | None = None,
    ) -> ChatClient:
        return cls(
            cfg.resolved_base_url(),
            cfg.reveal_api_key(),
            # The caller's choice, else the model's own per-call timeout from its sweep entry, else the default.
            timeout_seconds=timeout_seconds or cfg.request_timeout_seconds or DEFAULT_TIMEOUT_SECONDS,
            retry=retry,
            max_concurrency=max_concurrency,
            http_client=http_client,
            sleep=sleep,
            limiter=limiter,
        )

    def __repr__(self) -> str:
        key = "'**********'" if self._api_key else "None"
        return (
            f"ChatClient(base_url={redact_url(self.base_url)!r}, api_key={key}, timeout_seconds={self.timeout_seconds})"
        )

    __str__ = __repr__

    def _secrets(self) -> tuple[str, ...]:
        return (self._api_key.get_secret_value(),) if self._api_key else ()

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return headers

    async def _send(
        self,
        method: str,
        url: str | httpx.URL,
        *,
        model: str | None,
        headers: dict[str, str] | None = None,
        pending: PendingRequest | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        # send_with_retries only calls build_request and send, which _ObservedHttp provides.
        http = self._given_http or cast(httpx.AsyncClient, self._pool)
        observed = cast(httpx.AsyncClient, _ObservedHttp(http, self.limiter, self.retry.max_delay, pending))
        try:
            return await send_with_retries(
                observed,
                method,
                url,
                policy=self.retry,
                sleep=self._sleep,
                attempt_timeout=self.timeout_seconds,
                headers={**self._headers(), **(headers or {})},
                timeout=self.timeout_seconds,
                **kwargs,
            )
        except httpx.TransportError as exc:
            # `from None`: the httpx exception holds the request, and with it the Authorization header.
            raise error_for_transport(
                exc, url=str(url), model=model, timeout_seconds=self.timeout_seconds, secrets=self._secrets()
            ) from None
        except ReplyTooLarge as exc:
            raise LLMResponseError(
                f"chat completion for model {model!r} at {redact_url(str(url))}: {exc}", secrets=self._secrets()
            ) from None

    async def _exchange(self, method: str, url: str | httpx.URL, *, model: str | None, **kwargs: Any) -> httpx.Response:
        """One request in a limiter slot, retries included; inside a rollout, bounded by what remains of its time."""
        deadline = current_deadline()
        if deadline is None:
            async with self.limiter.slot():
                return await self._send(method, url, model=model, **kwargs)
        return await self._exchange_before(deadline, method, url, model=model, **kwargs)

    async def _exchange_before(
        self, deadline: RolloutDeadline, method: str, url: str | httpx.URL, *, model: str | None, **kwargs: Any
    ) -> httpx.Response:
        # Waiting for a slot (a Retry-After pause) and retry back-offs are the endpoint's time, not the agent's:
        # the request stays registered as unanswered throughout.
        shown = self._redacted_endpoint if url is self._endpoint_url else redact_url(str(url))
        with deadline.pending(model, shown) as pending:
            bound = asyncio.timeout(deadline.remaining())
            try:
                async with bound, self.limiter.slot():
                    return await self._send(method, url, model=model, pending=pending, **kwargs)
            except TimeoutError:
                if not bound.expired():
                    raise
                raise deadline.ran_out(pending, secrets=self._secrets()) from None

    def _raise_for_status(self, response: httpx.Response, url: str, model: str | None) -> None:
        if 200 <= response.status_code < 300:
            return
        raise error_for_status(
            response.status_code,
            response.content,
            url=url,
            model=model,
            retry_after=retry_after_seconds(response, max_delay=self.retry.max_delay),
            secrets=self._secrets(),
        )

    def _body_excerpt(self, response: httpx.Response) -> str:
        text = response.content.decode("utf-8", errors="replace")
        return truncate(scrub_secrets(text, self._secrets())) or "<empty body>"

    async def complete(self, request: ChatRequest) -> ChatCompletion:
        """POST `{base_url}/chat/completions`; raises an `LLMError` subclass on any failure."""
        # Encoded once, by pydantic's compiled encoder (httpx's `json=` runs the standard library's on each retry).
        body = pydantic_core.to_json(request.to_wire())
        started = time.monotonic()
        response = await self._exchange(
            "POST", self._endpoint_url, model=request.model, content=body, headers=JSON_CONTENT
        )
        elapsed = time.monotonic() - started
        self._raise_for_status(response, self.endpoint, request.model)
        completion = self._parse_completion(response, request.model)
        usage = completion.usage
        meter = current_meter()
        if meter is not None:
            meter.record(request.model, usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)
        logger.debug(
            "chat completion model=%s status=%d seconds=%.3f prompt_tokens=%s completion_tokens=%s",
            request.model,
            response.status_code,
            elapsed,
            usage.prompt_tokens if usage else None,
            usage.completion_tokens if usage else None,
        )
        return completion

    def _parse_completion(self, response: httpx.Response, model: str) -> ChatCompletion:
        # The usual body is a completion with choices: read straight from the bytes by pydantic's compiled
        # parser. Anything else takes the path below, which says what is wrong with it.
        try:
            completion = ChatCompletion.model_validate_json(response.content)
        except ValidationError:
            pass
        else:
            if completion.choices:
                return completion
        where = redact_url(self.endpoint)
        subject = f"chat completion for model {model!r} at {where}"
        try:
            data: Any = response.json()
        except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser goes
            raise LLMResponseError(
                f"{subject} returned HTTP {response.status_code} with a body that is not JSON (garbage or "
                f"truncated): {self._body_excerpt(response)}",
                status=response.status_code,
                secrets=self._secrets(),
            ) from None
        if isinstance(data, dict) and data.get("error") and not data.get("choices"):
            # Some gateways (OpenRouter among them) report upstream failures inside a 200 body.
            error = data["error"]
            code = error.get("code") if isinstance(error, dict) else None
            status = code if isinstance(code, int) and 400 <= code < 600 else None
            if status is not None:
                raise error_for_status(
                    status, response.content, url=self.endpoint, model=model, secrets=self._secrets()
                )
            raise LLMResponseError(
                f"{subject} returned an error inside HTTP {response.status_code}: {self._body_excerpt(response)}",
                status=response.status_code,
                secrets=self._secrets(),
            )
        try:
            completion = ChatCompletion.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "<root>"
            raise LLMResponseError(
                f"{subject} returned a body that is not a chat completion ({loc}: {first['msg']}): "
                f"{self._body_excerpt(response)}",
                status=response.status_code,
                secrets=self._secrets(),
            ) from None
        if not completion.choices:
            raise LLMResponseError(
                f"{subject} returned no choices: {self._body_excerpt(response)}",
                status=response.status_code,
                secrets=self._secrets(),
            )
        return completion

    async def list_models(self) -> list[str]:
        """Model ids from `GET {base_url}/models` (not every server implements it)."""
        url = endpoint_url(self.base_url, "/models")
        response = await self._exchange("GET", url, model=None)
        self._raise_for_status(response, url, None)
        try:
            data: Any = response.json()
            items = data["data"] if isinstance(data, dict) else data
            return [str(item["id"]) for item in items]
        except (ValueError, KeyError, TypeError, RecursionError):
            raise LLMResponseError(
                f"GET {redact_url(url)} returned an unreadable model list: {self._body_excerpt(response)}",
                status=response.status_code,
                secrets=self._secrets(),
            ) from None

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


__all__ = ["DEFAULT_MAX_CONCURRENCY", "DEFAULT_TIMEOUT_SECONDS", "ChatClient", "normalise_base_url"]
