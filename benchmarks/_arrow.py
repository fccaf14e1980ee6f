"""The benchmarks that generate a large warehouse build its columns with numpy and pyarrow (the `dev` extra; the
package itself imports neither) and hand them to `Warehouse` as its own tables, so the files are written by the
warehouse's own code, with the registered types."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from eval_pipelines.warehouse.rows import ColumnTable, build_table
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import TASKS, ColumnType, TableSpec, table_spec

#: The Arrow type of each warehouse column type (the same Parquet logical types).
ARROW_TYPES: dict[ColumnType, pa.DataType] = {
    ColumnType.STRING: pa.string(),
    ColumnType.INT32: pa.int32(),
    ColumnType.INT64: pa.int64(),
    ColumnType.FLOAT64: pa.float64(),
    ColumnType.BOOL: pa.bool_(),
    ColumnType.TIMESTAMP_UTC: pa.timestamp("us", tz="UTC"),
    ColumnType.STRING_LIST: pa.list_(pa.string()),
}


def arrow_schema(spec: TableSpec) -> pa.Schema:
    return pa.schema([pa.field(c.name, ARROW_TYPES[c.type], nullable=c.nullable) for c in spec.columns])


def column_table(spec: TableSpec, table: pa.Table) -> ColumnTable:
    return build_table(spec, table.to_pydict())


def write_arrow(
    warehouse: Warehouse, table_name: str, table: pa.Table, *, model_key: str, scenario_key: str, file_stem: str
) -> Path:
    spec = table_spec(table_name)
    return warehouse.write(
        table_name, column_table(spec, table), model_key=model_key, scenario_key=scenario_key, file_stem=file_stem
    )


def write_arrow_tasks(warehouse: Warehouse, table: pa.Table, scenario_key: str) -> Path:
    return warehouse.write_tasks(column_table(TASKS, table), scenario_key)
