"""The one place data is made safe to show or store: secret fields are dropped, and credentials that ride in
URLs (`http://user:secret@host`, a provider's `?key=`) are removed. Every writer (Parquet, the run store,
artifacts, Dagster metadata, error messages) goes through `strip_secrets` or `redact_url`, and every log line of
a process we start through `redact_text` (`install_log_redaction`, called by each entry point)."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
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


# --- log lines ------------------------------------------------------------------------------------------------

#: What stands in a log line where a secret was.
REDACTED = "[REDACTED]"
#: Query keys whose value is a credential (`?key=` is how some providers take theirs).
SECRET_QUERY_KEYS = ("key", "api_key", "api-key", "apikey", "token", "access_token", "auth", "password", "secret")

#: A URL's user-info (`user:password@`, greedy up to the last `@` before the host ends, as a parser reads it).
_USERINFO_IN_TEXT = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s?#\"'<>`]*@")
_SECRET_QUERY = re.compile(
    r"([?&;](?:" + "|".join(re.escape(k) for k in SECRET_QUERY_KEYS) + r")=)[^&;#\s\"'<>`]*", re.IGNORECASE
)
#: Loggers of the HTTP clients, whose INFO lines repeat every request's URL and say nothing a failure does not.
QUIETED_HTTP_LOGGERS = ("httpx", "httpcore")


def redact_text(text: str) -> str:
    """Free text (a log line, a traceback) with every URL's user-info removed (as `redact_url` removes it) and
    the values of credential query keys replaced, in a full URL or a bare path (an access-log line). The rest
    of a URL stays, so a line still says where a request went."""
    if "://" in text:
        text = _USERINFO_IN_TEXT.sub(r"\1", text)
    if "=" in text:
        text = _SECRET_QUERY.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def _redacted_arg(arg: Any) -> Any:
    if arg is None or isinstance(arg, int | float):
        return arg
    try:
        text = arg if isinstance(arg, str) else str(arg)
    except Exception:  # an argument that cannot be shown is the handler's to report, as logging does
        return arg
    safe = redact_text(text)
    # Replaced only when it held a credential: a formatter may read the arguments by type (uvicorn's access
    # formatter unpacks them), and a URL object (httpx's) is formatted with %s like its text.
    return safe if safe != text else arg


def redact_log_record(record: logging.LogRecord) -> logging.LogRecord:
    """The record with its message, arguments, traceback and stack made safe in place. Arguments stay
    arguments, so a formatter that reads them (uvicorn's access log) still works; only a credential split
    across them merges them into the message."""
    if isinstance(record.msg, str):
        record.msg = redact_text(record.msg)
    if isinstance(record.args, tuple):
        record.args = tuple(_redacted_arg(a) for a in record.args)
    elif isinstance(record.args, Mapping):
        record.args = {k: _redacted_arg(v) for k, v in record.args.items()}
    try:
        message = record.getMessage()
    except Exception:  # a malformed call is the handler's to report, as logging does
        message = None
    if message is not None and (safe := redact_text(message)) != message:
        record.msg, record.args = safe, None
    if record.exc_info and not record.exc_text:
        # Formatters reuse `exc_text` when it is set, so every handler shows this redacted traceback.
        traceback_text = logging.Formatter().formatException(record.exc_info)
        safe_traceback = redact_text(traceback_text)
        if safe_traceback != traceback_text:
            record.exc_text = safe_traceback
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)
    return record


_install_lock = threading.Lock()
_installed_factory: Callable[..., logging.LogRecord] | None = None


def install_log_redaction(*, quiet_http_clients: bool = True) -> None:
    """Make every log line of this process pass `redact_text`. Idempotent; call it at every entry point.

    A log record factory redacts each record as it is made, rather than a filter on the root handlers: the
    lines then reach every handler safe, including the handlers that never see the root's records (uvicorn's
    own, Dagster's) and the ones added after this call, and a formatter that reads a record's arguments keeps
    working. The HTTP clients' per-request INFO lines are turned down to WARNING unless their level was set
    explicitly; redaction holds at any level.
    """
    global _installed_factory
    with _install_lock:
        if _installed_factory is None or logging.getLogRecordFactory() is not _installed_factory:
            previous = logging.getLogRecordFactory()

            def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
                return redact_log_record(previous(*args, **kwargs))

            logging.setLogRecordFactory(redacting_factory)
            _installed_factory = redacting_factory
    if quiet_http_clients:
        for name in QUIETED_HTTP_LOGGERS:
            http_logger = logging.getLogger(name)
            if http_logger.level == logging.NOTSET:
                http_logger.setLevel(logging.WARNING)
