"""Durable store of runs, rollouts, status events, artifact locations and task-generation jobs (SQLite, WAL).

Several processes may open the same file (the embedded pipeline, a local server, an analyst): WAL mode plus a
busy timeout lets them take turns instead of failing. Secrets are never written: model configurations are
stored as their key-less echo.

A running rollout (and a running task-generation job) records which process executes it, so a process that
starts up or resumes a run only fails the work of processes that are gone, never that of a live neighbour.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from eval_pipelines.lib.redact import strip_secrets
from eval_pipelines.lib.sqlite import SqliteDatabase
from eval_pipelines.schemas._base import utc_now_iso
from eval_pipelines.schemas.model_config import ModelConfigEcho
from eval_pipelines.schemas.runs import (
    ERROR_CLASS_OF_REASON,
    MSG_SERVER_RESTART,
    ErrorClass,
    Rollout,
    RolloutPhase,
    RolloutResult,
    RolloutStatus,
    Run,
    StatusEvent,
    TerminationReason,
)
from eval_pipelines.schemas.taskgen import JobStatus, TaskGenJob, TaskGenResults

#: Key of `_counts` that is not a status.
ERRORS_COUNT = "errors"
logger = logging.getLogger(__name__)

SCHEMA = """
create table if not exists runs (
    run_id text primary key,
    run_name text unique,
    scenario_id text not null,
    source text not null,
    created_at text not null,
    request_json text not null
);
create table if not exists rollouts (
    rollout_id text primary key,
    run_id text not null references runs(run_id) on delete cascade,
    scenario_id text not null,
    task_id text not null,
    rollout_index integer not null,
    status text not null,
    phase text,
    current_step integer,
    max_steps integer not null,
    created_at text not null,
    started_at text,
    completed_at text,
    result_json text,
    termination_reason text,
    model_config_json text not null,
    artifacts_path text,
    unique (run_id, task_id, rollout_index)
);
create index if not exists rollouts_by_run on rollouts(run_id, status);
create index if not exists rollouts_by_task on rollouts(scenario_id, task_id);
create index if not exists rollouts_in_listing_order on rollouts(created_at, task_id, rollout_index);
create index if not exists runs_newest_first on runs(created_at desc, run_id);
create index if not exists runs_by_scenario on runs(scenario_id, created_at desc, run_id);
create table if not exists rollout_events (
    rollout_id text not null references rollouts(rollout_id) on delete cascade,
    seq integer not null,
    status text not null,
    timestamp text not null,
    detail text,
    primary key (rollout_id, seq)
);
create table if not exists taskgen_jobs (
    job_id text primary key,
    status text not null,
    progress text,
    error text,
    created_at text not null,
    started_at text,
    completed_at text,
    request_json text not null,
    results_json text,
    runner_id text,
    runner_pid integer,
    runner_started text
);
"""

#: Columns added after the first release; `_migrate` adds them to older store files.
ADDED_COLUMNS: dict[str, dict[str, str]] = {
    "runs": {"cancel_requested": "integer not null default 0"},
    # error_class mirrors result_json's, as a column: the progress counts read it every half second.
    "rollouts": {"runner_id": "text", "runner_pid": "integer", "runner_started": "text", "error_class": "text"},
}

#: Finished runs ask for a checkpoint of the write-ahead log; at most one is made per this many seconds (the
#: last request of a burst is still honoured at the end of it). Many small runs finish every second, and each
#: checkpoint holds back every writer while it copies the log.
CHECKPOINT_INTERVAL_SECONDS = 1.0

MSG_JOB_INTERRUPTED = "Service restarted while the task-generation job was running"


def process_start_marker(pid: int) -> str | None:
    """When the process started (clock ticks since boot, from /proc), or None where /proc is unavailable.

    Together with the pid this names a process uniquely, so a recycled pid is not mistaken for a live runner.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; the fields after the last ")" do not.
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):  # a zombie has exited; only its exit status remains
        return None
    return fields[19]


def process_is_alive(pid: int | None, started: str | None) -> bool:
    if pid is None:
        return False
    if pid == os.getpid():
        return True
    marker = process_start_marker(pid)
    if marker is not None:
        return started is None or marker == started
    if Path("/proc/self/stat").exists():
        return False  # /proc works here, so the missing entry means the process is gone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_STATUS_EVENTS = TypeAdapter(list[StatusEvent])


@lru_cache(maxsize=64)
def _model_config_echo(stored_json: str) -> ModelConfigEcho:
    """Every rollout of a run stores the same echo: parsed once per distinct one, not once per rollout listed.
    Shared between the rollouts that hold it, as a read-only value."""
    return ModelConfigEcho.model_validate_json(stored_json)


@dataclass(frozen=True)
class Runner:
    """The executor that claims rollouts: one per RunExecutor, inside one process."""

    runner_id: str
    pid: int
    started: str | None

    @classmethod
    def current(cls) -> Runner:
        pid = os.getpid()
        return cls(f"runner_{uuid.uuid4().hex}", pid, process_start_marker(pid))


class DuplicateRunName(ValueError):
    def __init__(self, run_name: str, run_id: str) -> None:
        super().__init__(f"run_name {run_name!r} already exists as run {run_id}")
        self.run_name = run_name
        self.run_id = run_id


@dataclass(frozen=True)
class ProgressEvent:
    """A rollout entered a phase, or (step set) its agent finished a step; `at` is when it happened."""

    rollout_id: str
    phase: RolloutPhase
    detail: str | None
    at: str
    step: int | None = None

    @classmethod
    def of_phase(cls, rollout_id: str, phase: RolloutPhase, detail: str | None = None) -> ProgressEvent:
        return cls(rollout_id, phase, detail, utc_now_iso())

    @classmethod
    def of_step(cls, rollout_id: str, step: int) -> ProgressEvent:
        return cls(rollout_id, RolloutPhase.AGENT_RUNNING, f"step {step}", utc_now_iso(), step)


@dataclass(frozen=True)
class NewRollout:
    rollout_id: str
    task_id: str
    rollout_index: int
    max_steps: int


class RunStore(SqliteDatabase):
    def __init__(self, path: Path) -> None:
        super().__init__(path, SCHEMA)
        self._migrate()
        self._checkpoint_guard = threading.Lock()
        self._checkpoint_due = False
        self._last_checkpoint = float("-inf")
        self._checkpoint_timer: threading.Timer | None = None

    def checkpoint_soon(self) -> None:
        """Checkpoint the log on a thread of its own, within `CHECKPOINT_INTERVAL_SECONDS` of the last one: a
        request made while one is already scheduled is covered by it."""
        with self._checkpoint_guard:
            if self._checkpoint_due:
                return
            self._checkpoint_due = True
            delay = max(0.0, self._last_checkpoint + CHECKPOINT_INTERVAL_SECONDS - time.monotonic())
            timer = threading.Timer(delay, self._scheduled_checkpoint)
            timer.name, timer.daemon = "checkpoint-run-store", True
            self._checkpoint_timer = timer
        timer.start()

    def _scheduled_checkpoint(self) -> None:
        with self._checkpoint_guard:
            # Writes made from here on need a checkpoint of their own: a request now schedules the next one.
            self._checkpoint_due = False
            self._last_checkpoint = time.monotonic()
            self._checkpoint_timer = None
        try:
            self.checkpoint()
        except sqlite3.Error as exc:
            # A checkpoint only empties the log: a later one does it, and a store whose file is gone needs none.
            logger.debug("scheduled checkpoint of %s skipped: %s", self.path, exc)
        finally:
            SqliteDatabase.close(self)  # this timer thread's own connection; every timer runs on a new thread

    def close(self) -> None:
        with self._checkpoint_guard:
            timer, self._checkpoint_timer = self._checkpoint_timer, None
            self._checkpoint_due = False
        if timer is not None:
            timer.cancel()
        super().close()

    def _migrate(self) -> None:
        with self._tx() as db:  # under the write lock, so two processes opening an old file cannot race
            for table, columns in ADDED_COLUMNS.items():
                present = {row["name"] for row in db.execute(f"pragma table_info({table})")}
                for column, declaration in columns.items():
                    if column not in present:
                        db.execute(f"alter table {table} add column {column} {declaration}")
                        if (table, column) == ("rollouts", "error_class"):
                            db.execute(
                                "update rollouts set error_class = json_extract(result_json, '$.error_class')"
                                " where result_json is not null"
                            )

    # -- runs -------------------------------------------------------------------------------------------
    def create_run(
        self,
        *,
        run_id: str,
        run_name: str | None,
        scenario_id: str,
        source: str,
        request: dict[str, Any],
        model_config: ModelConfigEcho,
        rollouts: Sequence[NewRollout],
    ) -> None:
        now = utc_now_iso()
        config_json = json.dumps(strip_secrets(model_config.model_dump(mode="json")))
        with self._tx() as db:
            if run_name is not None:
                existing = db.execute("select run_id from runs where run_name = ?", (run_name,)).fetchone()
                if existing is not None:
                    raise DuplicateRunName(run_name, existing["run_id"])
            db.execute(
                "insert into runs (run_id, run_name, scenario_id, source, created_at, request_json)"
                " values (?, ?, ?, ?, ?, ?)",
                (run_id, run_name, scenario_id, source, now, json.dumps(strip_secrets(request))),
            )
            db.executemany(
                "insert into rollouts (rollout_id, run_id, scenario_id, task_id, rollout_index, status, max_steps,"
                " created_at, model_config_json) values (?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
                [
                    (r.rollout_id, run_id, scenario_id, r.task_id, r.rollout_index, r.max_steps, now, config_json)
                    for r in rollouts
                ],
            )
            db.executemany(
                "insert into rollout_events values (?, 0, 'pending', ?, null)", [(r.rollout_id, now) for r in rollouts]
            )

    def run_request(self, run_id: str) -> dict[str, Any] | None:
        row = self._conn().execute("select request_json from runs where run_id = ?", (run_id,)).fetchone()
        return None if row is None else dict(json.loads(row["request_json"]))

    def find_run_id_by_name(self, run_name: str) -> str | None:
        row = self._conn().execute("select run_id from runs where run_name = ?", (run_name,)).fetchone()
        return None if row is None else str(row["run_id"])

    def _run_from_row(self, row: sqlite3.Row, counts: dict[str, int], rollout_ids: list[str]) -> Run:
        running = counts.get("running", 0)
        return Run(
            run_id=row["run_id"],
            run_name=row["run_name"],
            scenario_id=row["scenario_id"],
            source=row["source"],
            created_at=row["created_at"],
            total=sum(n for status, n in counts.items() if status != ERRORS_COUNT),
            errors=counts.get(ERRORS_COUNT, 0),
            completed=counts.get("completed", 0),
            failed=counts.get("failed", 0) + counts.get("workspace_error", 0),
            pending=counts.get("pending", 0),
            running=running,
            in_progress=running,
            rollout_ids=rollout_ids,
        )

    def _counts(self, run_id: str) -> dict[str, int]:
        """Rollouts per status, plus `errors`: finished ones that ended in an error, not the agent's failure."""
        rows = self._conn().execute(
            "select status, count(*) as n, count(error_class) as errors from rollouts where run_id = ? group by status",
            (run_id,),
        )
        counts: dict[str, int] = {ERRORS_COUNT: 0}
        for r in rows:
            counts[r["status"]] = int(r["n"])
            counts[ERRORS_COUNT] += int(r["errors"])
        return counts

    def get_run(self, run_id: str, expand_rollouts: bool = False) -> Run | None:
        row = self._conn().execute("select * from runs where run_id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        ids = self.rollout_ids(run_id) if expand_rollouts else []
        return self._run_from_row(row, self._counts(run_id), ids)

    def rollout_ids(self, run_id: str) -> list[str]:
        rows = self._conn().execute(
            "select rollout_id from rollouts where run_id = ? order by task_id, rollout_index", (run_id,)
        )
        return [r["rollout_id"] for r in rows]

    def list_runs(
        self,
        *,
        scenario_id: str | None,
        source: str | None,
        limit: int,
        offset: int,
        expand_rollouts: bool,
        run_name: str | None = None,
    ) -> tuple[int, list[Run]]:
        where, params = [], []
        for column, value in (("scenario_id", scenario_id), ("source", source), ("run_name", run_name)):
            if value:
                where.append(f"{column} = ?")
                params.append(value)
        clause = f"where {' and '.join(where)}" if where else ""
        conn = self._conn()
        total = int(conn.execute(f"select count(*) from runs {clause}", params).fetchone()[0])
        rows = conn.execute(
            f"select * from runs {clause} order by created_at desc, run_id limit ? offset ?", [*params, limit, offset]
        ).fetchall()
        runs = [
            self._run_from_row(r, self._counts(r["run_id"]), self.rollout_ids(r["run_id"]) if expand_rollouts else [])
            for r in rows
        ]
        return total, runs

    def request_cancel(self, run_id: str, requested: bool = True) -> None:
        """Persist (or clear) a cancel request, so an executor in another process sees it too."""
        with self._tx() as db:
            db.execute("update runs set cancel_requested = ? where run_id = ?", (int(requested), run_id))

    def cancel_requested(self, run_id: str) -> bool:
        row = self._conn().execute("select cancel_requested from runs where run_id = ?", (run_id,)).fetchone()
        return bool(row and row["cancel_requested"])

    def delete_run(self, run_id: str) -> int | None:
        with self._tx() as db:
            if db.execute("select 1 from runs where run_id = ?", (run_id,)).fetchone() is None:
                return None
            count = int(db.execute("select count(*) from rollouts where run_id = ?", (run_id,)).fetchone()[0])
            db.execute("delete from runs where run_id = ?", (run_id,))
        return count

    # -- rollouts ---------------------------------------------------------------------------------------
    def _events(self, rollout_ids: Sequence[str]) -> dict[str, list[StatusEvent]]:
        grouped: dict[str, list[dict[str, Any]]] = {rid: [] for rid in rollout_ids}
        if not rollout_ids:
            return {}
        conn = self._conn()
        for start in range(0, len(rollout_ids), 500):
            chunk = list(rollout_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for rollout_id, status, timestamp, detail in conn.execute(
                f"select rollout_id, status, timestamp, detail from rollout_events where rollout_id in ({marks}) "
                "order by rollout_id, seq",
                chunk,
            ):
                grouped[rollout_id].append({"status": status, "timestamp": timestamp, "detail": detail})
        # One validation call per rollout's events: a listing builds a dozen of them for every rollout it holds.
        return {rid: _STATUS_EVENTS.validate_python(items) for rid, items in grouped.items()}

    @staticmethod
    def _rollout_from_row(row: sqlite3.Row, events: list[StatusEvent]) -> Rollout:
        result = RolloutResult.model_validate_json(row["result_json"]) if row["result_json"] else None
        return Rollout(
            rollout_id=row["rollout_id"],
            scenario_id=row["scenario_id"],
            task_id=row["task_id"],
            run_id=row["run_id"],
            rollout_index=row["rollout_index"],
            status=RolloutStatus(row["status"]),
            phase=RolloutPhase(row["phase"]) if row["phase"] else None,
            current_step=row["current_step"],
            max_steps=row["max_steps"],
            created_at=row["created_at"],
            started_at=row["started_at"],
            completed_at=row["completed_at"],
            result=result,
            termination_reason=row["termination_reason"],
            model_config=_model_config_echo(row["model_config_json"]),
            status_events=events,
        )

    def list_rollouts(
        self,
        *,
        scenario_id: str | None = None,
        task_id: str | None = None,
        run_id: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        completed_after: str | None = None,
        with_events: bool = True,
    ) -> list[Rollout]:
        """The matching rollouts; `with_events=False` leaves their `status_events` empty (reading and validating
        a dozen events per rollout is most of a listing's cost, and a client following a run's progress does not
        need them)."""
        clause, params = self._rollout_filter(scenario_id, task_id, run_id, status, completed_after)
        page = "" if limit is None and not offset else " limit ? offset ?"
        if page:
            params = [*params, -1 if limit is None else limit, offset]
        rows = (
            self._conn()
            .execute(f"select * from rollouts {clause} order by created_at, task_id, rollout_index{page}", params)
            .fetchall()
        )
        if not with_events:
            return [self._rollout_from_row(r, []) for r in rows]
        events = self._events([r["rollout_id"] for r in rows])
        return [self._rollout_from_row(r, events[r["rollout_id"]]) for r in rows]

    @staticmethod
    def _rollout_filter(
        scenario_id: str | None,
        task_id: str | None,
        run_id: str | None,
        status: str | None,
        completed_after: str | None = None,
    ) -> tuple[str, list[Any]]:
        """`completed_after`: a `utc_now_iso()` timestamp; rollouts completed at or after it (the stored form
        sorts as text in time order)."""
        where, params = [], []
        filters = (("scenario_id", scenario_id), ("task_id", task_id), ("run_id", run_id), ("status", status))
        for column, value in filters:
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if completed_after is not None:
            where.append("completed_at >= ?")
            params.append(completed_after)
        return (f"where {' and '.join(where)}" if where else ""), params

    def count_rollouts(
        self,
        *,
        scenario_id: str | None = None,
        task_id: str | None = None,
        run_id: str | None = None,
        status: str | None = None,
        completed_after: str | None = None,
    ) -> int:
        clause, params = self._rollout_filter(scenario_id, task_id, run_id, status, completed_after)
        return int(self._conn().execute(f"select count(*) from rollouts {clause}", params).fetchone()[0])

    def run_rollout_pages(self, run_id: str, page_size: int) -> Iterator[list[Rollout]]:
        """The run's rollouts in `list_rollouts` order, `page_size` at a time (keyset paging: each page is one
        indexed query, and only one page is ever held)."""
        after: tuple[str, str, int] | None = None
        while True:
            keyset = "" if after is None else " and (created_at, task_id, rollout_index) > (?, ?, ?)"
            rows = (
                self._conn()
                .execute(
                    f"select * from rollouts where run_id = ?{keyset}"
                    " order by created_at, task_id, rollout_index limit ?",
                    (run_id, *(after or ()), page_size),
                )
                .fetchall()
            )
            if not rows:
                return
            events = self._events([r["rollout_id"] for r in rows])
            yield [self._rollout_from_row(r, events[r["rollout_id"]]) for r in rows]
            last = rows[-1]
            after = (last["created_at"], last["task_id"], last["rollout_index"])

    def get_rollout(self, rollout_id: str) -> Rollout | None:
        row = self._conn().execute("select * from rollouts where rollout_id = ?", (rollout_id,)).fetchone()
        if row is None:
            return None
        return self._rollout_from_row(row, self._events([rollout_id])[rollout_id])

    def artifacts_path(self, rollout_id: str) -> tuple[RolloutStatus, str | None] | None:
        row = (
            self._conn()
            .execute("select status, artifacts_path from rollouts where rollout_id = ?", (rollout_id,))
            .fetchone()
        )
        return None if row is None else (RolloutStatus(row["status"]), row["artifacts_path"])

    def _append_event(self, db: sqlite3.Connection, rollout_id: str, status: str, detail: str | None, now: str) -> None:
        db.execute(
            "insert into rollout_events select ?, coalesce(max(seq), -1) + 1, ?, ?, ? from rollout_events"
            " where rollout_id = ?",
            (rollout_id, status, now, detail, rollout_id),
        )

    def claim(self, rollout_id: str, runner: Runner | None = None) -> bool:
        """pending -> running; False when the rollout is no longer pending (cancelled, claimed elsewhere).

        `runner` records who executes it; an unowned running rollout counts as orphaned on the next recovery.
        """
        now = utc_now_iso()
        owner = (runner.runner_id, runner.pid, runner.started) if runner else (None, None, None)
        with self._tx() as db:
            changed = db.execute(
                "update rollouts set status = 'running', started_at = ?, phase = null, current_step = null,"
                " runner_id = ?, runner_pid = ?, runner_started = ? where rollout_id = ? and status = 'pending'",
                (now, *owner, rollout_id),
            ).rowcount
            if changed:
                self._append_event(db, rollout_id, RolloutStatus.RUNNING.value, None, now)
        return bool(changed)

    def record_progress(self, events: list[ProgressEvent]) -> None:
        """Apply phase and step events, in order, in one transaction (an executor batches its rollouts')."""
        if not events:
            return
        with self._tx() as db:
            self._apply_progress(db, events)

    def _apply_progress(self, db: sqlite3.Connection, events: Sequence[ProgressEvent]) -> None:
        for event in events:
            if event.step is not None:
                db.execute(
                    "update rollouts set current_step = ? where rollout_id = ? and status = 'running'",
                    (event.step, event.rollout_id),
                )
            else:
                step = 0 if event.phase == RolloutPhase.AGENT_RUNNING else None
                db.execute(
                    "update rollouts set phase = ?, current_step = ? where rollout_id = ? and status = 'running'",
                    (event.phase.value, step, event.rollout_id),
                )
            self._append_event(db, event.rollout_id, f"phase:{event.phase.value}", event.detail, event.at)

    def finish(
        self,
        rollout_id: str,
        status: RolloutStatus,
        result: RolloutResult,
        termination_reason: str,
        artifacts_path: str | None,
        progress: Sequence[ProgressEvent] = (),
    ) -> None:
        """Record the rollout's outcome, after `progress` (events still buffered in this process, the rollout's
        last phases among them) in the same transaction: one write per finished rollout instead of two."""
        now = utc_now_iso()
        with self._tx() as db:
            self._apply_progress(db, progress)
            if status == RolloutStatus.COMPLETED:
                db.execute("update rollouts set phase = 'completed' where rollout_id = ?", (rollout_id,))
                self._append_event(db, rollout_id, f"phase:{RolloutPhase.COMPLETED.value}", None, now)
            db.execute(
                "update rollouts set status = ?, completed_at = ?, result_json = ?, termination_reason = ?,"
                " artifacts_path = ?, error_class = ?, current_step = null where rollout_id = ?",
                (
                    status.value,
                    now,
                    result.model_dump_json(),
                    termination_reason,
                    artifacts_path,
                    result.error_class.value if result.error_class is not None else None,
                    rollout_id,
                ),
            )
            self._append_event(db, rollout_id, status.value, result.message[:500] or None, now)

    def run_cost_usd(self, run_id: str) -> float:
        """Estimated cost of the run's finished rollouts so far."""
        total = 0.0
        for (result_json,) in self._conn().execute(
            "select result_json from rollouts where run_id = ? and result_json is not null", (run_id,)
        ):
            total += float(json.loads(result_json).get("estimated_cost_usd") or 0.0)
        return total

    def fail_pending(self, rollout_ids: Sequence[str], reason: TerminationReason, message: str) -> int:
        """Pending rollouts that will never start (cancelled run): straight to failed."""
        now = utc_now_iso()
        error = ERROR_CLASS_OF_REASON.get(reason.value)
        error_class = error.value if error is not None else None
        result = RolloutResult(
            success=False, message=message, termination_reason=reason.value, error_class=error
        ).model_dump_json()
        count = 0
        with self._tx() as db:
            for rid in rollout_ids:
                changed = db.execute(
                    "update rollouts set status = 'failed', completed_at = ?, result_json = ?, termination_reason = ?,"
                    " error_class = ? where rollout_id = ? and status = 'pending'",
                    (now, result, reason.value, error_class, rid),
                ).rowcount
                if changed:
                    self._append_event(db, rid, RolloutStatus.FAILED.value, message, now)
                    count += 1
        return count

    def finished_rollouts(self, run_id: str, exclude: set[str] | frozenset[str] = frozenset()) -> list[Rollout]:
        """The run's rollouts in a terminal status, except those in `exclude` (the ones already reported)."""
        rows = (
            self._conn()
            .execute(
                "select rollout_id from rollouts where run_id = ? and status not in ('pending', 'running')"
                " order by rollout_id",
                (run_id,),
            )
            .fetchall()
        )
        found = (self.get_rollout(row["rollout_id"]) for row in rows if row["rollout_id"] not in exclude)
        return [rollout for rollout in found if rollout is not None]

    def pending_slots(self, run_id: str) -> list[NewRollout]:
        """The run's pending rollouts as the few fields an executor needs, in listing order: a 10,000-rollout
        run costs kilobytes here, where full `Rollout`s with their status events cost tens of megabytes."""
        rows = (
            self._conn()
            .execute(
                "select rollout_id, task_id, rollout_index, max_steps from rollouts"
                " where run_id = ? and status = 'pending' order by created_at, task_id, rollout_index",
                (run_id,),
            )
            .fetchall()
        )
        return [NewRollout(r["rollout_id"], r["task_id"], r["rollout_index"], r["max_steps"]) for r in rows]

    def requeue_unfinished(self, run_id: str, *, retry_failed: bool = True) -> int:
        """Resume: rollouts of the run that did not complete go back to pending (same id, same slot), so each
        task x rollout index still ends with exactly one finished rollout.

        Rollouts interrupted by a dead process are always re-queued; other *errors* (endpoint, tool server, NPC
        model, cancellation, provisioning) only with `retry_failed`. A failure by the agent is never re-queued:
        running it again until it passes would flatter the model. Rollouts a live process is executing are
        left alone.
        """
        self.fail_interrupted(run_id=run_id)
        now = utc_now_iso()
        if retry_failed:
            reasons = sorted(ERROR_CLASS_OF_REASON)
            condition = (
                "(status = 'workspace_error' or (status = 'failed' and"
                " (error_class is not null"
                f" or termination_reason in ({', '.join('?' * len(reasons))}))))"
            )
            params: tuple[str, ...] = (run_id, *reasons)
        else:
            condition = "status = 'failed' and termination_reason = ?"
            params = (run_id, TerminationReason.SERVER_RESTART.value)
        with self._tx() as db:
            rows = db.execute(f"select rollout_id from rollouts where run_id = ? and {condition}", params).fetchall()
            for row in rows:
                db.execute(
                    "update rollouts set status = 'pending', phase = null, current_step = null, started_at = null,"
                    " completed_at = null, result_json = null, termination_reason = null, error_class = null,"
                    " runner_id = null,"
                    " runner_pid = null, runner_started = null where rollout_id = ?",
                    (row["rollout_id"],),
                )
                self._append_event(db, row["rollout_id"], RolloutStatus.PENDING.value, "resumed", now)
        return len(rows)

    def fail_interrupted(self, *, runner: Runner | None = None, run_id: str | None = None) -> int:
        """Fail rollouts left `running` by an executor that is gone, with a clear termination reason.

        Called on startup (every dead process's rollouts), on shutdown (`runner`: this executor's own) and
        before a resume (`run_id`: that run's). A rollout owned by a live process is never touched.
        """
        now = utc_now_iso()
        result = RolloutResult(
            success=False,
            message=MSG_SERVER_RESTART,
            termination_reason=TerminationReason.SERVER_RESTART.value,
            error_class=ErrorClass.CANCELLED,
        ).model_dump_json()
        where, params = ["status = 'running'"], []
        if runner is not None:
            where.append("runner_id = ?")
            params.append(runner.runner_id)
        if run_id is not None:
            where.append("run_id = ?")
            params.append(run_id)
        with self._tx() as db:
            rows = db.execute(
                f"select rollout_id, runner_pid, runner_started from rollouts where {' and '.join(where)}", params
            ).fetchall()
            interrupted = [
                row["rollout_id"]
                for row in rows
                if runner is not None or not process_is_alive(row["runner_pid"], row["runner_started"])
            ]
            for rollout_id in interrupted:
                db.execute(
                    "update rollouts set status = 'failed', completed_at = ?, result_json = ?, termination_reason = ?,"
                    " error_class = ?, current_step = null where rollout_id = ? and status = 'running'",
                    (now, result, TerminationReason.SERVER_RESTART.value, ErrorClass.CANCELLED.value, rollout_id),
                )
                self._append_event(db, rollout_id, RolloutStatus.FAILED.value, MSG_SERVER_RESTART, now)
        return len(interrupted)

    # -- task-generation jobs ------------------------------------------------------------------------------
    @staticmethod
    def _job_from_row(row: sqlite3.Row) -> TaskGenJob:
        return TaskGenJob(
            job_id=row["job_id"],
            status=JobStatus(row["status"]),
            progress=row["progress"],
            created_at=row["created_at"],
            completed_at=row["completed_at"],
            error=row["error"],
        )

    def create_job(self, job_id: str, request: dict[str, Any], runner: Runner | None = None) -> TaskGenJob:
        owner = (runner.runner_id, runner.pid, runner.started) if runner else (None, None, None)
        with self._tx() as db:
            db.execute(
                "insert into taskgen_jobs (job_id, status, created_at, request_json, runner_id, runner_pid,"
                " runner_started) values (?, 'pending', ?, ?, ?, ?, ?)",
                (job_id, utc_now_iso(), json.dumps(strip_secrets(request)), *owner),
            )
        job = self.get_job(job_id)
        assert job is not None
        return job

    def get_job(self, job_id: str) -> TaskGenJob | None:
        row = self._conn().execute("select * from taskgen_jobs where job_id = ?", (job_id,)).fetchone()
        return None if row is None else self._job_from_row(row)

    def job_results(self, job_id: str) -> TaskGenResults | None:
        row = self._conn().execute("select results_json from taskgen_jobs where job_id = ?", (job_id,)).fetchone()
        if row is None or not row["results_json"]:
            return None
        return TaskGenResults.model_validate_json(row["results_json"])

    def start_job(self, job_id: str, runner: Runner) -> bool:
        """pending -> running; False when the job is no longer pending."""
        with self._tx() as db:
            changed = db.execute(
                "update taskgen_jobs set status = 'running', started_at = ?, runner_id = ?, runner_pid = ?,"
                " runner_started = ? where job_id = ? and status = 'pending'",
                (utc_now_iso(), runner.runner_id, runner.pid, runner.started, job_id),
            ).rowcount
        return bool(changed)

    def set_job_progress(self, job_id: str, progress: str) -> None:
        with self._tx() as db:
            db.execute(
                "update taskgen_jobs set progress = ? where job_id = ? and status = 'running'", (progress, job_id)
            )

    def complete_job(self, job_id: str, results: TaskGenResults) -> None:
        with self._tx() as db:
            db.execute(
                "update taskgen_jobs set status = 'completed', completed_at = ?, results_json = ?, error = null"
                " where job_id = ?",
                (utc_now_iso(), results.model_dump_json(), job_id),
            )

    def fail_job(self, job_id: str, error: str) -> None:
        with self._tx() as db:
            db.execute(
                "update taskgen_jobs set status = 'failed', completed_at = ?, error = ? where job_id = ?"
                " and status in ('pending', 'running')",
                (utc_now_iso(), error, job_id),
            )

    def fail_interrupted_jobs(self, *, runner: Runner | None = None) -> int:
        """Jobs whose process is gone (pending ones included: nothing would ever start them) are failed."""
        with self._tx() as db:
            rows = db.execute(
                "select job_id, status, runner_id, runner_pid, runner_started from taskgen_jobs"
                " where status in ('pending', 'running')"
            ).fetchall()
            interrupted = [
                row["job_id"]
                for row in rows
                if (runner is not None and row["runner_id"] == runner.runner_id)
                or (runner is None and not process_is_alive(row["runner_pid"], row["runner_started"]))
            ]
            now = utc_now_iso()
            for job_id in interrupted:
                db.execute(
                    "update taskgen_jobs set status = 'failed', completed_at = ?, error = ? where job_id = ?",
                    (now, MSG_JOB_INTERRUPTED, job_id),
                )
        return len(interrupted)
