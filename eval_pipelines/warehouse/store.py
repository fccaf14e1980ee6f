"""Parquet files in Hive layout: `<root>/<table>/model=<m>/scenario=<s>/<file_stem>.parquet`.

Every write goes to a temp file in the destination folder and is then `os.replace`d into place, so a reader
(DuckDB globbing `*.parquet`) sees the old file or the new one, never half a file, and re-writing a stem
replaces it instead of adding a duplicate.

DuckDB writes and reads the files (no Arrow): a table's rows are spooled to a temp file beside the target as JSON
lines, each line a slice of the columns (`{"column": [values...]}`), and DuckDB copies them into Parquet with the
registered column types (`read_json` with explicit `columns`, `unnest` back to rows, `COPY ... (FORMAT parquet)`).
Measured without pyarrow, this is the fastest way in: one JSON object per row costs 3-4x the encoding, the columns as
list parameters of a query are slower still, and `executemany` is some hundred times slower.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import duckdb

from eval_pipelines.warehouse.rows import ColumnTable
from eval_pipelines.warehouse.tables import HIVE_MODEL, HIVE_SCENARIO, TASKS, ColumnType, TableSpec, table_spec

PARQUET_SUFFIX = ".parquet"
#: Temp files end in this suffix, not `.parquet`, so the catalog's globs never pick up a half-written file.
TEMP_SUFFIX = ".tmp"
#: The rows on their way to DuckDB, beside the temp Parquet file (also ignored by every glob).
_SPOOL_SUFFIX = f".ndjson{TEMP_SUFFIX}"
TASKS_FILE_STEM = "tasks"
COMPRESSION = "zstd"
#: Rows per spooled JSON line: bounds the size of one JSON object, which `read_json` holds whole.
_ROWS_PER_LINE = 2_000
#: `read_json`'s per-object limit (its default is 16 MB): a line of large messages or observations can be more.
_MAX_LINE_BYTES = 1 << 30
_SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")


class SchemaMismatchError(ValueError):
    """A table handed to the warehouse does not have the registered schema of its table."""


def _check_part(kind: str, value: str) -> str:
    # These strings become path components: anything else could escape the table folder or split a partition.
    if not isinstance(value, str) or not _SAFE.match(value) or value in {".", ".."}:
        raise ValueError(f"{kind} must match [A-Za-z0-9_.-]+ (and not be '.' or '..'), got {value!r}")
    return value


def describe_schema_mismatch(table_name: str, actual: TableSpec, expected: TableSpec) -> str:
    problems: list[str] = []
    actual_columns = {c.name: c for c in actual.columns}
    expected_columns = {c.name: c for c in expected.columns}
    missing = [n for n in expected.column_names if n not in actual_columns]
    extra = [n for n in actual.column_names if n not in expected_columns]
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(f"unexpected columns {extra}")
    for name, want in expected_columns.items():
        got = actual_columns.get(name)
        if got is None:
            continue
        if got.type != want.type:
            problems.append(f"{name}: type {got.type} != {want.type}")
        if got.nullable != want.nullable:
            problems.append(f"{name}: nullable={got.nullable}, expected nullable={want.nullable}")
    if not problems and actual.column_names != expected.column_names:
        problems.append(f"column order {list(actual.column_names)} != {list(expected.column_names)}")
    detail = "; ".join(problems) or "schemas differ"
    return f"table {table_name!r} does not match its registered schema: {detail}"


def _quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_DATABASE: tuple[int, duckdb.DuckDBPyConnection] | None = None
_DATABASE_LOCK = threading.Lock()


def _connect() -> duckdb.DuckDBPyConnection:
    """A cursor of its own (a few microseconds) on this process's in-memory DuckDB, which holds no data: opening a
    database takes 10-30 ms, and a write or read needs one. Never shared between threads; a forked child opens its
    own database. In UTC, so a timestamp without an offset is UTC, as every service stamps, and reads come back in
    UTC."""
    global _DATABASE
    with _DATABASE_LOCK:
        if _DATABASE is None or _DATABASE[0] != os.getpid():
            database = duckdb.connect()
            database.execute("set global TimeZone = 'UTC'")
            _DATABASE = (os.getpid(), database)
        return _DATABASE[1].cursor()


def _spool(handle: IO[str], table: ColumnTable) -> None:
    """Append the table's rows to a spool: JSON lines of column slices; timestamps as ISO 8601 text, which
    `read_json` parses (a naive one as UTC, the session's zone)."""
    columns: dict[str, list[Any]] = {}
    for column in table.spec.columns:
        values = table.column(column.name)
        if column.type is ColumnType.TIMESTAMP_UTC:
            values = [v.isoformat() if isinstance(v, datetime) else v for v in values]
        columns[column.name] = values
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    for start in range(0, table.num_rows, _ROWS_PER_LINE):
        end = start + _ROWS_PER_LINE
        handle.write(encode({name: values[start:end] for name, values in columns.items()}))
        handle.write("\n")


def _copy_to_parquet(spec: TableSpec, spool: Path, target: Path) -> None:
    """DuckDB turns the spooled rows into a Parquet file at `target`, columns in the registered order and types."""
    # Each line holds a list per column; the unnests of one select zip them back into rows, in order.
    types = ", ".join(f"{_quote_literal(c.name)}: {_quote_literal(f'{c.type.value}[]')}" for c in spec.columns)
    columns = ", ".join(f"unnest({_quote_ident(c.name)}) as {_quote_ident(c.name)}" for c in spec.columns)
    con = _connect()
    try:
        con.execute(
            f"copy (select {columns} from read_json({_quote_literal(str(spool))}, format = 'newline_delimited', "
            f"columns = {{{types}}}, maximum_object_size = {_MAX_LINE_BYTES})) "
            f"to {_quote_literal(str(target))} (format parquet, compression {COMPRESSION}, use_tmp_file false)"
        )
    finally:
        con.close()
    # DuckDB does not sync the file; without fsync a crash after the rename can leave an empty file under the
    # final name.
    with open(target, "rb") as fh:
        os.fsync(fh.fileno())


def _temp_beside(target: Path, suffix: str) -> Path:
    # Same folder as the target so os.replace is a rename on one filesystem (atomic), never a copy.
    return target.with_name(f".{target.stem}.{uuid.uuid4().hex}{suffix}")


def file_columns(paths: Sequence[Path]) -> set[str]:
    """The columns any of the Parquet files has."""
    if not paths:
        return set()
    con = _connect()
    try:
        files = "[" + ", ".join(_quote_literal(str(p)) for p in paths) + "]"
        rows = con.execute(f"select distinct name from parquet_schema({files})").fetchall()
    finally:
        con.close()
    return {str(r[0]) for r in rows}


def distinct_values(paths: Sequence[Path], column: str) -> list[Any]:
    """The distinct values of one column over the Parquet files (none when no file has the column)."""
    if not paths or column not in file_columns(paths):
        return []
    files = "[" + ", ".join(_quote_literal(str(p)) for p in paths) + "]"
    con = _connect()
    try:
        rows = con.execute(
            f"select distinct {_quote_ident(column)} from "
            f"read_parquet({files}, union_by_name = true, hive_partitioning = false)"
        ).fetchall()
    finally:
        con.close()
    return [r[0] for r in rows]


def read_rows(paths: Sequence[Path], columns: Sequence[str], *, sweep_id: str | None = None) -> list[dict[str, Any]]:
    """The rows of the Parquet files as dicts of `columns`, in file and row order; a column none of the files has
    (they predate it) reads as None, and with `sweep_id` only that sweep's rows are read. Timestamps come back as
    aware datetimes in UTC."""
    if not paths:
        return []
    present = file_columns(paths)
    read = [c for c in columns if c in present]
    if sweep_id is not None and "sweep_id" not in present:
        return []
    files = "[" + ", ".join(_quote_literal(str(p)) for p in paths) + "]"
    # union_by_name: a file written before a column existed reads it as NULL; the Hive columns stay in the path.
    source = f"read_parquet({files}, union_by_name = true, hive_partitioning = false)"
    select = ", ".join(_quote_ident(c) for c in read) or "1"
    where = " where sweep_id = $sweep_id" if sweep_id is not None else ""
    con = _connect()
    try:
        result = con.execute(f"select {select} from {source}{where}", {"sweep_id": sweep_id} if where else None)
        values = result.fetchall()
    finally:
        con.close()
    rows = []
    for value in values:
        row: dict[str, Any] = dict.fromkeys(columns)
        for name, item in zip(read, value, strict=False):
            # DuckDB hands out its own UTC zone object; the datetime module's keeps comparisons with `UTC` simple.
            row[name] = item.replace(tzinfo=UTC) if isinstance(item, datetime) and item.tzinfo is not None else item
        rows.append(row)
    return rows


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

    def write(self, table_name: str, table: ColumnTable, *, model_key: str, scenario_key: str, file_stem: str) -> Path:
        """Write (or atomically replace) one file of a model x scenario partitioned table."""
        target = self.path_for(table_name, model_key=model_key, scenario_key=scenario_key, file_stem=file_stem)
        self._check_schema(table_name, table)
        return self._atomic_write(table, target)

    def write_streams(
        self, chunks: Iterable[dict[str, ColumnTable]], *, model_key: str, scenario_key: str, file_stem: str
    ) -> dict[str, int]:
        """Write several model x scenario tables from a stream of {table: rows} chunks. Each chunk is appended to
        its table's spool file on disk as it arrives, so a large partition is never held in memory; every file is
        written and replaced atomically at the end, like `write`. Returns the rows written per table."""
        spools: dict[str, tuple[Path, Path, IO[str]]] = {}
        rows: dict[str, int] = {}
        try:
            for chunk in chunks:
                for name, table in chunk.items():
                    self._check_schema(name, table)
                    if name not in spools:
                        target = self.path_for(
                            name, model_key=model_key, scenario_key=scenario_key, file_stem=file_stem
                        )
                        target.parent.mkdir(parents=True, exist_ok=True)
                        spool = _temp_beside(target, _SPOOL_SUFFIX)
                        spools[name] = (target, spool, open(spool, "w", encoding="utf-8"))  # noqa: SIM115 - closed below
                        rows[name] = 0
                    _spool(spools[name][2], table)
                    rows[name] += table.num_rows
            for name, (target, spool, handle) in spools.items():
                handle.close()
                self._replace_from_spool(table_spec(name), spool, target)
        finally:
            for _, spool, handle in spools.values():
                handle.close()
                spool.unlink(missing_ok=True)
        return rows

    def write_scenario_table(self, table_name: str, table: ColumnTable, *, scenario_key: str, file_stem: str) -> Path:
        """Idempotent like `write`, for the tables partitioned by scenario only (tasks, synthetic_rows)."""
        target = self.scenario_path(table_name, scenario_key=scenario_key, file_stem=file_stem)
        self._check_schema(table_name, table)
        return self._atomic_write(table, target)

    def write_tasks(self, table: ColumnTable, scenario_key: str) -> Path:
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
        files = self.partition_files(table_name, model_key=model_key, scenario_key=scenario_key)
        return read_rows(files, columns, sweep_id=sweep_id)

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

    def read(self, table_name: str) -> ColumnTable:
        """All files of a table concatenated (without the Hive columns); for tests and small tables."""
        spec = table_spec(table_name)
        rows = read_rows(self.files(table_name), spec.column_names)
        return ColumnTable(spec, {name: [row[name] for row in rows] for name in spec.column_names})

    @staticmethod
    def _model_scenario_spec(table_name: str) -> TableSpec:
        spec = table_spec(table_name)
        if spec.partition_by != (HIVE_MODEL, HIVE_SCENARIO):
            raise ValueError(f"table {table_name!r} is partitioned by {spec.partition_by}; use write_tasks/tasks_path")
        return spec

    @staticmethod
    def _check_schema(table_name: str, table: ColumnTable) -> None:
        expected = table_spec(table_name)
        if table.spec != expected:
            raise SchemaMismatchError(describe_schema_mismatch(table_name, table.spec, expected))

    @staticmethod
    def _replace_from_spool(spec: TableSpec, spool: Path, target: Path) -> None:
        tmp = _temp_beside(target, f"{PARQUET_SUFFIX}{TEMP_SUFFIX}")
        try:
            _copy_to_parquet(spec, spool, tmp)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    @classmethod
    def _atomic_write(cls, table: ColumnTable, target: Path) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        spool = _temp_beside(target, _SPOOL_SUFFIX)
        try:
            with open(spool, "w", encoding="utf-8") as handle:
                _spool(handle, table)
            cls._replace_from_spool(table.spec, spool, target)
        finally:
            spool.unlink(missing_ok=True)
        return target
