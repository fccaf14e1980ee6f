"""Markdown tables for Dagster metadata."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "_no rows_"
    headers = list(rows[0])
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(h, "")).replace("|", "\\|") for h in headers) + " |")
    return "\n".join(lines)
