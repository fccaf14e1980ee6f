"""Pure functions from domain objects to warehouse tables (`ColumnTable`) with the registered schemas.

This is the hot path (tens of thousands of rollouts per sweep), so columns are built as plain Python lists
and handed to the store once, which has DuckDB write them; no pandas, no Arrow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import zip_longest
from typing import Any

from eval_pipelines.lib.redact import redact_optional_url, strip_secrets
from eval_pipelines.schemas.artifacts import (
    META_SIMULATOR_CHECKS,
    META_STATE_DIFFS,
    META_TEXT_TOOL_CALL,
    META_USAGE,
    RunArtifacts,
    SimulatorCheck,
)
from eval_pipelines.schemas.runs import ErrorClass, Rollout, RolloutStatus, error_class_of
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.schemas.tools import StateDiff
from eval_pipelines.schemas.verifiers import VerifierOutcome
from eval_pipelines.warehouse.tables import (
    MESSAGES,
    ROLLOUT_ATTEMPTS,
    ROLLOUTS,
    SIMULATOR_CHECKS,
    STATE_DIFFS,
    TASKS,
    TOOL_CALLS,
    VERIFICATIONS,
    TableSpec,
)


@dataclass(frozen=True)
class ColumnTable:
    """Rows of one warehouse table held column by column, as Python lists in the order of `spec`'s columns: what
    the row builders make and `Warehouse` writes and reads. Build one with `build_table`, which checks it."""

    spec: TableSpec
    columns: Mapping[str, list[Any]]

    @property
    def num_rows(self) -> int:
        first = next(iter(self.columns.values()), [])
        return len(first)

    @property
    def column_names(self) -> tuple[str, ...]:
        return self.spec.column_names

    def column(self, name: str) -> list[Any]:
        return self.columns[name]

    def to_pydict(self) -> dict[str, list[Any]]:
        """The columns by name, in order (copies of the lists)."""
        return {name: list(self.columns[name]) for name in self.spec.column_names}

    def to_pylist(self) -> list[dict[str, Any]]:
        """The rows as dicts, in order."""
        names = self.spec.column_names
        return [dict(zip(names, row, strict=True)) for row in zip(*(self.columns[n] for n in names), strict=True)]


#: Keys of the dict `rollout_tables` returns.
ROLLOUT_TABLE_NAMES = (
    ROLLOUTS.name,
    ROLLOUT_ATTEMPTS.name,
    MESSAGES.name,
    TOOL_CALLS.name,
    STATE_DIFFS.name,
    SIMULATOR_CHECKS.name,
)


@dataclass(frozen=True)
class RolloutContext:
    """What a rollout does not know about itself: the sweep and partition it was launched for."""

    sweep_id: str
    run_name: str
    model_key: str
    scenario_key: str
    model_name: str
    is_simulated: bool
    base_url: str | None = None


@dataclass(frozen=True)
class VerificationRecord:
    sweep_id: str
    run_id: str
    rollout_id: str
    scenario_id: str
    task_id: str
    model_name: str
    outcome: VerifierOutcome
    verified_at: datetime

    @classmethod
    def of_rollout(cls, row: Mapping[str, Any], outcome: VerifierOutcome, verified_at: datetime) -> VerificationRecord:
        """A verdict on the stored rollout `row` (its `rollouts` columns: sweep, run, ids, model)."""
        return cls(
            sweep_id=row["sweep_id"],
            run_id=row["run_id"],
            rollout_id=row["rollout_id"],
            scenario_id=row["scenario_id"],
            task_id=row["task_id"],
            model_name=row["model_name"],
            outcome=outcome,
            verified_at=verified_at,
        )


def to_json(value: Any) -> str:
    """Compact, key-sorted JSON of secret-stripped data, so re-writing the same rollout gives the same bytes."""
    return json.dumps(strip_secrets(value), ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def _text_or_json(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return to_json(value)


def parse_timestamp(value: str | datetime | None) -> datetime | None:
    """ISO 8601 text to an aware UTC datetime; naive values are UTC because every service stamps in UTC.

    Unparseable text becomes NULL rather than an error: a hosted variant's odd timestamp must not lose a whole
    partition of rollouts.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        parsed = value
    else:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def build_table(spec: TableSpec, columns: Mapping[str, Sequence[Any]]) -> ColumnTable:
    """A table of `spec` from its columns (every column of the schema, in any order); a null in a REQUIRED
    column, or columns of different lengths, are refused here rather than by a Parquet reader later."""
    missing = [name for name in spec.column_names if name not in columns]
    extra = [name for name in columns if name not in spec.column_names]
    if missing or extra:
        raise ValueError(f"{spec.name}: columns missing {missing}, unexpected {extra}")
    return _build(spec, {name: list(columns[name]) for name in spec.column_names})


def rows_table(spec: TableSpec, rows: Iterable[Mapping[str, Any]]) -> ColumnTable:
    """A table of `spec` from rows as dicts; a key a row lacks is NULL there (refused in a REQUIRED column), a key
    the schema lacks is ignored."""
    listed = list(rows)
    return _build(spec, {name: [row.get(name) for row in listed] for name in spec.column_names})


def _build(spec: TableSpec, columns: Mapping[str, list[Any]]) -> ColumnTable:
    if tuple(columns) != spec.column_names:
        raise RuntimeError(f"{spec.name}: built columns {list(columns)} != schema {list(spec.column_names)}")
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{spec.name}: columns of different lengths {lengths}")
    for column in spec.columns:
        # DuckDB writes every column as OPTIONAL; a null where the schema says there is none would then reach
        # the views and the metrics, which count on it.
        nulls = 0 if column.nullable else sum(v is None for v in columns[column.name])
        if nulls:
            raise ValueError(f"{spec.name}.{column.name} is not nullable but got {nulls} null value(s)")
    return ColumnTable(spec, columns)


def _columns(spec: TableSpec) -> dict[str, list[Any]]:
    return {name: [] for name in spec.column_names}


def _usage_fallback(artifacts: RunArtifacts | None) -> dict[str, Any]:
    if artifacts is None:
        return {}
    usage = artifacts.metadata.get(META_USAGE)
    return usage if isinstance(usage, dict) else {}


def _error_text(rollout: Rollout, artifacts: RunArtifacts | None) -> str | None:
    if artifacts is not None and artifacts.error:
        return artifacts.error
    if rollout.status in (RolloutStatus.FAILED, RolloutStatus.WORKSPACE_ERROR) and rollout.result is not None:
        return rollout.result.message or None
    return None


def _state_diffs(artifacts: RunArtifacts) -> list[StateDiff]:
    raw = artifacts.metadata.get(META_STATE_DIFFS) or []
    return [d if isinstance(d, StateDiff) else StateDiff.model_validate(d) for d in raw]


def rollout_tables(
    ctx: RolloutContext, rollouts: Iterable[tuple[Rollout, RunArtifacts | None, str | None]]
) -> dict[str, ColumnTable]:
    """`rollouts`, `messages`, `tool_calls` and `state_diffs` tables for one (model, scenario) partition.

    Each item is (rollout, its artifacts or None when they could not be fetched, where the JSON trace lives).
    """
    r = _columns(ROLLOUTS)
    a = _columns(ROLLOUT_ATTEMPTS)
    m = _columns(MESSAGES)
    tc = _columns(TOOL_CALLS)
    sd = _columns(STATE_DIFFS)
    sc = _columns(SIMULATOR_CHECKS)
    base_url_ctx = redact_optional_url(ctx.base_url)

    for rollout, artifacts, artifacts_path in rollouts:
        echo = rollout.model_config_
        result = rollout.result
        usage = _usage_fallback(artifacts) if result is None else {}

        r["sweep_id"].append(ctx.sweep_id)
        r["run_id"].append(rollout.run_id)
        r["run_name"].append(ctx.run_name)
        r["rollout_id"].append(rollout.rollout_id)
        r["rollout_index"].append(rollout.rollout_index)
        r["scenario_id"].append(rollout.scenario_id)
        r["task_id"].append(rollout.task_id)
        r["model_name"].append(ctx.model_name)
        r["model_identifier"].append(echo.model if echo else (artifacts.model if artifacts else None))
        r["provider"].append(echo.provider if echo else (artifacts.provider if artifacts else None))
        r["base_url"].append(redact_optional_url(echo.base_url) if echo and echo.base_url else base_url_ctx)
        r["is_simulated"].append(ctx.is_simulated)
        r["temperature"].append(echo.temperature if echo else None)
        r["max_steps"].append(rollout.max_steps)
        r["status"].append(rollout.status.value)
        termination_reason = rollout.termination_reason or (result.termination_reason if result is not None else None)
        r["termination_reason"].append(termination_reason)
        error_class = (
            error_class_of(rollout.status.value, termination_reason, result) if rollout.status.is_terminal else None
        )
        r["error_class"].append(error_class.value if error_class is not None else None)
        r["attempts"].append(result.attempts if result is not None else 1)
        if rollout.status.is_terminal:
            attempt_keys = (ctx.sweep_id, rollout.rollout_id, rollout.task_id, ctx.model_name)
            _append_attempts(a, attempt_keys, rollout, termination_reason, error_class)
        if result is not None:
            r["success"].append(result.success)
            r["reward"].append(result.reward)
            r["steps_taken"].append(result.steps_taken)
            r["prompt_tokens"].append(result.prompt_tokens)
            r["completion_tokens"].append(result.completion_tokens)
            r["total_tokens"].append(result.total_tokens)
            r["cost_usd"].append(result.estimated_cost_usd)
            r["duration_seconds"].append(result.duration_seconds)
        else:
            # No result (e.g. a workspace error before the agent ran): what it cost is still worth keeping.
            r["success"].append(None)
            r["reward"].append(None)
            r["steps_taken"].append(artifacts.steps_taken if artifacts is not None else None)
            r["prompt_tokens"].append(usage.get("prompt_tokens"))
            r["completion_tokens"].append(usage.get("completion_tokens"))
            r["total_tokens"].append(usage.get("total_tokens"))
            r["cost_usd"].append(usage.get("cost_usd"))
            r["duration_seconds"].append(None)
        r["created_at"].append(parse_timestamp(rollout.created_at))
        r["started_at"].append(parse_timestamp(rollout.started_at))
        r["completed_at"].append(parse_timestamp(rollout.completed_at))
        r["error"].append(_error_text(rollout, artifacts))
        r["artifacts_path"].append(artifacts_path)
        flagged = artifacts.metadata.get(META_TEXT_TOOL_CALL) if artifacts is not None else None
        r["final_answer_is_tool_call"].append(flagged if isinstance(flagged, bool) else None)

        if artifacts is None:
            continue
        keys = (ctx.sweep_id, rollout.rollout_id, rollout.task_id, ctx.model_name)

        for i, message in enumerate(artifacts.messages):
            _append_keys(m, keys)
            m["message_index"].append(i)
            m["role"].append(str(message.get("role", "")))
            m["content"].append(_text_or_json(message.get("content")))
            tool_call_id = message.get("tool_call_id")
            m["tool_call_id"].append(None if tool_call_id is None else str(tool_call_id))
            tool_calls = message.get("tool_calls")
            m["tool_calls_json"].append(to_json(tool_calls) if tool_calls else None)
            timestamp = message.get("timestamp")
            m["timestamp"].append(None if timestamp is None else str(timestamp))

        # A crash between a call and its result leaves the lists uneven; the call is still evidence.
        for i, (call, call_result) in enumerate(zip_longest(artifacts.tool_calls, artifacts.tool_results)):
            if call is None:
                break
            _append_keys(tc, keys)
            tc["call_index"].append(i)
            tc["tool_server"].append(call.tool_server)
            tc["tool_name"].append(call.tool_name)
            tc["parameters_json"].append(to_json(call.parameters))
            tc["observation"].append(_text_or_json(call_result.observation) if call_result else None)
            tc["is_error"].append(bool(call_result.is_error) if call_result else False)
            tc["raw_arguments"].append(call.raw_arguments)
            tc["arguments_error"].append(call.arguments_error)

        for i, diff in enumerate(_state_diffs(artifacts)):
            _append_keys(sd, keys)
            sd["diff_index"].append(i)
            sd["tool_server"].append(diff.tool_server)
            sd["scope"].append(diff.scope.value)
            sd["step_index"].append(diff.step_index)
            sd["tool_name"].append(diff.tool_name)
            sd["summary"].append(diff.summary)
            sd["before_json"].append(to_json(diff.before))
            sd["after_json"].append(to_json(diff.after))

        for check in artifacts.metadata.get(META_SIMULATOR_CHECKS) or []:
            checked = SimulatorCheck.model_validate(check)
            _append_keys(sc, keys)
            sc["simulator"].append(checked.simulator)
            sc["check_name"].append(checked.check)
            sc["method"].append(checked.method)
            sc["passed"].append(checked.passed)
            sc["detail"].append(checked.detail)

    return {
        ROLLOUTS.name: _build(ROLLOUTS, r),
        ROLLOUT_ATTEMPTS.name: _build(ROLLOUT_ATTEMPTS, a),
        MESSAGES.name: _build(MESSAGES, m),
        TOOL_CALLS.name: _build(TOOL_CALLS, tc),
        STATE_DIFFS.name: _build(STATE_DIFFS, sd),
        SIMULATOR_CHECKS.name: _build(SIMULATOR_CHECKS, sc),
    }


def _append_attempts(
    a: dict[str, list[Any]],
    keys: tuple[str, str, str, str],
    rollout: Rollout,
    termination_reason: str | None,
    error_class: ErrorClass | None,
) -> None:
    """The rollout's errored attempts, then its final one."""
    result = rollout.result
    earlier = result.attempt_errors if result is not None else []
    for attempt in earlier:
        _append_keys(a, keys)
        a["attempt"].append(attempt.attempt)
        a["is_final"].append(False)
        a["status"].append(RolloutStatus.FAILED.value)
        a["error_class"].append(attempt.error_class.value)
        a["termination_reason"].append(attempt.termination_reason)
        a["message"].append(attempt.message)
        a["started_at"].append(parse_timestamp(attempt.started_at))
        a["completed_at"].append(parse_timestamp(attempt.completed_at))
    _append_keys(a, keys)
    a["attempt"].append(len(earlier) + 1)
    a["is_final"].append(True)
    a["status"].append(rollout.status.value)
    a["error_class"].append(error_class.value if error_class is not None else None)
    a["termination_reason"].append(termination_reason)
    a["message"].append(result.message if result is not None else None)
    a["started_at"].append(parse_timestamp(earlier[-1].completed_at if earlier else rollout.started_at))
    a["completed_at"].append(parse_timestamp(rollout.completed_at))


def _append_keys(columns: dict[str, list[Any]], keys: tuple[str, str, str, str]) -> None:
    sweep_id, rollout_id, task_id, model_name = keys
    columns["sweep_id"].append(sweep_id)
    columns["rollout_id"].append(rollout_id)
    columns["task_id"].append(task_id)
    columns["model_name"].append(model_name)


def verification_table(rows: Iterable[VerificationRecord]) -> ColumnTable:
    v = _columns(VERIFICATIONS)
    for row in rows:
        if row.verified_at.tzinfo is None:
            # `verifications_latest` orders by this column; a local-time value would silently pick the wrong
            # verifier version, so ambiguity is an error here rather than a guess.
            raise ValueError(f"verified_at must be timezone-aware (rollout {row.rollout_id})")
        outcome = row.outcome
        v["sweep_id"].append(row.sweep_id)
        v["run_id"].append(row.run_id)
        v["rollout_id"].append(row.rollout_id)
        v["scenario_id"].append(row.scenario_id)
        v["task_id"].append(row.task_id)
        v["model_name"].append(row.model_name)
        v["verifier"].append(outcome.module)
        v["verifier_version"].append(outcome.verifier_version)
        v["kind"].append(outcome.kind.value)
        v["success"].append(outcome.success)
        v["is_error"].append(outcome.is_error)
        v["reward"].append(outcome.reward)
        v["message"].append(outcome.message)
        v["output_json"].append(to_json(outcome.output))
        v["verified_at"].append(row.verified_at.astimezone(UTC))
    return _build(VERIFICATIONS, v)


def tasks_table(scenario_id: str, tasks: Iterable[Task]) -> ColumnTable:
    t = _columns(TASKS)
    for task in tasks:
        t["scenario_id"].append(scenario_id)
        t["task_id"].append(task.task_id)
        t["name"].append(task.name)
        t["category"].append(task.category)
        t["difficulty"].append(task.difficulty)
        t["version"].append(task.version)
        t["num_reference_actions"].append(len(task.reference_actions))
        t["verifiers"].append(list(task.verifiers))
        t["description"].append(task.description)
        t["benchmark"].append(task.benchmark)
        t["unrunnable_reason"].append(task.unrunnable_reason)
    return _build(TASKS, t)
