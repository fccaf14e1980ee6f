"""What every format's writer shares: the summary it returns, the error it raises, and how it writes a file so
that a failed export leaves nothing half-written behind."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata as package_metadata
from pathlib import Path
from typing import IO, Any

from eval_pipelines.lib.redact import redact_text, strip_secrets
from eval_pipelines.reports.data import ReportError


class ExportError(ReportError):
    """The export cannot be made as asked: a filter matches nothing, or --out is the wrong kind of path."""


@dataclass(frozen=True)
class ExportSummary:
    sweep_id: str
    format: str
    files: list[Path]
    #: rollouts written (for parquet: rows of `rollouts` copied)
    rollouts: int
    #: rollouts left out: errored and unscored ones of a jsonl export without `include_errors`
    left_out: int = 0
    #: rollout batches read (inspect and jsonl)
    batches: int = 0


class AtomicText:
    """A text file written under a temporary name and moved into place on success: a failed export never leaves
    a truncated log that a viewer would try to read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp")

    def __enter__(self) -> IO[str]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = self.tmp.open("w", encoding="utf-8")
        return self.handle

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.handle.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@functools.cache
def exporter_version() -> str:
    """This package's version, which every export names as the tool that wrote it (read once: reading a
    distribution's metadata parses its files, milliseconds a call)."""
    try:
        return package_metadata.version("eval_pipelines")
    except package_metadata.PackageNotFoundError:
        return "unknown"


def iso_utc(value: datetime | None) -> str | None:
    """A catalog timestamp in ISO 8601, in UTC (a naive one is taken as UTC, as the warehouse writes them)."""
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def scrubbed(value: Any) -> Any:
    """JSON-compatible data as an export may write it: secret fields dropped and URL fields redacted
    (`strip_secrets`), and every string's URL credentials and credential query values removed (`redact_text`),
    since a transcript is free text a model or a tool wrote. A string holding a JSON document (a tool call's
    arguments on the wire) is scrubbed as that document."""
    return _redacted_strings(strip_secrets(value))


def _redacted_string(text: str) -> str:
    if text.lstrip()[:1] in ("{", "["):
        try:
            document = json.loads(text)
        except ValueError:
            document = None
        if isinstance(document, dict | list) and (safe := scrubbed(document)) != document:
            return json.dumps(safe, ensure_ascii=False)
    return redact_text(text)


def _redacted_strings(value: Any) -> Any:
    if isinstance(value, str):
        return _redacted_string(value)
    if isinstance(value, dict):
        return {redact_text(k) if isinstance(k, str) else k: _redacted_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted_strings(v) for v in value]
    return value


_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")
#: Characters of a task id kept in a rollout's file or folder name; the name's digest keeps it unique.
_NAME_PART_CHARS = 60


def name_part(text: str | None, fallback: str) -> str:
    """Text made safe as part of a file name on any file system: letters, digits, `.`, `_` and `-` only, never
    leading with a dot, at most a few dozen characters."""
    cleaned = _UNSAFE_IN_NAME.sub("-", text or "").strip("-.")[:_NAME_PART_CHARS].strip("-.")
    return cleaned or fallback


def rollout_stem(row: Mapping[str, Any]) -> str:
    """`<task>_<YYYYmmdd_HHMMSS>_<digest>`: the task and the rollout's creation time in UTC, as SimLab names its
    run folders, and a digest of the rollout id, so the name is unique and the same at every export."""
    created = row.get("created_at") or row.get("started_at")
    if isinstance(created, datetime):
        stamp = (created if created.tzinfo else created.replace(tzinfo=UTC)).astimezone(UTC).strftime("%Y%m%d_%H%M%S")
    else:
        stamp = "00000000_000000"
    digest = hashlib.sha256(str(row["rollout_id"]).encode()).hexdigest()[:12]
    return f"{name_part(row.get('task_id'), 'task')}_{stamp}_{digest}"
