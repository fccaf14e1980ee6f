"""The Parquet warehouse (Hive layout), its row builders, the DuckDB catalog and the metric views."""

from eval_pipelines.warehouse.catalog import CatalogSummary, build_catalog, connect_read_only
from eval_pipelines.warehouse.rows import (
    RolloutContext,
    VerificationRecord,
    rollout_tables,
    tasks_table,
    verification_table,
)
from eval_pipelines.warehouse.store import SchemaMismatchError, Warehouse
from eval_pipelines.warehouse.tables import TABLES

__all__ = [
    "TABLES",
    "CatalogSummary",
    "RolloutContext",
    "SchemaMismatchError",
    "VerificationRecord",
    "Warehouse",
    "build_catalog",
    "connect_read_only",
    "rollout_tables",
    "tasks_table",
    "verification_table",
]
