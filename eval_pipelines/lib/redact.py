"""The one place data is made safe to show or store: secret fields are dropped, and credentials that ride in
URLs (`http://user:secret@host`, a provider's `?key=`) are removed. Every writer (Parquet, the run store,
artifacts, logs, Dagster metadata, error messages) goes through `strip_secrets` or `redact_url`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

#: Fields whose value is a secret: dropped before anything is persisted.
SECRET_FIELD_NAMES = frozenset({"api_key", "rag_api_key", "authorization", "API-Key"})
#: Fields whose value is a URL that may carry credentials: stored redacted.
URL_FIELD_NAMES = frozenset({"base_url"})

UNPARSEABLE_URL = "<unparseable URL>"


def redact_url(url: httpx.URL | str) -> str:
    """The URL without user-info, query or fragment. A URL that cannot be parsed (control characters, say) is
    shown as a placeholder, so describing an error never raises another."""
    # Imported here: the schemas import this module, and the processes that need only them (verifier workers)
    # would pay for httpx's import, about a third of their start-up.
    import httpx

    try:
        parsed = httpx.URL(str(url))
        return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))
    except (httpx.InvalidURL, ValueError, TypeError):
        return UNPARSEABLE_URL


def redact_optional_url(url: str | None) -> str | None:
    """`redact_url` for an optional field; None and "" stay as they are."""
    return redact_url(url) if url else url


def strip_secrets(data: Any) -> Any:
    """JSON-compatible data as it may be persisted: secret fields dropped, URL fields redacted, recursively."""
    if isinstance(data, dict):
        return {
            k: redact_optional_url(v) if k in URL_FIELD_NAMES and isinstance(v, str) else strip_secrets(v)
            for k, v in data.items()
            if k not in SECRET_FIELD_NAMES
        }
    if isinstance(data, list):
        return [strip_secrets(v) for v in data]
    return data
