"""Read-side summaries shared by the CLI and the Dagster metadata: pass-rate rows and Markdown tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval_pipelines.warehouse.catalog import connect_read_only

PASS_RATE_QUERY = """
select scenario_id, model_name, is_simulated, n, passes, round(pass_rate, 4) as pass_rate,
       round(variance, 4) as variance, round(std, 4) as std
from pass_rates order by scenario_id, pass_rate desc, model_name
"""


def pass_rate_rows(duckdb_path: Path) -> list[dict[str, Any]]:
    con = connect_read_only(duckdb_path)
    try:
        cursor = con.execute(PASS_RATE_QUERY)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "_no rows_"
    headers = list(rows[0])
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(h, "")).replace("|", "\\|") for h in headers) + " |")
    return "\n".join(lines)
