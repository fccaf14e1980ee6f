"""The catalog side of the export, apart from any format: the writers see rollouts only as batches of records, so
how little is read at a time is decided here alone.

A model x scenario group is read in one pass per table, never per batch (a per-batch query scans the group's files
once per batch, so the time would grow with the square of the group's size). Each table's rows of the group's
rollouts (rollouts, verifications, messages, tool calls, retried attempts) are tagged with their rollout's place in
the export order and spooled by DuckDB to temporary Parquet files, one per range of places (`_Spool`). The ranges
are then read in order: the rollouts query (`_GROUP_ROLLOUTS_SQL`, with the catalog's own `rollout_scores` and
`verifications_latest` SQL) runs on one range's rows at a time in a scratch in-memory DuckDB, and each batch takes
its transcripts from the head of the sorted transcript spools. Time grows with the group's size, and memory with a
range's, not the group's.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from eval_pipelines.lib.suggest import did_you_mean
from eval_pipelines.reports.export.output import ExportError
from eval_pipelines.warehouse.metrics import ROLLOUT_SCORES, VERIFICATIONS_LATEST

#: Rollouts read at once; their messages, tool calls and retries are held only while the batch is written.
DEFAULT_BATCH_SIZE = 200
#: Rollouts per spool file (a range of places in the export order); a file is read into memory whole.
SPOOL_ROLLOUTS = 2_000
#: At most this many spool files per table and group (all open while spooling): past SPOOL_ROLLOUTS x
#: MAX_SPOOL_FILES rollouts in a group, each file holds more rollouts.
MAX_SPOOL_FILES = 200
#: Rows turned into dicts at a time when reading a spool back.
_DICT_ROWS = 4_096
#: The spooled column of a row's rollout place in the export order, the name of the group's places (a Parquet
#: file beside the spools, which the spooling queries join), and the Hive column that splits a spool into its files.
_ORDINAL = "_ordinal"
_KEYS = "_export_rollout_places"
_FILE = "_file"


@dataclass(frozen=True)
class Group:
    """One model x scenario of the sweep, with the Hive keys that let DuckDB read only its files."""

    model_name: str
    scenario_id: str
    model_key: str
    scenario_key: str

    def params(self, sweep_id: str) -> dict[str, Any]:
        return {
            "sweep": sweep_id,
            "model_name": self.model_name,
            "scenario_id": self.scenario_id,
            "model_key": self.model_key,
            "scenario_key": self.scenario_key,
        }


@dataclass
class RolloutRecord:
    """A rollout's row (with its score, verdicts and instruction) and its transcript, in order."""

    row: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    retries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def outcome(self) -> str | None:
        return self.row.get("outcome")


_GROUPS_SQL = """
select model_name, scenario_id, model, scenario
from rollouts
where sweep_id = $sweep
  and ($model_name is null or model_name = $model_name)
  and ($scenario_id is null or scenario_id = $scenario_id)
group by all
order by scenario_id, model_name, model, scenario
"""

#: The group's rollouts with their outcome (`rollout_scores`), latest verdicts and the task's instruction. Run in the
#: scratch DuckDB on one spool file's rollouts, verifications and the scenario's tasks at a time, where `rollouts`,
#: `verifications` and `tasks` are those rows and the two views are the catalog's SQL (`warehouse/metrics/scores.py`).
_GROUP_ROLLOUTS_SQL = """
with verdicts as (
    select rollout_id,
           list(struct_pack(verifier, verifier_version, kind, success, is_error, reward, message)
                order by kind, verifier) as verdicts
    from verifications_latest
    where sweep_id = $sweep and model = $model_key and scenario = $scenario_key
    group by rollout_id
), task_text as (
    select task_id, name as task_name, description as instruction
    from tasks
    where scenario_id = $scenario_id
    qualify row_number() over (partition by task_id order by version desc) = 1
), scores as (
    select rollout_id, outcome, error_class as outcome_error_class, reward as score, partial_credit,
           n_verifiers, passed_verifiers
    from rollout_scores
    where sweep_id = $sweep and model = $model_key and scenario = $scenario_key
)
select r.*, s.outcome, s.outcome_error_class, s.score, s.partial_credit, s.n_verifiers, s.passed_verifiers,
       v.verdicts, t.task_name, t.instruction
from rollouts as r
left join scores as s using (rollout_id)
left join verdicts as v using (rollout_id)
left join task_text as t using (task_id)
where r.sweep_id = $sweep and r.model = $model_key and r.scenario = $scenario_key
  and r.model_name = $model_name and r.scenario_id = $scenario_id
order by r.task_id, r.rollout_index, r.rollout_id
"""

#: Each rollout of the group with its place in `_GROUP_ROLLOUTS_SQL`'s order (a rollout listed twice, once).
_PLACES_SQL = f"""
select distinct rollout_id, dense_rank() over (order by task_id, rollout_index, rollout_id) - 1 as {_ORDINAL}
from rollouts
where sweep_id = $sweep and model = $model_key and scenario = $scenario_key
  and model_name = $model_name and scenario_id = $scenario_id
"""
_RETRIED_SQL = """
select coalesce(bool_or(attempts > 1), false)
from rollouts
where sweep_id = $sweep and model = $model_key and scenario = $scenario_key
  and model_name = $model_name and scenario_id = $scenario_id
"""
_TASKS_SQL = "select * from tasks where scenario_id = $scenario_id"
#: Filtering on the Hive columns first makes DuckDB open only the group's files.
_IN_GROUP_FILES = "t.model = $model_key and t.scenario = $scenario_key"


@dataclass(frozen=True)
class _Spooled:
    """A table read for a group in one pass: its rows of the group's rollouts, which columns, and for a transcript
    the column that orders a rollout's rows."""

    table: str
    where: str
    columns: str = "t.*"
    order: str | None = None

    def sql(self, places: Path) -> str:
        return (
            f"select k.{_ORDINAL}, {self.columns} from {self.table} as t "
            f"join {_read_spooled(places)} as k using (rollout_id) where {self.where}"
        )


#: The inputs of `_GROUP_ROLLOUTS_SQL`, as its views see them: the rollouts as `rollout_scores` is filtered there,
#: and every verification of them wherever it is stored, since `verifications_latest` ranks them all.
_ROLLOUTS = _Spooled("rollouts", f"{_IN_GROUP_FILES} and t.sweep_id = $sweep")
_VERIFICATIONS = _Spooled("verifications", "true")
_MESSAGES = _Spooled(
    "messages",
    _IN_GROUP_FILES,
    "t.rollout_id, t.message_index, t.role, t.content, t.tool_call_id, t.tool_calls_json, t.timestamp",
    "message_index",
)
_TOOL_CALLS = _Spooled("tool_calls", _IN_GROUP_FILES, order="call_index")
_RETRIES = _Spooled("rollout_attempts", f"{_IN_GROUP_FILES} and not t.is_final", order="attempt")

#: `task_ids` and `epochs` (the most rollouts of one task) make the Inspect log's dataset: a sample per task, its
#: rollouts the sample's epochs.
_GROUP_TOTALS_SQL = """
with per_task as (
    select task_id, count(*) as rollouts
    from rollouts
    where sweep_id = $sweep and model = $model_key and scenario = $scenario_key
      and model_name = $model_name and scenario_id = $scenario_id
    group by task_id
)
select count(*) as n,
       count(*) filter (where status in ('pending', 'running')) as unfinished,
       min(created_at) as created_at, min(started_at) as started_at, max(completed_at) as completed_at,
       sum(prompt_tokens) as prompt_tokens, sum(completion_tokens) as completion_tokens,
       sum(total_tokens) as total_tokens, sum(cost_usd) as cost_usd,
       (select max(rollouts) from per_task) as epochs,
       (select list(task_id order by task_id) from per_task) as task_ids,
       bool_or(is_simulated) as is_simulated,
       any_value(model_identifier) as model_identifier, any_value(provider) as provider,
       any_value(base_url) as base_url, any_value(temperature) as temperature, max(max_steps) as max_steps,
       list(distinct run_id order by run_id) as run_ids
from rollouts
where sweep_id = $sweep and model = $model_key and scenario = $scenario_key
  and model_name = $model_name and scenario_id = $scenario_id
"""
_GROUP_OUTCOMES_SQL = """
select count(*) filter (where outcome = 'error') as errors,
       count(*) filter (where outcome in ('passed', 'failed')) as scored,
       count(*) filter (where outcome is null) as unscored
from rollout_scores
where sweep_id = $sweep and model = $model_key and scenario = $scenario_key
  and model_name = $model_name and scenario_id = $scenario_id
"""
_GROUP_METRICS_SQL = """
select n, passes, pass_rate, clustered_se, n_tasks, n_errors, ci_t_low, ci_t_high, ci_boot_low, ci_boot_high
from scenario_model_metrics
where sweep_id = $sweep and model_name = $model_name and scenario_id = $scenario_id
"""


def _quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _read_spooled(path: Path) -> str:
    """`read_parquet` of a file the export spooled; a `key=value` folder above it (the temporary directory's path)
    must not become a column."""
    return f"read_parquet({_quote_literal(str(path))}, hive_partitioning = false)"


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _dicts(cursor: duckdb.DuckDBPyConnection, rows: Iterable[tuple[Any, ...]]) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in rows]


def _one(con: duckdb.DuckDBPyConnection, sql: str, params: Mapping[str, Any]) -> dict[str, Any]:
    cursor = con.execute(sql, dict(params))
    rows = _dicts(cursor, cursor.fetchall())
    return rows[0] if rows else {}


def select_groups(
    con: duckdb.DuckDBPyConnection, sweep: str, model_name: str | None, scenario_id: str | None
) -> list[Group]:
    params = {"sweep": sweep, "model_name": model_name, "scenario_id": scenario_id}
    groups = [Group(*row) for row in con.execute(_GROUPS_SQL, params).fetchall()]
    if groups:
        return groups
    known = con.execute(
        "select list(distinct model_name order by model_name), list(distinct scenario_id order by scenario_id) "
        "from rollouts where sweep_id = ?",
        [sweep],
    ).fetchone()
    models, scenarios = (known or (None, None))[:2]
    asked = ", ".join(
        f"{name} {value!r}" for name, value in (("model", model_name), ("scenario", scenario_id)) if value
    )
    hints = "".join(
        did_you_mean(value, known_values or [])
        for value, known_values in ((model_name, models), (scenario_id, scenarios))
        if value
    )
    raise ExportError(
        f"sweep {sweep!r} has no rollouts of {asked}; its models: {models or []}, its scenarios: {scenarios or []}"
        f"{hints}"
    )


def _bound(sql: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters a statement uses (DuckDB refuses any other)."""
    return {name: value for name, value in params.items() if f"${name}" in sql}


class _Spool:
    """One table's rows of a group, spooled by DuckDB to Parquet files by their rollout's place in the export order
    (file k holds places k x per_file up to the next). `source` names one file's rows for a query; `take` hands out a
    transcript's rows in order, while they belong to the batch asked for."""

    def __init__(self, folder: Path, per_file: int, order: str | None = None) -> None:
        self.folder = folder
        self.per_file = per_file
        self.order = order
        self.files: list[int] = []
        #: the spooled columns (without the place) and their DuckDB types
        self.columns: dict[str, str] = {}
        self._queue: deque[int] = deque()
        self._rows: Iterator[dict[str, Any]] = iter(())
        self._head: dict[str, Any] | None = None
        #: the last rollout handed out, with its rows, for a rollout listed twice across two batches
        self._last: tuple[str, list[dict[str, Any]]] | None = None
        self._reader: duckdb.DuckDBPyConnection | None = None

    def _path(self, index: int) -> Path:
        return self.folder / f"{_FILE}={index}"

    def write(self, con: duckdb.DuckDBPyConnection, sql: str, params: Mapping[str, Any]) -> None:
        """Spool the rows of `sql` (with a place column) in one pass over the catalog's files."""
        described = con.execute(f"describe {sql}", dict(params)).fetchall()
        self.columns = {str(row[0]): str(row[1]) for row in described if row[0] != _ORDINAL}
        # One folder per file (`_file=<k>`): DuckDB writes each range's rows as they come, never sorting the whole.
        con.execute(
            f"copy (select *, {_ORDINAL} // {int(self.per_file)} as {_FILE} from ({sql})) "
            f"to {_quote_literal(str(self.folder))} (format parquet, partition_by ({_FILE}))",
            dict(params),
        )
        found = self.folder.glob(f"{_FILE}=*") if self.folder.is_dir() else []
        self.files = sorted(int(p.name.partition("=")[2]) for p in found)
        self._queue = deque(self.files)

    def source(self, index: int) -> str | None:
        """A `read_parquet` of file `index`'s rows (with the place column), or None when it has none."""
        path = self._path(index)
        if not path.is_dir():
            return None
        return _read_spooled(path / "*.parquet")

    def create_table(self, con: duckdb.DuckDBPyConnection, name: str, index: int | None) -> None:
        """(Re)create table `name` on `con` with file `index`'s rows, without the place column (none: empty)."""
        source = None if index is None else self.source(index)
        if source is None:
            columns = ", ".join(f"{_quote_ident(n)} {t}" for n, t in self.columns.items())
            con.execute(f"create or replace table {name} ({columns})")
        else:
            con.execute(f"create or replace table {name} as select * exclude ({_ORDINAL}) from {source}")

    def _next_file(self) -> Iterator[dict[str, Any]]:
        index = self._queue.popleft()
        source = self.source(index)
        if source is None or self._reader is None:
            return
        order = f"{_ORDINAL}, {_quote_ident(self.order)}" if self.order else _ORDINAL
        cursor = self._reader.execute(f"select * exclude ({_ORDINAL}) from {source} order by {order}")
        names = [d[0] for d in cursor.description or []]
        zoned = [i for i, n in enumerate(names) if self.columns.get(n) == "TIMESTAMP WITH TIME ZONE"]
        while chunk := cursor.fetchmany(_DICT_ROWS):
            for values in chunk:
                row = dict(zip(names, values, strict=True))
                for i in zoned:
                    # In UTC, as the warehouse stores them (DuckDB hands them out in its session's zone).
                    if isinstance(value := values[i], datetime):
                        row[names[i]] = value.astimezone(UTC)
                yield row
        shutil.rmtree(self._path(index), ignore_errors=True)  # read once: the disk is freed as the export goes

    def open(self, con: duckdb.DuckDBPyConnection) -> None:
        """Read the spool back on `con` (a cursor of its own, so its open result never blocks another query)."""
        self._reader = con.cursor()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _peek(self) -> dict[str, Any] | None:
        while self._head is None:
            self._head = next(self._rows, None)
            if self._head is None:
                if not self._queue:
                    return None
                self._rows = self._next_file()
        return self._head

    def take(self, ids: Collection[str]) -> dict[str, list[dict[str, Any]]]:
        """The rows of the next rollouts, by rollout, while they are in `ids`: the spool is in the export order,
        so these are the rows of the batch of `ids` when the batches are taken in order."""
        grouped: dict[str, list[dict[str, Any]]] = {}
        if self._last is not None and self._last[0] in ids:
            grouped[self._last[0]] = self._last[1]
        while (row := self._peek()) is not None and row["rollout_id"] in ids:
            grouped.setdefault(row["rollout_id"], []).append(row)
            self._head = None
            self._last = (row["rollout_id"], grouped[row["rollout_id"]])
        return grouped


class _GroupRead:
    """One group while it is read: its rows spooled (each table in one pass over its files) and a scratch DuckDB
    that runs the catalog's per-rollout SQL on one spool file's rows at a time, in which `rollouts`,
    `verifications` and `tasks` are those rows and `verifications_latest` and `rollout_scores` the catalog's views
    (`warehouse/metrics/scores.py`)."""

    def __init__(self, reader: SweepReader, group: Group) -> None:
        self.group = group
        self.params = group.params(reader.sweep_id)
        self._folder = tempfile.TemporaryDirectory(prefix="export-spool-", dir=reader.spool_dir)
        self.scratch = duckdb.connect()
        try:
            folder = Path(self._folder.name)
            self.spools = self._spool(reader, folder)
            self._prepare_scratch(reader.con, folder)
        except BaseException:
            self.close()
            raise

    def _spool(self, reader: SweepReader, folder: Path) -> dict[str, _Spool]:
        con, params = reader.con, self.params
        places = folder / f"{_KEYS}.parquet"
        con.execute(
            f"copy ({_PLACES_SQL}) to {_quote_literal(str(places))} (format parquet)", _bound(_PLACES_SQL, params)
        )
        count = con.execute(f"select count(*) from {_read_spooled(places)}").fetchall()[0][0]
        per_file = max(SPOOL_ROLLOUTS, -(-int(count) // MAX_SPOOL_FILES))
        spools: dict[str, _Spool] = {}

        def spool(spooled: _Spooled) -> None:
            target = spools[spooled.table] = _Spool(folder / spooled.table, per_file, spooled.order)
            sql = spooled.sql(places)
            target.write(con, sql, _bound(sql, params))
            target.open(self.scratch)

        for spooled in (_ROLLOUTS, _VERIFICATIONS, _MESSAGES):
            spool(spooled)
        if reader.tool_results:
            spool(_TOOL_CALLS)
            # Retried attempts are only shown for a batch with a retried rollout (SweepReader._with_transcripts),
            # and a catalog over files older than the `attempts` column has none. fetchall, not fetchone: a
            # result left unfinished would block the connection's next statement.
            attempts = "attempts" in spools[_ROLLOUTS.table].columns
            if attempts and con.execute(_RETRIED_SQL, params).fetchall()[0][0]:
                spool(_RETRIES)
        return spools

    def _prepare_scratch(self, con: duckdb.DuckDBPyConnection, folder: Path) -> None:
        # Timestamps come back in the catalog connection's zone, as they would from the catalog.
        zone = str(con.execute("select current_setting('TimeZone')").fetchall()[0][0])
        self.scratch.execute("set TimeZone = '" + zone.replace("'", "''") + "'")
        tasks = folder / "tasks.parquet"
        con.execute(
            f"copy ({_TASKS_SQL}) to {_quote_literal(str(tasks))} (format parquet)", _bound(_TASKS_SQL, self.params)
        )
        self.scratch.execute(f"create table tasks as select * from {_read_spooled(tasks)}")
        self.spools["rollouts"].create_table(self.scratch, "rollouts", None)
        self.spools["verifications"].create_table(self.scratch, "verifications", None)
        for view in (VERIFICATIONS_LATEST, ROLLOUT_SCORES):
            self.scratch.execute(view.statement())

    def _per_file(self, sql: str) -> Iterator[duckdb.DuckDBPyConnection]:
        """`sql` run on each spool file's rows in turn, in the export order; yields the cursor of each."""
        rollouts, verifications = self.spools["rollouts"], self.spools["verifications"]
        for index in rollouts.files:
            rollouts.create_table(self.scratch, "rollouts", index)
            verifications.create_table(self.scratch, "verifications", index)
            yield self.scratch.execute(sql, _bound(sql, self.params))

    def outcomes(self) -> dict[str, Any]:
        """`_GROUP_OUTCOMES_SQL`'s counts, summed over the spool files (a rollout's score depends on its rows alone)."""
        counts: dict[str, Any] = {}
        for cursor in self._per_file(_GROUP_OUTCOMES_SQL):
            for name, value in _dicts(cursor, cursor.fetchall())[0].items():
                counts[name] = counts.get(name, 0) + (value or 0)
        return counts

    def rollout_rows(self) -> Iterator[dict[str, Any]]:
        """The group's rows of `_GROUP_ROLLOUTS_SQL`, in its order."""
        for cursor in self._per_file(_GROUP_ROLLOUTS_SQL):
            yield from _dicts(cursor, cursor.fetchall())

    def take(self, table: str, ids: Collection[str]) -> dict[str, list[dict[str, Any]]]:
        spool = self.spools.get(table)
        return spool.take(ids) if spool is not None else {}

    def close(self) -> None:
        for spool in getattr(self, "spools", {}).values():
            spool.close()
        self.scratch.close()
        self._folder.cleanup()


class SweepReader:
    """Reads one sweep group by group, in batches of rollouts, each with its transcript.

    `spool_dir` is where a group's rows are spooled while it is read (default: the system's temporary directory).
    Call `close` when done: it removes the last group's spool."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        sweep_id: str,
        batch_size: int,
        *,
        tool_results: bool = True,
        spool_dir: Path | None = None,
    ) -> None:
        self.con = con
        self.sweep_id = sweep_id
        self.batch_size = batch_size
        #: also read each rollout's `tool_calls` rows and retried attempts (the inspect logs show both)
        self.tool_results = tool_results
        self.spool_dir = spool_dir
        self.batches = 0
        self._open: _GroupRead | None = None

    def _read(self, group: Group) -> _GroupRead:
        """The group's spooled rows: spooled on first use, kept from `totals` to the end of `batches_of`."""
        if self._open is None or self._open.group != group:
            self.close()
            self._open = _GroupRead(self, group)
        return self._open

    def close(self) -> None:
        if self._open is not None:
            self._open.close()
            self._open = None

    def totals(self, group: Group) -> dict[str, Any]:
        params = group.params(self.sweep_id)
        totals = _one(self.con, _GROUP_TOTALS_SQL, params)
        totals.update(self._read(group).outcomes())
        totals["metrics"] = _one(
            self.con,
            _GROUP_METRICS_SQL,
            {k: params[k] for k in ("sweep", "model_name", "scenario_id")},
        )
        return totals

    def batches_of(self, group: Group) -> Iterator[list[RolloutRecord]]:
        try:
            batch: list[dict[str, Any]] = []
            for row in self._read(group).rollout_rows():
                batch.append(row)
                if len(batch) == self.batch_size:
                    self.batches += 1
                    yield self._with_transcripts(group, batch)
                    batch = []
            if batch:
                self.batches += 1
                yield self._with_transcripts(group, batch)
        finally:
            self.close()

    def _with_transcripts(self, group: Group, rows: list[dict[str, Any]]) -> list[RolloutRecord]:
        read = self._read(group)
        ids = {row["rollout_id"] for row in rows}
        # The spools hand out the rows of the next rollouts in the export order: this batch's.
        messages = read.take("messages", ids)
        calls = read.take("tool_calls", ids)
        taken = read.take("rollout_attempts", ids)
        retried = self.tool_results and any((row.get("attempts") or 1) > 1 for row in rows)
        retries = taken if retried else {}
        return [
            RolloutRecord(
                row,
                messages.get(row["rollout_id"], []),
                calls.get(row["rollout_id"], []),
                retries.get(row["rollout_id"], []),
            )
            for row in rows
        ]


def verifier_results(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(v) for v in row.get("verdicts") or []]
