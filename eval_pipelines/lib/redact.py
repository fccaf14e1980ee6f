"""The one place a URL is made safe to show or store: credentials ride in URLs more often than they should
(`http://user:secret@host`, a provider's `?key=`), and every writer (Parquet, the run store, artifacts, logs,
Dagster metadata, error messages) goes through `redact_url`."""

from __future__ import annotations

import httpx

UNPARSEABLE_URL = "<unparseable URL>"


def redact_url(url: httpx.URL | str) -> str:
    """The URL without user-info, query or fragment. A URL that cannot be parsed (control characters, say) is
    shown as a placeholder, so describing an error never raises another."""
    try:
        parsed = httpx.URL(str(url))
        return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))
    except (httpx.InvalidURL, ValueError, TypeError):
        return UNPARSEABLE_URL


def redact_optional_url(url: str | None) -> str | None:
    """`redact_url` for an optional field; None and "" stay as they are."""
    return redact_url(url) if url else url
