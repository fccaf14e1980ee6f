"""Every query the viewer runs, against one read-only snapshot of the catalog.

The catalog file is attached read-only to an in-memory DuckDB, not opened with `duckdb.connect(path)`: DuckDB
caches a database per path while any connection to it is open, so a long-lived server that connected by path
would keep reading the views of a catalog that `build_catalog` has since swapped out. An attachment has no such
cache, so when the file changes (a new inode after the swap) the next request attaches the new file and the old
snapshot is dropped once the requests still reading it finish.

Per snapshot the rollouts are indexed once into an in-memory table (`rollout_index`: one row per rollout with its
outcome from `rollout_scores` and its malformed-output flags, numbered in the list's order). The rollout list
filters and pages that table with LIMIT/OFFSET, which stays in milliseconds at 100,000 rollouts, where paging
`rollout_scores` itself would rank every verdict of the warehouse again for each page. The matrix reads the metric
views, computed from the catalog's `task_totals` snapshot, so it is cached per snapshot too. A rollout page reads
the live table views, narrowed by the rollout's Hive keys so that DuckDB opens only its partition's files.

A sweep can be newer than the catalog: its files are in the warehouse (a sweep still running, a partition run by
the daemon, a catalog build that failed) while the catalog's `task_totals` table was computed before them, so the
live views list the sweep's rollouts and the metric views have no row for it. At most once a second a request
looks for warehouse files newer than the catalog it reads; when there are some, the viewer builds a catalog of its
own (`build_catalog` into a private temporary folder: the project's file is never written) and reads that until
the project's catalog is rebuilt after them. The home page says when it does.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from eval_pipelines.inputs.paths import sweeps_dir
from eval_pipelines.inputs.sweeps import ConfigError, load_all_sweeps
from eval_pipelines.pipeline.gates import judge_min_kappa_of
from eval_pipelines.reports.comparisons import verdict
from eval_pipelines.reports.data import ReportError, latest_sweep, model_label, open_catalog, resolve_sweep
from eval_pipelines.reports.export.reader import RolloutRecord
from eval_pipelines.reports.viewer.detail import (
    RolloutDetail,
    npc_transcripts,
    rubric_verdicts,
    status_events,
    transcript,
)
from eval_pipelines.schemas.runs import ErrorClass
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.store import PARQUET_SUFFIX
from eval_pipelines.warehouse.tables import TABLE_SPECS

OUTCOMES = ("passed", "failed", "error", "unscored")
#: How much of an error's message the rollout list shows (the rollout's page shows all of it).
ERROR_EXCERPT_CHARS = 240
ERROR_CLASSES = tuple(e.value for e in ErrorClass)
#: malformed: either of the two below. text_tool_call: the final answer is a tool call written as text (the
#: endpoint did not parse it); bad_arguments: a call's arguments were not a JSON object (the tool was not called).
FLAGS = ("malformed", "text_tool_call", "bad_arguments")
DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 200

#: The attachment's name: every catalog view is read as `cat.<view>` by a cursor that did `use cat`.
_CATALOG = "cat"
_MEMORY = "memory"
#: How often a request may look for warehouse files newer than the catalog it reads (seconds).
WAREHOUSE_CHECK_SECONDS = 1.0


class NotFound(LookupError):
    """An unknown rollout, sweep, task or model: the page is a 404."""


class BadRequest(ValueError):
    """A filter or paging value the viewer does not know: the page is a 400."""


def param(params: Mapping[str, str], name: str) -> str | None:
    # An empty form field ("any") and a missing one mean the same: no filter.
    value = params.get(name, "").strip()
    return value or None


def positive_int_param(params: Mapping[str, str], name: str, default: int, maximum: int | None = None) -> int:
    raw = param(params, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, got {raw!r}") from None
    if value < 1 or (maximum is not None and value > maximum):
        bound = f" and at most {maximum}" if maximum is not None else ""
        raise BadRequest(f"{name} must be at least 1{bound}, got {value}")
    return value


def _choice(params: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    value = param(params, name)
    if value is not None and value not in allowed:
        raise BadRequest(f"unknown {name} {value!r}; choose one of {list(allowed)}")
    return value


@dataclass(frozen=True)
class RolloutFilter:
    """What the rollout list is narrowed to. `sweep_id` None: the most recently started sweep."""

    sweep_id: str | None = None
    model: str | None = None
    scenario: str | None = None
    task: str | None = None
    outcome: str | None = None
    error_class: str | None = None
    flag: str | None = None

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> RolloutFilter:
        error_class = _choice(params, "error_class", ERROR_CLASSES)
        outcome = _choice(params, "outcome", OUTCOMES)
        if error_class is not None and outcome not in (None, "error"):
            raise BadRequest(f"error_class {error_class!r} is the class of an error: outcome must be error or any")
        return cls(
            sweep_id=param(params, "sweep"),
            model=param(params, "model"),
            scenario=param(params, "scenario"),
            task=param(params, "task"),
            # An error class alone means the errors of that class.
            outcome="error" if error_class is not None else outcome,
            error_class=error_class,
            flag=_choice(params, "flag", FLAGS),
        )

    def query(self, sweep_id: str) -> dict[str, str]:
        """The filter as URL parameters (for links that keep it), with the sweep it resolved to."""
        values = {
            "sweep": sweep_id,
            "model": self.model,
            "scenario": self.scenario,
            "task": self.task,
            "outcome": None if self.error_class else self.outcome,
            "error_class": self.error_class,
            "flag": self.flag,
        }
        return {k: v for k, v in values.items() if v is not None}


@dataclass(frozen=True)
class RolloutPage:
    sweep_id: str
    filter: RolloutFilter
    rows: list[dict[str, Any]]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))

    @property
    def first_row(self) -> int:
        return (self.page - 1) * self.per_page + 1 if self.rows else 0


@dataclass(frozen=True)
class Facets:
    """What the list's filter form offers for one sweep."""

    models: list[tuple[str, str]]  # (model_name, label)
    scenarios: list[str]
    tasks: list[str]


@dataclass(frozen=True)
class Matrix:
    """One sweep's model x scenario pass rates (scenario_model_metrics), each model's overall row
    (model_metrics), and per cell the malformed-output count and per model the error classes."""

    sweep_id: str
    scenarios: list[str]
    #: (model_name, label, is_simulated), by name
    models: list[tuple[str, str, bool]]
    cells: dict[tuple[str, str], dict[str, Any]]
    overall: dict[str, dict[str, Any]]
    error_classes: dict[str, list[tuple[str, int]]]
    #: The sweep's rollouts by outcome (passed, failed, error, unscored), for a matrix with no cell to say why.
    outcomes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ParityPage:
    """One sweep's rows of the `parity` view (disagreements first) and, per benchmark, its counts."""

    sweep_id: str
    rows: list[dict[str, Any]]
    #: benchmark -> {graded, agree, disagree, deterministic}
    totals: dict[str, dict[str, int]]


_PARITY_COUNTS = ("graded", "agree", "disagree", "deterministic")
#: Disagreements on a deterministic component first, then the other disagreements, then agreement.
_PARITY_SQL = """
select *
from parity
where sweep_id = ?
order by deterministic_disagreement desc, agree, benchmark, scenario_id, task_id, rollout_id
"""
_HAS_BENCHMARK_ROLLOUTS_SQL = """
select exists (
    select 1
    from rollouts as r
    join tasks as t on t.scenario_id = r.scenario_id and t.task_id = r.task_id
    where r.sweep_id = ? and t.benchmark is not null
)
"""


@dataclass(frozen=True)
class Comparison:
    sweep_id: str
    task_id: str
    scenario_id: str | None
    #: scenarios of the sweep that have this task; several mean the page asks which one
    scenarios: list[str]
    #: (model_name, label) of the models that ran the task in that scenario
    models: list[tuple[str, str]]
    #: the two compared models, when chosen: each with its task metrics, rollouts and one rollout's detail
    sides: list[dict[str, Any]] = field(default_factory=list)
    #: the two models' `model_comparison` row over the whole scenario (paired by task and epoch, with its MDD), and
    #: under `verdict` that row in one sentence; empty until two models are chosen
    stats: dict[str, Any] = field(default_factory=dict)


_INDEX_SQL = """
create table {memory}.main.rollout_index as
with bad as (
    select rollout_id, count(*) as bad_arguments
    from tool_calls
    where {bad_arguments}
    group by rollout_id
)
select
    row_number() over (
        order by s.sweep_id, s.model_name, s.scenario_id, s.task_id, s.rollout_index, s.rollout_id
    ) as position,
    s.sweep_id, s.rollout_id, s.run_id, s.model_name, s.model, s.scenario, s.scenario_id, s.task_id,
    s.rollout_index, s.is_simulated, s.status, s.outcome, s.error_class, s.reward, s.n_verifiers,
    s.passed_verifiers, s.total_tokens, s.cost_usd, s.duration_seconds,
    coalesce({text_tool_call}, false) as text_tool_call,
    coalesce(b.bad_arguments, 0) as bad_arguments,
    r.created_at, r.attempts, r.termination_reason,
    -- An error's message for the error list; capped so the in-memory index stays small at 100,000 rollouts.
    case when s.outcome = 'error' then left(r.error, {error_excerpt_chars}) end as error_excerpt
from rollout_scores as s
join rollouts as r on r.rollout_id = s.rollout_id and r.model = s.model and r.scenario = s.scenario
left join bad as b on b.rollout_id = s.rollout_id
order by position
"""

_FILTER_SQL = f"""
from {_MEMORY}.main.rollout_index
where sweep_id = $sweep
  and ($model is null or model_name = $model)
  and ($scenario is null or scenario_id = $scenario)
  and ($task is null or task_id = $task)
  and ($outcome is null or outcome = $outcome or ($outcome = 'unscored' and outcome is null))
  and ($error_class is null or error_class = $error_class)
  and ($flag is null
       or ($flag = 'text_tool_call' and text_tool_call)
       or ($flag = 'bad_arguments' and bad_arguments > 0)
       or ($flag = 'malformed' and (text_tool_call or bad_arguments > 0)))
"""

_SWEEPS_SQL = f"""
select sweep_id, count(*) as rollouts, count(distinct model_name) as models,
       count(distinct scenario_id) as scenarios, count(*) filter (where outcome = 'error') as errors,
       count(*) filter (where text_tool_call or bad_arguments > 0) as malformed,
       min(created_at) as started_at
from {_MEMORY}.main.rollout_index
group by sweep_id
order by max(created_at) desc nulls last, sweep_id desc
"""

#: The rollout's rows of each table, narrowed by its Hive keys first so that only its partition's files are read.
_BY_ROLLOUT = "model = $model and scenario = $scenario and rollout_id = $rollout_id"
_DETAIL_SQL = {
    "rollout": f"select * from rollouts where {_BY_ROLLOUT}",
    "messages": f"select * from messages where {_BY_ROLLOUT} order by message_index",
    "tool_calls": f"select * from tool_calls where {_BY_ROLLOUT} order by call_index",
    "state_diffs": f"select * from state_diffs where {_BY_ROLLOUT} order by diff_index",
    "verdicts": f"select * from verifications_latest where {_BY_ROLLOUT} order by kind, verifier",
    "verdict_history": (
        f"select * from verifications where {_BY_ROLLOUT} "
        "order by kind, verifier, verified_at desc, verifier_version desc"
    ),
    "judgements": f"select * from judgements_latest where {_BY_ROLLOUT} order by judge_kind, judge",
    "judgement_history": f"select * from judgements where {_BY_ROLLOUT} order by judge_kind, judged_at desc",
    "attempts": f"select * from rollout_attempts where {_BY_ROLLOUT} order by attempt",
}
_TASK_SQL = """
select task_id, name, category, difficulty, version, description, verifiers
from tasks
where scenario_id = $scenario_id and task_id = $task_id
qualify row_number() over (partition by task_id order by version desc) = 1
"""


def _dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _identity(path: Path) -> tuple[int, int, int, int]:
    """What changes when the catalog is rebuilt: `build_catalog` swaps in a new file (a new inode)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise ReportError(f"{path}: no catalog yet; run `eval-pipelines sweep` first") from None
    return stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size


def _attached_views(path: Path) -> list[tuple[str, str]]:
    """(view name, SQL) of the catalog's views, read through an attachment (see the module's note)."""
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"attach {_quote(str(path))} as {_CATALOG} (read_only)")
        rows = con.execute("select view_name, sql from duckdb_views() where database_name = ?", [_CATALOG]).fetchall()
    except duckdb.Error as exc:
        raise ReportError(f"{path}: cannot read the catalog: {exc}") from None
    finally:
        con.close()
    return [(str(name), str(sql or "")) for name, sql in rows]


def catalog_warehouse(path: Path) -> Path | None:
    """The warehouse a catalog's table views read (the folder above a table's glob), or, when every table was
    empty at its build, the project's layout's `warehouse/` beside the catalog if there is one."""
    for name, sql in _attached_views(path):
        match = re.search(r"read_parquet\('((?:[^']|'')*)'", sql) if name in TABLE_SPECS else None
        if match is None:
            continue
        glob = match.group(1).replace("''", "'")
        cut = glob.rfind(f"/{name}/")
        if cut > 0:
            return Path(glob[:cut])
    beside = path.parent / "warehouse"
    return beside if beside.is_dir() else None


def newest_file_ns(root: Path) -> int:
    """The newest modification time (ns) of the warehouse's Parquet files; 0 without any. Files being written
    (hidden temporary names) do not count: they are renamed into place when complete."""
    newest = 0
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(PARQUET_SUFFIX) and not name.startswith("."):
                try:
                    newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
                except FileNotFoundError:  # replaced meanwhile
                    continue
    return newest


def _clock(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


class Snapshot:
    """One attached catalog file, its rollout index, and what was computed from it.

    `identity` is the project's catalog file's as it was read; `path` is the file read, which is a catalog the
    viewer built itself (`private`) when the project's is older than the warehouse's newest files."""

    def __init__(
        self,
        path: Path,
        identity: tuple[int, int, int, int],
        *,
        private: bool = False,
        catalog_note: str | None = None,
    ) -> None:
        self.identity = identity
        self.private = private
        #: Said on the home page when the pages do not read the project's catalog as it is.
        self.catalog_note = catalog_note
        #: When the catalog read was built (its file's modification time).
        self.built_ns = _identity(path)[2]
        self._con = duckdb.connect(":memory:")
        try:
            self._con.execute(f"attach {_quote(str(path))} as {_CATALOG} (read_only)")
            with self.cursor() as cur:
                cur.execute(
                    _INDEX_SQL.format(
                        memory=_MEMORY, error_excerpt_chars=ERROR_EXCERPT_CHARS, **self._flag_columns(cur)
                    )
                )
                self.sweeps = _dicts(cur.execute(_SWEEPS_SQL))
                self.latest = latest_sweep(cur)
        except duckdb.Error as exc:
            self._con.close()
            raise ReportError(f"{path}: cannot read the catalog: {exc}") from None
        self._lock = threading.Lock()
        self._matrices: dict[str, Matrix] = {}
        self._facets: dict[str, Facets] = {}
        self._resolved: dict[str, str] = {}

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own per request (a DuckDB connection is not shared between threads), reading the
        catalog's views by their plain names."""
        cur = self._con.cursor()
        # DuckDB would draw a progress bar on the server's terminal for a slow query (the index of a big sweep).
        cur.execute(f"use {_CATALOG}; set enable_progress_bar = false")
        return cur

    @staticmethod
    def _flag_columns(cur: duckdb.DuckDBPyConnection) -> dict[str, str]:
        # A warehouse written before the malformed-output columns existed has views without them: no flags then.
        def columns(view: str) -> set[str]:
            return {str(row[0]) for row in cur.execute(f"describe {view}").fetchall()}

        return {
            "text_tool_call": "r.final_answer_is_tool_call"
            if "final_answer_is_tool_call" in columns("rollouts")
            else "null",
            "bad_arguments": "arguments_error is not null" if "arguments_error" in columns("tool_calls") else "false",
        }

    # --- sweeps -----------------------------------------------------------------------------------------------

    def sweep(self, sweep_id: str | None) -> str:
        """The sweep a page shows: the one asked for, or the most recently started (resolve_sweep's rule)."""
        if sweep_id is None:
            if self.latest is None:
                raise NotFound("the catalog has no rollouts yet; run `eval-pipelines sweep` first")
            return self.latest
        if sweep_id not in self._resolved:
            try:
                with self.cursor() as cur:
                    resolved = resolve_sweep(cur, sweep_id)
            except ReportError as exc:
                raise NotFound(str(exc)) from None
            with self._lock:
                self._resolved[sweep_id] = resolved
        return self._resolved[sweep_id]

    def matrix(self, sweep_id: str) -> Matrix:
        if sweep_id not in self._matrices:
            with self.cursor() as cur:
                built = self._matrix(cur, sweep_id)
            with self._lock:
                self._matrices[sweep_id] = built
        return self._matrices[sweep_id]

    @staticmethod
    def _matrix(cur: duckdb.DuckDBPyConnection, sweep_id: str) -> Matrix:
        groups = _dicts(cur.execute("select * from scenario_model_metrics where sweep_id = ?", [sweep_id]))
        overall = _dicts(cur.execute("select * from model_metrics where sweep_id = ?", [sweep_id]))
        flagged = cur.execute(
            f"select model_name, scenario_id, count(*) from {_MEMORY}.main.rollout_index "
            "where sweep_id = ? and (text_tool_call or bad_arguments > 0) group by all",
            [sweep_id],
        ).fetchall()
        classes = cur.execute(
            f"select model_name, error_class, count(*) from {_MEMORY}.main.rollout_index "
            "where sweep_id = ? and outcome = 'error' group by all order by model_name, count(*) desc, error_class",
            [sweep_id],
        ).fetchall()
        unverified = cur.execute(
            f"select model_name, scenario_id, count(*) from {_MEMORY}.main.rollout_index "
            "where sweep_id = ? and outcome is null group by all",
            [sweep_id],
        ).fetchall()
        malformed = {(str(m), str(s)): int(n) for m, s, n in flagged}
        unscored = {(str(m), str(s)): int(n) for m, s, n in unverified}
        cells: dict[tuple[str, str], dict[str, Any]] = {}
        simulated: dict[str, bool] = {}
        for row in groups:
            name = row["model_name"]
            simulated[name] = simulated.get(name, False) or bool(row["is_simulated"])
            key = (name, row["scenario_id"])
            cells[key] = {**row, "malformed": malformed.get(key, 0), "unscored": unscored.get(key, 0)}
        error_classes: dict[str, list[tuple[str, int]]] = {}
        for name, error_class, count in classes:
            # rollout_scores gives every error its class, so each links to the list of that class.
            error_classes.setdefault(str(name), []).append((str(error_class), int(count)))
        outcomes = cur.execute(
            f"select coalesce(outcome, 'unscored'), count(*) from {_MEMORY}.main.rollout_index "
            "where sweep_id = ? group by all",
            [sweep_id],
        ).fetchall()
        return Matrix(
            sweep_id=sweep_id,
            scenarios=sorted({row["scenario_id"] for row in groups}),
            models=[(name, model_label(name, simulated[name]), simulated[name]) for name in sorted(simulated)],
            cells=cells,
            overall={row["model_name"]: row for row in overall},
            error_classes=error_classes,
            outcomes={str(outcome): int(n) for outcome, n in outcomes},
        )

    def has_benchmark_rollouts(self, sweep_id: str) -> bool:
        """Whether the sweep ran a benchmark's tasks (the home page then links its parity page)."""
        with self.cursor() as cur:
            try:
                row = cur.execute(_HAS_BENCHMARK_ROLLOUTS_SQL, [sweep_id]).fetchone()
            except duckdb.BinderException:  # a catalog built before tasks had a benchmark column
                return False
        return bool(row and row[0])

    def parity(self, sweep_id: str) -> ParityPage:
        with self.cursor() as cur:
            try:
                rows = _dicts(cur.execute(_PARITY_SQL, [sweep_id]))
            except duckdb.CatalogException:  # a catalog built before the parity view existed
                rows = []
        totals: dict[str, dict[str, int]] = {}
        for row in rows:
            counts = totals.setdefault(
                row["benchmark"], dict.fromkeys(("graded", "agree", "disagree", "deterministic"), 0)
            )
            counts["graded"] += 1
            counts["agree" if row["agree"] else "disagree"] += 1
            counts["deterministic"] += int(bool(row["deterministic_disagreement"]))
        return ParityPage(sweep_id=sweep_id, rows=rows, totals=dict(sorted(totals.items())))

    def facets(self, sweep_id: str) -> Facets:
        if sweep_id not in self._facets:
            with self.cursor() as cur:
                models = cur.execute(
                    f"select model_name, bool_or(is_simulated) from {_MEMORY}.main.rollout_index "
                    "where sweep_id = ? group by model_name order by model_name",
                    [sweep_id],
                ).fetchall()
                scenarios = cur.execute(
                    f"select distinct scenario_id from {_MEMORY}.main.rollout_index where sweep_id = ? order by 1",
                    [sweep_id],
                ).fetchall()
                tasks = cur.execute(
                    f"select distinct task_id from {_MEMORY}.main.rollout_index where sweep_id = ? order by 1",
                    [sweep_id],
                ).fetchall()
            built = Facets(
                models=[(str(name), model_label(str(name), bool(sim))) for name, sim in models],
                scenarios=[str(row[0]) for row in scenarios],
                tasks=[str(row[0]) for row in tasks],
            )
            with self._lock:
                self._facets[sweep_id] = built
        return self._facets[sweep_id]

    # --- the rollout list -------------------------------------------------------------------------------------

    def rollouts(self, wanted: RolloutFilter, page: int, per_page: int) -> RolloutPage:
        sweep_id = self.sweep(wanted.sweep_id)
        params = {
            "sweep": sweep_id,
            "model": wanted.model,
            "scenario": wanted.scenario,
            "task": wanted.task,
            "outcome": wanted.outcome,
            "error_class": wanted.error_class,
            "flag": wanted.flag,
        }
        with self.cursor() as cur:
            counted = cur.execute(f"select count(*) {_FILTER_SQL}", params).fetchone()
            total = int(counted[0]) if counted else 0
            cur.execute(
                f"select * {_FILTER_SQL} order by position limit $limit offset $offset",
                {**params, "limit": per_page, "offset": (page - 1) * per_page},
            )
            rows = _dicts(cur)
        for row in rows:
            row["label"] = model_label(row["model_name"], row["is_simulated"])
        return RolloutPage(sweep_id, wanted, rows, total, page, per_page)

    # --- one rollout ------------------------------------------------------------------------------------------

    def rollout(self, rollout_id: str) -> RolloutDetail:
        with self.cursor() as cur:
            cur.execute(f"select * from {_MEMORY}.main.rollout_index where rollout_id = ?", [rollout_id])
            found = _dicts(cur)
            if not found:
                raise NotFound(f"no rollout {rollout_id!r} in the catalog")
            index = found[0]
            params = {"model": index["model"], "scenario": index["scenario"], "rollout_id": rollout_id}
            tables = {name: _dicts(cur.execute(sql, params)) for name, sql in _DETAIL_SQL.items()}
            task = _dicts(cur.execute(_TASK_SQL, {"scenario_id": index["scenario_id"], "task_id": index["task_id"]}))
        row = {**tables["rollout"][0], **index} if tables["rollout"] else dict(index)
        record = RolloutRecord(row, tables["messages"], tables["tool_calls"])
        verdicts = tables["verdicts"]
        latest = {(v["verifier"], v["verifier_version"], v["verified_at"]) for v in verdicts}
        judgements = tables["judgements"]
        shown = {(j["judge"], j["judged_at"]) for j in judgements}
        return RolloutDetail(
            row=row,
            label=model_label(row["model_name"], row["is_simulated"]),
            task=task[0] if task else None,
            transcript=transcript(record, tables["state_diffs"]),
            verdicts=[v for v in verdicts if v["kind"] != "rubric"],
            rubric=rubric_verdicts([v for v in verdicts if v["kind"] == "rubric"]),
            verdict_history=[
                v
                for v in tables["verdict_history"]
                if (v["verifier"], v["verifier_version"], v["verified_at"]) not in latest
            ],
            judgements=judgements,
            judgement_history=[j for j in tables["judgement_history"] if (j["judge"], j["judged_at"]) not in shown],
            attempts=tables["attempts"],
            events=status_events(row, tables["attempts"]),
            npc_transcripts=npc_transcripts(row.get("artifacts_path")),
        )

    # --- two models on one task -------------------------------------------------------------------------------

    def compare(
        self, sweep_id: str | None, task_id: str, scenario_id: str | None, models: list[str], picks: list[str | None]
    ) -> Comparison:
        sweep = self.sweep(sweep_id)
        with self.cursor() as cur:
            scenarios = [
                str(row[0])
                for row in cur.execute(
                    f"select distinct scenario_id from {_MEMORY}.main.rollout_index "
                    "where sweep_id = ? and task_id = ? order by 1",
                    [sweep, task_id],
                ).fetchall()
            ]
            if not scenarios:
                raise NotFound(f"sweep {sweep!r} has no rollouts of task {task_id!r}")
            if scenario_id is None and len(scenarios) == 1:
                scenario_id = scenarios[0]
            if scenario_id is not None and scenario_id not in scenarios:
                raise NotFound(f"task {task_id!r} of sweep {sweep!r} ran in {scenarios}, not in {scenario_id!r}")
            if scenario_id is None:
                return Comparison(sweep, task_id, None, scenarios, [])
            ran = cur.execute(
                f"select model_name, bool_or(is_simulated) from {_MEMORY}.main.rollout_index "
                "where sweep_id = ? and scenario_id = ? and task_id = ? group by model_name order by model_name",
                [sweep, scenario_id, task_id],
            ).fetchall()
            labels = {str(name): model_label(str(name), bool(sim)) for name, sim in ran}
            comparison = Comparison(sweep, task_id, scenario_id, scenarios, list(labels.items()))
            if not models:
                return comparison
            if len(models) != 2 or models[0] == models[1]:
                raise BadRequest(f"models must name two different models, as models=a,b; got {models}")
            for name in models:
                if name not in labels:
                    raise NotFound(f"model {name!r} has no rollouts of task {task_id!r} in {scenario_id!r}")
            for name, pick in zip(models, picks, strict=True):
                comparison.sides.append(self._side(cur, sweep, scenario_id, task_id, name, labels[name], pick))
            cursor = cur.execute(
                "select * from model_comparison where sweep_id = ? and scenario_id = ? and model_a = ? and model_b = ?",
                [sweep, scenario_id, *models],
            )
            names = [d[0] for d in cursor.description or []]
            found = cursor.fetchone()
            if found is not None:
                comparison.stats.update(zip(names, found, strict=True))
                comparison.stats["verdict"] = verdict(comparison.stats)
        for side in comparison.sides:
            side["detail"] = self.rollout(side["shown"]) if side["shown"] is not None else None
        return comparison

    @staticmethod
    def _side(
        cur: duckdb.DuckDBPyConnection,
        sweep: str,
        scenario_id: str,
        task_id: str,
        model: str,
        label: str,
        pick: str | None,
    ) -> dict[str, Any]:
        metrics = _dicts(
            cur.execute(
                "select * from task_metrics where sweep_id = ? and scenario_id = ? and model_name = ? and task_id = ?",
                [sweep, scenario_id, model, task_id],
            )
        )
        rollouts = _dicts(
            cur.execute(
                f"select * from {_MEMORY}.main.rollout_index "
                "where sweep_id = ? and scenario_id = ? and model_name = ? and task_id = ? order by position",
                [sweep, scenario_id, model, task_id],
            )
        )
        ids = [r["rollout_id"] for r in rollouts]
        if pick is not None and pick not in ids:
            raise BadRequest(f"rollout {pick!r} is not one of {model!r}'s rollouts of task {task_id!r}")
        return {
            "model": model,
            "label": label,
            "metrics": metrics[0] if metrics else None,
            "rollouts": rollouts,
            "shown": pick or (ids[0] if ids else None),
        }


class ViewerCatalog:
    """The catalog as the server reads it: the current snapshot, replaced when the file is rebuilt, and a catalog
    of the viewer's own while the warehouse holds files newer than the project's catalog (see the module's note).

    `warehouse` is the folder the catalog's views read; by default the one they name."""

    def __init__(self, path: Path, warehouse: Path | None = None) -> None:
        self.path = Path(path).resolve()
        # The reports' own check first, so a missing or unreadable catalog reads the same in every command.
        open_catalog(self.path).close()
        self._given_warehouse = Path(warehouse).resolve() if warehouse is not None else None
        self.warehouse = self._given_warehouse or catalog_warehouse(self.path)
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._checked_at = float("-inf")
        self._private: tempfile.TemporaryDirectory[str] | None = None
        self.snapshot()

    def _behind(self, snapshot: Snapshot, *, now: bool = False) -> bool:
        """Whether the warehouse has files newer than the catalog `snapshot` reads (looked at once a second)."""
        if self.warehouse is None:
            return False
        if not now and time.monotonic() - self._checked_at < WAREHOUSE_CHECK_SECONDS:
            return False
        self._checked_at = time.monotonic()
        return newest_file_ns(self.warehouse) > snapshot.built_ns

    def _judge_min_kappa(self) -> Callable[[str], float | None]:
        """Each sweep's `min_judge_kappa` for the viewer's own catalog: the one the project's catalog was built with
        (from the sweep's config, `sweep_settings`), else the config's in the project's sweeps folder, as
        `eval_catalog` finds it; so its judges are flagged as the report and the gate flag them."""
        built: dict[str, float] = {}
        try:
            con = open_catalog(self.path)
            try:
                rows = con.execute("select sweep_id, min_judge_kappa from sweep_settings where from_config").fetchall()
                built = {str(sweep_id): float(kappa) for sweep_id, kappa in rows}
            finally:
                con.close()
        except (ReportError, duckdb.Error):
            pass  # a catalog from before sweep_settings: the configs say it
        try:
            sweeps = load_all_sweeps(sweeps_dir())
        except (ConfigError, OSError):
            sweeps = {}
        configured = judge_min_kappa_of(sweeps)
        return lambda sweep_id: built[sweep_id] if sweep_id in built else configured(sweep_id)

    def snapshot(self) -> Snapshot:
        identity = _identity(self.path)
        current = self._snapshot
        if current is not None and current.identity == identity and not self._behind(current):
            return current
        with self._lock:  # one rebuild at a time; the others wait for it rather than index the file again
            current = self._snapshot
            if current is None or current.identity != identity or self._behind(current, now=True):
                current = self._snapshot = self._read(identity)
            return current

    def _read(self, identity: tuple[int, int, int, int]) -> Snapshot:
        if self._given_warehouse is None and self._snapshot is not None and self._snapshot.identity != identity:
            self.warehouse = catalog_warehouse(self.path)  # a rebuilt catalog may read another folder
        newest = newest_file_ns(self.warehouse) if self.warehouse is not None else 0
        if newest <= identity[2] or self.warehouse is None:
            return Snapshot(self.path, identity)
        if self._private is None:
            self._private = tempfile.TemporaryDirectory(prefix="eval-pipelines-viewer-")
        private = Path(self._private.name) / "catalog.duckdb"
        try:
            build_catalog(self.warehouse, private, judge_min_kappa=self._judge_min_kappa())
        except (OSError, ValueError, duckdb.Error) as exc:
            note = (
                f"{self.path} was built at {_clock(identity[2])}, before the warehouse's newest file "
                f"({_clock(newest)}), and the viewer could not build a newer catalog ({exc}): the newest rollouts "
                "may be missing or unscored here."
            )
            return Snapshot(self.path, identity, catalog_note=note)
        note = (
            f"{self.path} was built at {_clock(identity[2])}, before the warehouse's newest file ({_clock(newest)}). "
            f"These pages read a catalog the viewer built from the warehouse at {_clock(_identity(private)[2])} "
            "(your file is left as it is); the next eval-pipelines sweep, or materialisation of eval_catalog, "
            "rebuilds it."
        )
        return Snapshot(private, identity, private=True, catalog_note=note)
