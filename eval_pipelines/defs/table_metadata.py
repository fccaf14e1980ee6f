"""Dagster's standard table metadata for the assets that write warehouse tables.

A table asset is one of kind `parquet` (`TABLE_KIND`): it writes a warehouse table. `dagster/column_schema` and
`dagster/table_name` go on its definition (the Catalog's Columns view fills in before anything ran), and again
with `dagster/row_count` on each of its materialisations, also when it wrote nothing (each one records the columns
it was written with, so Dagster can show a schema change between two). The columns come from the
warehouse's registered schemas (`warehouse.tables`), the one home of every column and its doc. Row counts of the
other tables one step writes, and of the catalog's views, go in a table-valued entry (`table_counts`), never in
keys of our own per table.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import dagster as dg

from eval_pipelines.warehouse.tables import HIVE_COLUMN_DOCS, table_spec

#: The storage kind of an asset that writes a warehouse table.
TABLE_KIND = "parquet"
#: The catalog file's DuckDB database and schema: `data/eval.duckdb` attaches as `eval`, views live in `main`.
CATALOG_SCHEMA = "eval.main"


def table_name(table: str) -> str:
    return f"{CATALOG_SCHEMA}.{table}"


@cache
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
    return {
        "dagster/row_count": int(rows),
        "dagster/table_name": table_name(table),
        "dagster/column_schema": column_schema(table),
    }


_COUNTS_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn(name="table", type="string", description="table or view of the catalog (eval.main)"),
        dg.TableColumn(name="rows", type="int"),
    ]
)


def table_counts(rows_by_table: dict[str, int]) -> dg.TableMetadataValue:
    """Several tables' row counts as one table-valued metadata entry (shown as a table in the UI)."""
    records = [dg.TableRecord({"table": name, "rows": int(rows)}) for name, rows in sorted(rows_by_table.items())]
    return dg.MetadataValue.table(records=records, schema=_COUNTS_SCHEMA)
