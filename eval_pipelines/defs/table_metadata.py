"""Dagster's standard table metadata for the assets that write warehouse tables.

`dagster/column_schema` and `dagster/table_name` go on the asset definition (the Catalog's Columns view fills
in before anything ran), `dagster/row_count` on each materialisation. The columns come from the warehouse's
registered schemas (`warehouse.tables`), the one home of every column and its doc.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from eval_pipelines.warehouse.tables import HIVE_COLUMN_DOCS, table_spec

#: The catalog file's DuckDB database and schema: `data/eval.duckdb` attaches as `eval`, views live in `main`.
CATALOG_SCHEMA = "eval.main"


def table_name(table: str) -> str:
    return f"{CATALOG_SCHEMA}.{table}"


def column_schema(table: str) -> dg.TableSchema:
    spec = table_spec(table)
    columns = [
        dg.TableColumn(
            name=column.name,
            type=str(column.type),
            description=column.doc,
            constraints=dg.TableColumnConstraints(nullable=column.nullable),
        )
        for column in spec.columns
    ]
    columns += [
        dg.TableColumn(name=name, type="string", description=HIVE_COLUMN_DOCS[name]) for name in spec.partition_by
    ]
    return dg.TableSchema(columns=columns)


def table_definition(table: str) -> dict[str, Any]:
    """For `@dg.asset(metadata=...)`."""
    return {"dagster/column_schema": column_schema(table), "dagster/table_name": table_name(table)}


def table_rows(table: str, rows: int) -> dict[str, Any]:
    """For a materialisation's metadata."""
    return {"dagster/row_count": int(rows), "dagster/table_name": table_name(table)}
