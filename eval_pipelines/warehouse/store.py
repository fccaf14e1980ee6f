"""Parquet files in Hive layout: `<root>/<table>/model=<m>/scenario=<s>/<file_stem>.parquet`.

Every write goes to a temp file in the destination folder and is then `os.replace`d into place, so a reader
(DuckDB globbing `*.parquet`) sees the old file or the new one, never half a file, and re-writing a stem
replaces it instead of adding a duplicate.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from eval_pipelines.warehouse.tables import HIVE_MODEL, HIVE_SCENARIO, TASKS, TableSpec, table_spec

PARQUET_SUFFIX = ".parquet"
#: Temp files end in this suffix, not `.parquet`, so the catalog's globs never pick up a half-written file.
TEMP_SUFFIX = ".tmp"
TASKS_FILE_STEM = "tasks"
COMPRESSION = "zstd"
_SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")


class SchemaMismatchError(ValueError):
    """A table handed to the warehouse does not have the registered schema of its table."""


def _check_part(kind: str, value: str) -> str:
    # These strings become path components: anything else could escape the table folder or split a partition.
    if not isinstance(value, str) or not _SAFE.match(value) or value in {".", ".."}:
        raise ValueError(f"{kind} must match [A-Za-z0-9_.-]+ (and not be '.' or '..'), got {value!r}")
    return value


def describe_schema_mismatch(table_name: str, actual: pa.Schema, expected: pa.Schema) -> str:
    problems: list[str] = []
    actual_fields = {f.name: f for f in actual}
    expected_fields = {f.name: f for f in expected}
    missing = [n for n in expected.names if n not in actual_fields]
    extra = [n for n in actual.names if n not in expected_fields]
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(f"unexpected columns {extra}")
    for name, want in expected_fields.items():
        got = actual_fields.get(name)
        if got is None:
            continue
        if got.type != want.type:
            problems.append(f"{name}: type {got.type} != {want.type}")
        if got.nullable != want.nullable:
            problems.append(f"{name}: nullable={got.nullable}, expected nullable={want.nullable}")
    if not problems and actual.names != expected.names:
        problems.append(f"column order {actual.names} != {expected.names}")
    detail = "; ".join(problems) or "schemas differ"
    return f"table {table_name!r} does not match its registered schema: {detail}"


def hive_partition(model_key: str, scenario_key: str) -> Path:
    """The relative folder of one model x scenario partition (`model=<m>/scenario=<s>`): the one home of the
    Hive layout, also used for files kept beside the warehouse per partition (traces, assessment manifests)."""
    return Path(f"{HIVE_MODEL}={_check_part('model_key', model_key)}") / (
        f"{HIVE_SCENARIO}={_check_part('scenario_key', scenario_key)}"
    )


class Warehouse:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def table_dir(self, table_name: str) -> Path:
        return self.root / table_spec(table_name).name

    def path_for(self, table_name: str, *, model_key: str, scenario_key: str, file_stem: str) -> Path:
        spec = self._model_scenario_spec(table_name)
        return (
            self.root
            / spec.name
            / hive_partition(model_key, scenario_key)
            / f"{_check_part('file_stem', file_stem)}{PARQUET_SUFFIX}"
        )

    def scenario_path(self, table_name: str, *, scenario_key: str, file_stem: str) -> Path:
        """`<root>/<table>/scenario=<s>/<stem>.parquet` for the tables partitioned by scenario only."""
        spec = table_spec(table_name)
        if spec.partition_by != (HIVE_SCENARIO,):
            raise ValueError(f"table {table_name!r} is not partitioned by scenario only")
        return (
            self.root
            / spec.name
            / f"{HIVE_SCENARIO}={_check_part('scenario_key', scenario_key)}"
            / f"{_check_part('file_stem', file_stem)}{PARQUET_SUFFIX}"
        )

    def tasks_path(self, scenario_key: str) -> Path:
        return self.scenario_path(TASKS.name, scenario_key=scenario_key, file_stem=TASKS_FILE_STEM)

    def write(self, table_name: str, table: pa.Table, *, model_key: str, scenario_key: str, file_stem: str) -> Path:
        """Write (or atomically replace) one file of a model x scenario partitioned table."""
        target = self.path_for(table_name, model_key=model_key, scenario_key=scenario_key, file_stem=file_stem)
        self._check_schema(table_name, table)
        return self._atomic_write(table, target)

    def write_streams(
        self, chunks: Iterable[dict[str, pa.Table]], *, model_key: str, scenario_key: str, file_stem: str
    ) -> dict[str, int]:
        """Write several model x scenario tables from a stream of {table: rows} chunks, each chunk appended as a
        row group as it arrives, so a large partition is never held in memory. Every file is replaced
        atomically at the end, like `write`. Returns the rows written per table."""
        writers: dict[str, tuple[Path, Path, Any, pq.ParquetWriter]] = {}
        rows: dict[str, int] = {}
        try:
            for chunk in chunks:
                for name, table in chunk.items():
                    self._check_schema(name, table)
                    if name not in writers:
                        target = self.path_for(
                            name, model_key=model_key, scenario_key=scenario_key, file_stem=file_stem
                        )
                        target.parent.mkdir(parents=True, exist_ok=True)
                        tmp = target.with_name(f".{target.stem}.{uuid.uuid4().hex}{PARQUET_SUFFIX}{TEMP_SUFFIX}")
                        handle = open(tmp, "wb")  # noqa: SIM115 - closed in the finally below
                        writer = pq.ParquetWriter(handle, table_spec(name).schema, compression=COMPRESSION)
                        writers[name] = (target, tmp, handle, writer)
                        rows[name] = 0
                    writers[name][3].write_table(table)
                    rows[name] += table.num_rows
            for target, tmp, handle, writer in writers.values():
                writer.close()
                handle.flush()
                os.fsync(handle.fileno())
                handle.close()
                os.replace(tmp, target)
        except BaseException:
            for _, tmp, handle, writer in writers.values():
                with contextlib.suppress(Exception):
                    writer.close()
                handle.close()
                tmp.unlink(missing_ok=True)
            raise
        return rows

    def write_scenario_table(self, table_name: str, table: pa.Table, *, scenario_key: str, file_stem: str) -> Path:
        """Idempotent like `write`, for the tables partitioned by scenario only (tasks, synthetic_rows)."""
        target = self.scenario_path(table_name, scenario_key=scenario_key, file_stem=file_stem)
        self._check_schema(table_name, table)
        return self._atomic_write(table, target)

    def write_tasks(self, table: pa.Table, scenario_key: str) -> Path:
        return self.write_scenario_table(TASKS.name, table, scenario_key=scenario_key, file_stem=TASKS_FILE_STEM)

    def remove(self, table_name: str, *, model_key: str, scenario_key: str, file_stem: str) -> bool:
        """Delete one file; True if it existed. Empty partition folders are kept (harmless to the globs)."""
        target = self.path_for(table_name, model_key=model_key, scenario_key=scenario_key, file_stem=file_stem)
        try:
            target.unlink()
        except FileNotFoundError:
            return False
        return True

    def remove_tasks(self, scenario_key: str) -> bool:
        try:
            self.tasks_path(scenario_key).unlink()
        except FileNotFoundError:
            return False
        return True

    def files(self, table_name: str) -> list[Path]:
        """The table's Parquet files, sorted; temp files of writes in progress are excluded."""
        spec = table_spec(table_name)
        pattern = "/".join(["*"] * len(spec.partition_by) + [f"*{PARQUET_SUFFIX}"])
        return sorted(p for p in self.table_dir(table_name).glob(pattern) if p.is_file())

    def partition_files(self, table_name: str, *, model_key: str, scenario_key: str) -> list[Path]:
        """One model x scenario partition's files of a table, sorted."""
        folder = self.path_for(table_name, model_key=model_key, scenario_key=scenario_key, file_stem="x").parent
        return sorted(p for p in folder.glob(f"*{PARQUET_SUFFIX}") if p.is_file())

    def models_of_scenario(self, table_name: str, scenario_key: str) -> list[str]:
        """The model keys that have a partition folder of `table_name` for this scenario, sorted."""
        self._model_scenario_spec(table_name)
        folders = self.table_dir(table_name).glob(f"{HIVE_MODEL}=*/{HIVE_SCENARIO}={scenario_key}")
        return sorted(p.parent.name.partition("=")[2] for p in folders if p.is_dir())

    def partition_rows(
        self,
        table_name: str,
        *,
        model_key: str,
        scenario_key: str,
        columns: Sequence[str],
        sweep_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """The partition's rows of a table as dicts, only `columns` (a column a file predates reads as None),
        and only the rows of `sweep_id` when given: a step of one sweep never sees another sweep's rows."""
        rows: list[dict[str, Any]] = []
        for path in self.partition_files(table_name, model_key=model_key, scenario_key=scenario_key):
            present = set(pq.read_schema(path).names)
            read = [c for c in dict.fromkeys([*columns, "sweep_id"]) if c in present]
            filters = [("sweep_id", "=", sweep_id)] if sweep_id is not None and "sweep_id" in present else None
            for row in pq.read_table(path, columns=read, filters=filters).to_pylist():
                rows.append({c: row.get(c) for c in columns})
        return rows

    def newest_sweep(self, *, model_key: str, scenario_key: str) -> str | None:
        """The sweep whose rollouts were created last in the partition: a step run without a sweep id (a manual
        materialisation, an automation tick) works on that sweep's rows."""
        rows = self.partition_rows(
            "rollouts", model_key=model_key, scenario_key=scenario_key, columns=("sweep_id", "created_at")
        )
        dated = [r for r in rows if r["sweep_id"]]
        if not dated:
            return None
        return max(dated, key=lambda r: (r["created_at"] is not None, r["created_at"] or 0))["sweep_id"]

    def read(self, table_name: str) -> pa.Table:
        """All files of a table concatenated (without the Hive columns); for tests and small tables."""
        schema = table_spec(table_name).schema
        tables = [pq.read_table(p, schema=schema) for p in self.files(table_name)]
        return pa.concat_tables(tables) if tables else schema.empty_table()

    @staticmethod
    def _model_scenario_spec(table_name: str) -> TableSpec:
        spec = table_spec(table_name)
        if spec.partition_by != (HIVE_MODEL, HIVE_SCENARIO):
            raise ValueError(f"table {table_name!r} is partitioned by {spec.partition_by}; use write_tasks/tasks_path")
        return spec

    @staticmethod
    def _check_schema(table_name: str, table: pa.Table) -> None:
        expected = table_spec(table_name).schema
        if not table.schema.equals(expected, check_metadata=False):
            raise SchemaMismatchError(describe_schema_mismatch(table_name, table.schema, expected))

    @staticmethod
    def _atomic_write(table: pa.Table, target: Path) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Same folder as the target so os.replace is a rename on one filesystem (atomic), never a copy.
        tmp = target.with_name(f".{target.stem}.{uuid.uuid4().hex}{PARQUET_SUFFIX}{TEMP_SUFFIX}")
        try:
            with open(tmp, "wb") as fh:
                pq.write_table(table, fh, compression=COMPRESSION)
                fh.flush()
                # Without fsync a crash after the rename can leave a zero-length file under the final name.
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return target
