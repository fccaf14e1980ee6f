"""Typed errors of the chat-completions client.

`error_type` carries the string values of `ModelTestErrorType`, so the service's `/test-model-config`
answer is a direct read of the exception. Every message is scrubbed of the API key before it is stored:
messages end up in logs, Parquet and the Dagster event log, and servers sometimes echo the key back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, ClassVar

import httpx

from eval_pipelines.lib.redact import redact_url
from eval_pipelines.schemas.taskgen import ModelTestErrorType

MAX_SERVER_MESSAGE_CHARS = 300
REDACTED = "[REDACTED]"
# Shorter "keys" are placeholders, and replacing them would mangle every message they occur in.
MIN_SCRUBBED_SECRET_LENGTH = 4

# Defence in depth for keys we were not told about (a server echoing a header or another provider's key).
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+")
_KEY_LIKE = re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_-]{16,}")
# A 400 that really means "no such model": OpenAI, vLLM, Ollama and proxies phrase it differently.
_MODEL_MISSING = re.compile(
    r"model_not_found|no such model|unknown model|invalid model|"
    r"model\b.{0,120}?\b(not found|does not exist|doesn't exist|not exist|is not available|not available)",
    re.IGNORECASE | re.DOTALL,
)


def scrub_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Replace every known secret and anything that looks like a bearer token or API key."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SCRUBBED_SECRET_LENGTH:
            text = text.replace(secret, REDACTED)
    text = _BEARER.sub(rf"\1 {REDACTED}", text)
    return _KEY_LIKE.sub(REDACTED, text)


def truncate(text: str, limit: int = MAX_SERVER_MESSAGE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def server_message(body: bytes | str) -> str:
    """The human-readable error message of a response body, whichever shape the server uses.

    OpenAI: `{"error": {"message"}}`; some proxies: `{"error": "text"}`; FastAPI: `{"detail": ...}`;
    others: `{"message"}`. Falls back to the raw text.
    """
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        data: Any = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("msg")
            if message:
                return str(message)
            return json.dumps(error)
        if isinstance(error, str) and error:
            return error
        detail = data.get("detail")
        if isinstance(detail, str):
            return detail
        if isinstance(detail, list):
            parts = [str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail]
            return "; ".join(parts)
        if isinstance(data.get("message"), str):
            return str(data["message"])
    return text.strip()


def _error_code(body: bytes | str) -> str:
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        data: Any = json.loads(text)
    except ValueError:
        return ""
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return f"{data['error'].get('code') or ''} {data['error'].get('type') or ''}"
    return ""


class LLMError(Exception):
    """A chat completion failed. `status` is the HTTP status when there was one."""

    default_error_type: ClassVar[ModelTestErrorType] = ModelTestErrorType.UNKNOWN

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: ModelTestErrorType | None = None,
        retry_after: float | None = None,
        secrets: Iterable[str | None] = (),
    ) -> None:
        clean = scrub_secrets(message, secrets)
        super().__init__(clean)
        self.message = clean
        self.status = status
        self.error_type = ModelTestErrorType(error_type or self.default_error_type)
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, error_type={self.error_type.value!r}, "
            f"message={self.message!r})"
        )


class LLMAuthError(LLMError):
    default_error_type = ModelTestErrorType.AUTHENTICATION_ERROR


class LLMRateLimitError(LLMError):
    default_error_type = ModelTestErrorType.RATE_LIMIT


class LLMTimeoutError(LLMError):
    default_error_type = ModelTestErrorType.TIMEOUT


class LLMConnectionError(LLMError):
    default_error_type = ModelTestErrorType.CONNECTION_ERROR


class LLMInvalidModelError(LLMError):
    default_error_type = ModelTestErrorType.INVALID_MODEL


class LLMBadRequestError(LLMError):
    default_error_type = ModelTestErrorType.BAD_REQUEST


class LLMResponseError(LLMError):
    """The server answered, but not with a usable completion (garbage or truncated body, or 5xx after retries)."""

    default_error_type = ModelTestErrorType.UNKNOWN


def error_for_status(
    status: int,
    body: bytes | str,
    *,
    url: httpx.URL | str,
    model: str | None = None,
    retry_after: float | None = None,
    secrets: Iterable[str | None] = (),
) -> LLMError:
    """Map a non-2xx answer (already retried as far as the policy allows) to a typed error."""
    secrets = tuple(secrets)
    # Scrub before truncating: truncation could cut a key in half and leave a prefix the scrubber misses.
    detail = truncate(scrub_secrets(server_message(body), secrets)) or "<empty body>"
    subject = f"chat completion for model {model!r}" if model else "request"
    where = redact_url(url)
    kwargs: dict[str, Any] = {"status": status, "secrets": secrets, "retry_after": retry_after}

    if status in (401, 403):
        return LLMAuthError(f"{subject} at {where} was refused (HTTP {status}): {detail}", **kwargs)
    if status == 404:
        return LLMInvalidModelError(
            f"{subject} at {where} got HTTP 404 (unknown model or wrong base_url): {detail}", **kwargs
        )
    if status == 429:
        return LLMRateLimitError(f"{subject} at {where} is rate limited (HTTP 429): {detail}", **kwargs)
    if status == 408:
        return LLMTimeoutError(f"{subject} at {where} timed out on the server (HTTP 408): {detail}", **kwargs)
    if 400 <= status < 500:
        raw = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
        if _MODEL_MISSING.search(_error_code(raw)) or _MODEL_MISSING.search(server_message(raw)):
            return LLMInvalidModelError(
                f"{subject} at {where} names an unknown model (HTTP {status}): {detail}", **kwargs
            )
        return LLMBadRequestError(f"{subject} at {where} was rejected (HTTP {status}): {detail}", **kwargs)
    if status >= 500:
        return LLMResponseError(f"{subject} at {where} failed on the server (HTTP {status}): {detail}", **kwargs)
    return LLMResponseError(f"{subject} at {where} returned unexpected HTTP {status}: {detail}", **kwargs)


def error_for_transport(
    exc: httpx.TransportError,
    *,
    url: httpx.URL | str,
    model: str | None = None,
    timeout_seconds: float | None = None,
    secrets: Iterable[str | None] = (),
) -> LLMError:
    """Map the transport error that exhausted the retries."""
    subject = f"chat completion for model {model!r}" if model else "request"
    where = redact_url(url)
    reason = truncate(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    if isinstance(exc, httpx.TimeoutException):
        limit = f" within {timeout_seconds:g}s" if timeout_seconds is not None else ""
        return LLMTimeoutError(f"{subject} at {where} got no response{limit} ({reason})", secrets=secrets)
    if isinstance(exc, httpx.RemoteProtocolError):
        # The connection worked; the server broke the HTTP exchange (e.g. closed mid-body).
        return LLMResponseError(
            f"{subject} at {where} got a malformed or incomplete response ({reason})", secrets=secrets
        )
    return LLMConnectionError(f"{subject} could not reach {where} ({reason})", secrets=secrets)
