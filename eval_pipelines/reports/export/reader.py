"""The catalog side of the export, apart from any format: the writers see rollouts only as batches of records, so
how little is read at a time is decided here alone."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb

from eval_pipelines.reports.export.output import ExportError

#: Rollouts read at once; their messages, tool calls and retries are held only while the batch is written.
DEFAULT_BATCH_SIZE = 200


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

#: The group's rollouts with their outcome (`rollout_scores`), latest verdicts and the task's instruction. The
#: verdicts are aggregated once per group: `verifications_latest` ranks over every file, so a per-batch query
#: would rank the whole warehouse again for each batch.
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

#: Per batch: filtering on the Hive columns first makes DuckDB open only the group's files.
_BATCH_FILTER = "model = $model_key and scenario = $scenario_key and rollout_id in (select unnest($ids))"
_MESSAGES_SQL = f"""
select rollout_id, message_index, role, content, tool_call_id, tool_calls_json
from messages where {_BATCH_FILTER} order by rollout_id, message_index
"""
_TOOL_CALLS_SQL = f"select * from tool_calls where {_BATCH_FILTER} order by rollout_id, call_index"
_RETRIES_SQL = f"select * from rollout_attempts where {_BATCH_FILTER} and not is_final order by rollout_id, attempt"

_GROUP_TOTALS_SQL = """
select count(*) as n,
       count(*) filter (where status in ('pending', 'running')) as unfinished,
       min(created_at) as created_at, min(started_at) as started_at, max(completed_at) as completed_at,
       sum(prompt_tokens) as prompt_tokens, sum(completion_tokens) as completion_tokens,
       sum(total_tokens) as total_tokens, sum(cost_usd) as cost_usd,
       max(rollout_index) + 1 as epochs, bool_or(is_simulated) as is_simulated,
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
    raise ExportError(
        f"sweep {sweep!r} has no rollouts of {asked}; its models: {models or []}, its scenarios: {scenarios or []}"
    )


class SweepReader:
    """Reads one sweep group by group, in batches of rollouts, each with its transcript."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, sweep_id: str, batch_size: int, *, tool_results: bool = True
    ) -> None:
        self.con = con
        self.sweep_id = sweep_id
        self.batch_size = batch_size
        #: also read each rollout's `tool_calls` rows and retried attempts (the inspect logs show both)
        self.tool_results = tool_results
        self.batches = 0

    def totals(self, group: Group) -> dict[str, Any]:
        params = group.params(self.sweep_id)
        totals = _one(self.con, _GROUP_TOTALS_SQL, params)
        totals.update(_one(self.con, _GROUP_OUTCOMES_SQL, params))
        totals["metrics"] = _one(
            self.con,
            _GROUP_METRICS_SQL,
            {k: params[k] for k in ("sweep", "model_name", "scenario_id")},
        )
        return totals

    def batches_of(self, group: Group) -> Iterator[list[RolloutRecord]]:
        # A cursor of its own: the per-batch queries run on the main connection while this result is still open.
        cursor = self.con.cursor()
        try:
            cursor.execute(_GROUP_ROLLOUTS_SQL, group.params(self.sweep_id))
            while rows := cursor.fetchmany(self.batch_size):
                self.batches += 1
                yield self._with_transcripts(group, _dicts(cursor, rows))
        finally:
            cursor.close()

    def _with_transcripts(self, group: Group, rows: list[dict[str, Any]]) -> list[RolloutRecord]:
        params: dict[str, Any] = {
            "model_key": group.model_key,
            "scenario_key": group.scenario_key,
            "ids": [row["rollout_id"] for row in rows],
        }
        # Each query scans the group's files once more, so only what the format shows is read.
        messages = self._by_rollout(_MESSAGES_SQL, params)
        calls = self._by_rollout(_TOOL_CALLS_SQL, params) if self.tool_results else {}
        retried = self.tool_results and any((row.get("attempts") or 1) > 1 for row in rows)
        retries = self._by_rollout(_RETRIES_SQL, params) if retried else {}
        return [
            RolloutRecord(
                row,
                messages.get(row["rollout_id"], []),
                calls.get(row["rollout_id"], []),
                retries.get(row["rollout_id"], []),
            )
            for row in rows
        ]

    def _by_rollout(self, sql: str, params: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        cursor = self.con.execute(sql, params)
        grouped: dict[str, list[dict[str, Any]]] = {}
        for row in _dicts(cursor, cursor.fetchall()):
            grouped.setdefault(row["rollout_id"], []).append(row)
        return grouped


def verifier_results(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(v) for v in row.get("verdicts") or []]
