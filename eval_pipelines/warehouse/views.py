"""`MetricView`: one view (or computed table) of the catalog, with its documented columns. Its own module so that
the general metrics (`metrics.py`) and the benchmarks' own metrics (`benchmark_metrics.py`) both define views
without importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricView:
    name: str
    doc: str
    sql: str
    #: (column, doc) in view order; a test checks them against the view DuckDB builds.
    columns: tuple[tuple[str, str], ...]
    #: Columns that identify a row; a test checks they are unique.
    key: tuple[str, ...] = ()
    #: Computed once when the catalog is built and stored as a table, instead of a view evaluated per query.
    materialized: bool = False

    def statement(self) -> str:
        kind = "table" if self.materialized else "view"
        return f"create or replace {kind} {self.name} as\n{self.sql.strip()}"
