"""What every format's writer shares: the summary it returns, the error it raises, and how it writes a file so
that a failed export leaves nothing half-written behind."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

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
