"""`eval-pipelines export`: a sweep's results in the formats other tools read.

- `inspect`: Inspect AI eval logs (JSON, log format version 2), one per model x scenario, for `inspect view` and
  `inspect_ai.log.read_eval_log`. Written here from the log schema, so inspect_ai is not a dependency.
- `jsonl`: one rollout per line in OpenAI chat-messages form with its reward, for SFT and RL loaders.
- `parquet`: the sweep's rows of every table, one Parquet file per table.

Reads the DuckDB catalog only, and streams: rollouts are read per model x scenario in batches of `batch_size`, and
each batch's messages, tool calls and retries are fetched for that batch alone, so a sweep of any size is exported
in bounded memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata as package_metadata
from pathlib import Path
from typing import IO, Any

import duckdb

from eval_pipelines.inputs.paths import scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError
from eval_pipelines.llm.types import wire_tool_name
from eval_pipelines.reports.data import ReportError, model_label, open_catalog, resolve_sweep
from eval_pipelines.toolservers.registry import BUILTIN_SERVERS

FORMATS = ("inspect", "jsonl", "parquet")
#: Rollouts read at once; their messages, tool calls and retries are held only while the batch is written.
DEFAULT_BATCH_SIZE = 200
INSPECT_LOG_VERSION = 2
#: The one Inspect scorer of an exported log: the rollout's outcome from its latest programmatic verdicts.
SCORER = "verifiers"
#: Inspect names a model `<provider>/<model>`; simulated models get this provider, so no log passes them off as
#: a real model.
SIMULATED_PROVIDER = "simulated"
#: Tables (and the `rollout_scores` view) copied by the parquet export, in this order.
PARQUET_TABLES = (
    "rollouts",
    "rollout_scores",
    "rollout_attempts",
    "messages",
    "tool_calls",
    "state_diffs",
    "verifications",
    "judgements",
    "tasks",
)
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9.-]+")


class ExportError(ReportError):
    """The export cannot be made as asked: a filter matches nothing, or --out is the wrong kind of path."""


@dataclass(frozen=True)
class ExportSummary:
    sweep_id: str
    format: str
    files: list[Path]
    #: rollouts written (for parquet: rows of `rollouts` copied)
    rollouts: int
    #: rollouts left out: errored and unscored ones of a jsonl export without `include_errors`
    left_out: int = 0
    #: rollout batches read (inspect and jsonl)
    batches: int = 0


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


def export_results(
    db: Path,
    out: Path,
    fmt: str,
    *,
    sweep_id: str | None = None,
    model_name: str | None = None,
    scenario_id: str | None = None,
    include_errors: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    scenarios_root: Path | None = None,
) -> ExportSummary:
    """Export one sweep (default: the most recently started), narrowed to a model and/or a scenario.

    `out` is a directory for inspect and parquet, a file for jsonl. `include_errors` (jsonl only) also writes
    errored and not yet verified rollouts, with reward null; the inspect logs always hold them, as samples with
    `error` set and as unscored samples.
    """
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose one of {list(FORMATS)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    con = open_catalog(db)
    try:
        # Timestamps come back in UTC, whatever the machine's zone: every log and line states them so.
        con.execute("set TimeZone = 'UTC'")
        sweep = resolve_sweep(con, sweep_id)
        groups = _groups(con, sweep, model_name, scenario_id)
        if fmt == "parquet":
            return _export_parquet(con, sweep, model_name, scenario_id, Path(out))
        if fmt == "inspect":
            return _export_inspect(SweepReader(con, sweep, batch_size), groups, Path(out))
        reader = SweepReader(con, sweep, batch_size, tool_results=False)
        tools = TaskTools(scenarios_root or scenarios_dir())
        return _export_jsonl(reader, groups, Path(out), tools, include_errors)
    finally:
        con.close()


# --- reading -------------------------------------------------------------------------------------------------

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


def _groups(con: duckdb.DuckDBPyConnection, sweep: str, model_name: str | None, scenario_id: str | None) -> list[Group]:
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


# --- transcripts ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallRequest:
    """One tool call of an assistant message, as the model sent it."""

    id: str
    name: str
    #: the model's argument text (a JSON object when it was well formed)
    arguments: str


def _content_text(content: str | None) -> str | None:
    """A message's text. The warehouse stores non-string content as JSON; a list of text parts (OpenAI's
    content-parts form) becomes its joined text, so every exported message carries a plain string."""
    if content is None or not content.startswith("["):
        return content
    try:
        parts = json.loads(content)
    except ValueError:
        return content
    if isinstance(parts, list) and parts and all(isinstance(p, dict) and p.get("type") == "text" for p in parts):
        return "".join(str(p.get("text", "")) for p in parts)
    return content


def _call_requests(tool_calls_json: str | None, rollout_id: str, message_index: int) -> list[CallRequest]:
    if not tool_calls_json:
        return []
    try:
        raw = json.loads(tool_calls_json)
    except ValueError:
        return []
    requests: list[CallRequest] = []
    for position, call in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        arguments = function.get("arguments")
        # A trace may hold the arguments already decoded; the wire form is always a JSON string.
        text = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
        call_id = call.get("id") or f"{rollout_id}-{message_index}-{position}"
        requests.append(CallRequest(id=str(call_id), name=str(function.get("name", "")), arguments=text))
    return requests


def openai_messages(record: RolloutRecord) -> list[dict[str, Any]]:
    """The transcript in OpenAI chat-completions message form."""
    messages: list[dict[str, Any]] = []
    for message in record.messages:
        role = message["role"]
        content = _content_text(message.get("content"))
        if role == "assistant":
            calls = _call_requests(message.get("tool_calls_json"), record.row["rollout_id"], message["message_index"])
            if not calls:
                messages.append({"role": "assistant", "content": content or ""})
                continue
            # OpenAI's form of a turn that only calls tools: content null beside the calls.
            wire = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
            ]
            messages.append({"role": "assistant", "content": content or None, "tool_calls": wire})
        elif role == "tool":
            messages.append(
                {"role": "tool", "tool_call_id": message.get("tool_call_id") or "", "content": content or ""}
            )
        else:
            messages.append({"role": role, "content": content or ""})
    return messages


def _inspect_tool_call(call: CallRequest) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": call.id, "function": call.name, "arguments": {}, "type": "function"}
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        arguments = None
    if isinstance(arguments, dict):
        entry["arguments"] = arguments
    else:
        entry["parse_error"] = f"the arguments are not a JSON object: {call.arguments[:200]}"
    return entry


def _tool_error(call_row: Mapping[str, Any] | None, function: str | None, content: str) -> dict[str, Any] | None:
    """The Inspect error of a tool result, from the rollout's `tool_calls` row for that call."""
    if call_row is None or wire_tool_name(call_row["tool_server"], call_row["tool_name"]) != function:
        return None
    if call_row.get("arguments_error"):
        return {"type": "parsing", "message": str(call_row["arguments_error"])}
    if call_row.get("is_error"):
        return {"type": "unknown", "message": content}
    return None


def inspect_messages(record: RolloutRecord, model: str) -> list[dict[str, Any]]:
    """The transcript as Inspect ChatMessages: tool calls with decoded arguments, tool results naming their
    function and carrying the tool's error."""
    rollout_id = record.row["rollout_id"]
    functions: dict[str, str] = {}
    # Tool results come in the order of the recorded calls, so the k-th result is the k-th `tool_calls` row.
    call_rows = iter(record.tool_calls)
    messages: list[dict[str, Any]] = []
    for message in record.messages:
        role, index = message["role"], message["message_index"]
        content = _content_text(message.get("content")) or ""
        entry: dict[str, Any] = {"id": f"{rollout_id}-{index}", "content": content, "role": role}
        if role == "assistant":
            calls = _call_requests(message.get("tool_calls_json"), rollout_id, index)
            functions.update((c.id, c.name) for c in calls)
            entry.update(source="generate", model=model)
            if calls:
                entry["tool_calls"] = [_inspect_tool_call(c) for c in calls]
        elif role == "tool":
            call_id = message.get("tool_call_id")
            entry.update(tool_call_id=call_id, function=functions.get(call_id or ""))
            error = _tool_error(next(call_rows, None), entry["function"], content)
            if error is not None:
                entry["error"] = error
        elif role == "user":
            entry["source"] = "input"
        elif role != "system":
            continue  # Inspect has no other role; the warehouse records none
        messages.append(entry)
    return messages


class TaskTools:
    """The tools a task's agent is offered, in OpenAI's `tools` form, when they can be known from the scenario on
    disk: the definitions of its built-in tool servers, named as the reference agent names them. None for a task
    that also uses MCP servers (their tools are listed only at run time) or whose scenario is not on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._catalog: ScenarioCatalog | None = None
        self._by_scenario: dict[str, dict[str, list[dict[str, Any]] | None]] = {}

    def of(self, scenario_id: str, task_id: str) -> list[dict[str, Any]] | None:
        if scenario_id not in self._by_scenario:
            self._by_scenario[scenario_id] = self._load(scenario_id)
        return self._by_scenario[scenario_id].get(task_id)

    def _load(self, scenario_id: str) -> dict[str, list[dict[str, Any]] | None]:
        try:
            if self._catalog is None:
                self._catalog = ScenarioCatalog(self.root)
            scenario = self._catalog.get(scenario_id)
            if scenario.scenario_id != scenario_id:
                return {}  # a family id resolved to some version: not necessarily the one that ran
            tasks = scenario.tasks()
        except (KeyError, OSError, ScenarioError):
            return {}
        listed: dict[str, list[dict[str, Any]] | None] = {}
        for task_id, task in tasks.items():
            servers = [BUILTIN_SERVERS.get(ts.name) for ts in task.tool_servers]
            if task.mcp_servers or any(server is None for server in servers):
                listed[task_id] = None
                continue
            listed[task_id] = [
                {
                    "type": "function",
                    "function": {
                        "name": wire_tool_name(server.name, definition.name),
                        "description": definition.description,
                        "parameters": definition.parameters or {"type": "object", "properties": {}},
                    },
                }
                for server in servers
                if server is not None
                for definition in server.tool_definitions
            ]
        return listed


# --- shared --------------------------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def _verifier_results(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(v) for v in row.get("verdicts") or []]


def _name_part(text: str) -> str:
    """A part of a log's file name, cleaned as Inspect cleans its own: Inspect splits the name on `_`."""
    return _UNSAFE_IN_NAME.sub("-", text).strip("-") or "x"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:22]


class _AtomicText:
    """A text file written under a temporary name and moved into place on success: a failed export never leaves
    a truncated log that a viewer would try to read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp")

    def __enter__(self) -> IO[str]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = self.tmp.open("w", encoding="utf-8")
        return self.handle

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.handle.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# --- jsonl ---------------------------------------------------------------------------------------------------


def jsonl_line(record: RolloutRecord, tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    row = record.row
    return {
        "sweep_id": row["sweep_id"],
        "run_id": row["run_id"],
        "rollout_id": row["rollout_id"],
        "rollout_index": row["rollout_index"],
        "model_name": row["model_name"],
        "model_identifier": row.get("model_identifier"),
        "is_simulated": bool(row.get("is_simulated")),
        "scenario_id": row["scenario_id"],
        "task_id": row["task_id"],
        "messages": openai_messages(record),
        "tools": tools,
        "reward": row.get("score"),
        "outcome": record.outcome,
        "error_class": row.get("outcome_error_class"),
        "verifier_results": _verifier_results(row),
        "termination_reason": row.get("termination_reason"),
        "usage": {
            "prompt_tokens": row.get("prompt_tokens"),
            "completion_tokens": row.get("completion_tokens"),
            "total_tokens": row.get("total_tokens"),
            "cost_usd": row.get("cost_usd"),
        },
    }


def _export_jsonl(
    reader: SweepReader, groups: list[Group], out: Path, tools: TaskTools, include_errors: bool
) -> ExportSummary:
    if out.is_dir():
        raise ExportError(f"--out {out} is a directory; jsonl writes one file, e.g. {out / 'rollouts.jsonl'}")
    written = left_out = 0
    with _AtomicText(out) as handle:
        for group in groups:
            for batch in reader.batches_of(group):
                for record in batch:
                    # Only a pass or a fail says something about the model; an error or a missing verdict does not.
                    if record.outcome not in ("passed", "failed") and not include_errors:
                        left_out += 1
                        continue
                    line = jsonl_line(record, tools.of(group.scenario_id, record.row["task_id"]))
                    handle.write(_dump(line) + "\n")
                    written += 1
    return ExportSummary(reader.sweep_id, "jsonl", [out], written, left_out, reader.batches)


# --- inspect -------------------------------------------------------------------------------------------------


def inspect_model(model_name: str, provider: str | None, is_simulated: bool) -> str:
    return f"{SIMULATED_PROVIDER if is_simulated else provider or 'custom'}/{model_name}"


def _package_version() -> str:
    try:
        return package_metadata.version("eval_pipelines")
    except package_metadata.PackageNotFoundError:
        return "unknown"


def _metrics(totals: Mapping[str, Any]) -> dict[str, Any]:
    """Inspect metrics from the catalog's `scenario_model_metrics`: the same pass rate and task-clustered
    standard error every report shows. None of them when nothing was scored."""
    row = totals.get("metrics") or {}
    if row.get("pass_rate") is None:
        return {}
    metrics: dict[str, Any] = {"accuracy": {"name": "accuracy", "value": row["pass_rate"], "params": {}}}
    if row.get("clustered_se") is not None:
        metrics["stderr"] = {
            "name": "stderr",
            "value": row["clustered_se"],
            "params": {"cluster": "task_id"},
            "metadata": {k: row.get(k) for k in ("ci_t_low", "ci_t_high", "ci_boot_low", "ci_boot_high")},
        }
    return metrics


def _results(totals: Mapping[str, Any]) -> dict[str, Any]:
    metrics = _metrics(totals)
    score = {
        "name": SCORER,
        "scorer": SCORER,
        "scored_samples": int(totals.get("scored") or 0),
        "unscored_samples": int(totals.get("n") or 0) - int(totals.get("scored") or 0),
        "params": {},
        "metrics": metrics,
    }
    return {
        "total_samples": int(totals.get("n") or 0),
        "completed_samples": int(totals.get("n") or 0) - int(totals.get("errors") or 0) - int(totals["unfinished"]),
        "scores": [score],
        **({"headline": {"scorer": SCORER, "score": SCORER, "metric": "accuracy"}} if metrics else {}),
    }


def _usage(prompt: int | None, completion: int | None, total: int | None, cost: float | None) -> dict[str, Any]:
    if prompt is None and completion is None and total is None:
        return {}
    usage: dict[str, Any] = {
        "input_tokens": int(prompt or 0),
        "output_tokens": int(completion or 0),
        "total_tokens": int(total if total is not None else (prompt or 0) + (completion or 0)),
    }
    if cost is not None:
        usage["total_cost"] = float(cost)
    return usage


def inspect_header(sweep_id: str, group: Group, totals: Mapping[str, Any]) -> dict[str, Any]:
    """Every field of Inspect's EvalLog before `samples`, in the schema's order (Inspect reads a log's header by
    streaming up to `samples`)."""
    simulated = bool(totals.get("is_simulated"))
    model = inspect_model(group.model_name, totals.get("provider"), simulated)
    created = _iso(totals.get("created_at")) or datetime.now(UTC).isoformat()
    usage = _usage(
        totals.get("prompt_tokens"), totals.get("completion_tokens"), totals.get("total_tokens"), totals.get("cost_usd")
    )
    version = group.scenario_id.partition(":")[2]
    eval_spec: dict[str, Any] = {
        "eval_id": _digest("eval", sweep_id, group.scenario_id, group.model_name),
        "run_id": sweep_id,
        "created": created,
        "task": group.scenario_id,
        "task_id": _digest("task", sweep_id, group.scenario_id, group.model_name),
        "task_version": version or 0,
        "task_display_name": group.scenario_id,
        "task_attribs": {},
        "task_args": {},
        "task_args_passed": {},
        "tags": ["eval_pipelines", *(["simulated"] if simulated else [])],
        "dataset": {"name": group.scenario_id, "samples": int(totals.get("n") or 0)},
        "model": model,
        "model_generate_config": {} if totals.get("temperature") is None else {"temperature": totals["temperature"]},
        "model_base_url": totals.get("base_url"),
        "model_args": {"model": totals.get("model_identifier"), "provider": totals.get("provider")},
        "config": {"epochs": int(totals.get("epochs") or 1), "fail_on_error": False, "log_samples": True},
        "packages": {"eval_pipelines": _package_version()},
        "metadata": {
            "sweep_id": sweep_id,
            "model_name": group.model_name,
            "model_label": model_label(group.model_name, simulated),
            "is_simulated": simulated,
            "scenario_id": group.scenario_id,
            "run_ids": list(totals.get("run_ids") or []),
            "exported_by": "eval-pipelines export",
        },
        "scorers": [
            {
                "name": SCORER,
                "options": {},
                "metrics": [
                    {"name": "inspect_ai/accuracy", "options": {}},
                    {"name": "inspect_ai/stderr", "options": {"cluster": "task_id"}},
                ],
                "metadata": {"source": "latest programmatic verifier verdicts (rollout_scores)"},
            }
        ],
    }
    finished = not totals["unfinished"]
    return {
        "version": INSPECT_LOG_VERSION,
        "status": "success" if finished else "started",
        "eval": eval_spec,
        "plan": {
            "name": "plan",
            "steps": [{"solver": "eval_pipelines/agent", "params": {"max_steps": totals.get("max_steps")}}],
            "config": eval_spec["model_generate_config"],
        },
        "results": _results(totals),
        "stats": {
            "started_at": _iso(totals.get("started_at")) or created,
            "completed_at": (_iso(totals.get("completed_at")) or "") if finished else "",
            "model_usage": {model: usage} if usage else {},
        },
        "invalidated": False,
        "tags": eval_spec["tags"],
        "metadata": eval_spec["metadata"],
    }


def _output(messages: list[dict[str, Any]], model: str, termination_reason: str | None) -> dict[str, Any]:
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if last is None:
        return {"model": model, "choices": [], "completion": ""}
    if last.get("tool_calls"):
        stop_reason = "tool_calls"
    else:
        stop_reason = "stop" if termination_reason == "final_response" else "unknown"
    return {
        "model": model,
        "choices": [{"message": last, "stop_reason": stop_reason}],
        "completion": "" if last.get("tool_calls") else last["content"],
    }


def _score(record: RolloutRecord, completion: str) -> dict[str, Any]:
    row = record.row
    verdicts = _verifier_results(row)
    lines = [
        f"{'pass' if v.get('success') else 'FAIL'} {v['verifier']}" + (f": {v['message']}" if v.get("message") else "")
        for v in verdicts
        if v.get("kind") == "programmatic"
    ]
    if row.get("status") != "completed":
        # The agent ran out of steps or time, or crashed: a failure whatever the verifiers said of the state.
        lines.insert(0, f"rollout {row.get('status')}: {row.get('error') or row.get('termination_reason') or ''}")
    return {
        "value": "C" if record.outcome == "passed" else "I",
        "answer": completion,
        "explanation": "\n".join(lines),
        "metadata": {
            "reward": row.get("score"),
            "partial_credit": row.get("partial_credit"),
            "n_verifiers": row.get("n_verifiers"),
            "passed_verifiers": row.get("passed_verifiers"),
        },
        "history": [],
    }


def _eval_error(message: str) -> dict[str, Any]:
    return {"message": message, "traceback": message, "traceback_ansi": message}


def _sample_metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    keys = (
        "sweep_id",
        "run_id",
        "model_name",
        "is_simulated",
        "scenario_id",
        "task_id",
        "task_name",
        "rollout_index",
        "status",
        "termination_reason",
        "outcome",
        "outcome_error_class",
        "attempts",
        "steps_taken",
        "cost_usd",
        "final_answer_is_tool_call",
    )
    found = {key: row.get(key) for key in keys}
    found["error_class"] = found.pop("outcome_error_class")
    found["verifier_results"] = _verifier_results(row)
    return found


def inspect_sample(record: RolloutRecord, model: str) -> dict[str, Any]:
    row = record.row
    messages = inspect_messages(record, model)
    output = _output(messages, model, row.get("termination_reason"))
    first_user = next((m["content"] for m in messages if m["role"] == "user"), "")
    usage = _usage(row.get("prompt_tokens"), row.get("completion_tokens"), row.get("total_tokens"), row.get("cost_usd"))
    sample: dict[str, Any] = {
        "id": row["rollout_id"],
        "epoch": int(row["rollout_index"]) + 1,
        "input": row.get("instruction") or first_user,
        "target": "",
        "messages": messages,
        "output": output,
        "scores": _score(record, output["completion"]) if record.outcome in ("passed", "failed") else None,
        "metadata": _sample_metadata(row),
        "model_usage": {model: usage} if usage else {},
        "started_at": _iso(row.get("started_at")),
        "completed_at": _iso(row.get("completed_at")),
        "total_time": row.get("duration_seconds"),
        "working_time": row.get("duration_seconds"),
        "uuid": row["rollout_id"],
    }
    if sample["scores"] is not None:
        sample["scores"] = {SCORER: sample["scores"]}
    if record.outcome == "error":
        # An error says nothing about the model: Inspect keeps such a sample out of every metric, as we do.
        cause = row.get("error") or row.get("termination_reason") or "no detail recorded"
        sample["error"] = _eval_error(f"{row.get('outcome_error_class')}: {cause}")
    if record.retries:
        sample["error_retries"] = [
            _eval_error(f"attempt {r['attempt']}: {r.get('error_class')}: {r.get('message') or ''}")
            for r in record.retries
        ]
    if row.get("termination_reason") == "max_steps" and row.get("max_steps") is not None:
        sample["limit"] = {"type": "turn", "limit": float(row["max_steps"])}
    return sample


def inspect_log_name(header: Mapping[str, Any]) -> str:
    """`<created>_<task>_<model>_<task id>.json`, Inspect's own layout: `inspect view` lists only JSON logs named
    with a leading timestamp, and reads the task and its id from the name."""
    spec = header["eval"]
    created = datetime.fromisoformat(spec["created"]).astimezone(UTC).isoformat(timespec="seconds")
    parts = (created, spec["task"], spec["model"])
    return "_".join([*(_name_part(part) for part in parts), spec["task_id"]]) + ".json"


def _write_inspect_log(reader: SweepReader, group: Group, out_dir: Path) -> tuple[Path, int]:
    header = inspect_header(reader.sweep_id, group, reader.totals(group))
    model = header["eval"]["model"]
    path = out_dir / inspect_log_name(header)
    written = 0
    with _AtomicText(path) as handle:
        # The header first and the samples streamed after it, one batch at a time.
        handle.write(_dump(header)[:-1] + ', "samples": [')
        for batch in reader.batches_of(group):
            for record in batch:
                handle.write(("," if written else "") + "\n" + _dump(inspect_sample(record, model)))
                written += 1
        handle.write("\n]}\n")
    return path, written


def _export_inspect(reader: SweepReader, groups: list[Group], out: Path) -> ExportSummary:
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; inspect writes one log per model x scenario into a directory")
    files: list[Path] = []
    written = 0
    for group in groups:
        path, count = _write_inspect_log(reader, group, out)
        files.append(path)
        written += count
    return ExportSummary(reader.sweep_id, "inspect", files, written, 0, reader.batches)


# --- parquet -------------------------------------------------------------------------------------------------


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _export_parquet(
    con: duckdb.DuckDBPyConnection, sweep: str, model_name: str | None, scenario_id: str | None, out: Path
) -> ExportSummary:
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; parquet writes one file per table into a directory")
    out.mkdir(parents=True, exist_ok=True)
    # COPY takes no bound parameters, so the filter is inlined as quoted literals.
    selected = " and ".join(
        [
            f"sweep_id = {_literal(sweep)}",
            *([f"model_name = {_literal(model_name)}"] if model_name else []),
            *([f"scenario_id = {_literal(scenario_id)}"] if scenario_id else []),
        ]
    )
    by_rollout = f"sweep_id = {_literal(sweep)} and rollout_id in (select rollout_id from rollouts where {selected})"
    filters = {
        "rollouts": selected,
        "rollout_scores": selected,
        "tasks": f"scenario_id in (select distinct scenario_id from rollouts where {selected})",
    }
    present = {str(r[0]) for r in con.execute("select table_name from information_schema.tables").fetchall()}
    files: list[Path] = []
    copied: dict[str, int] = {}
    for table in PARQUET_TABLES:
        if table not in present:
            continue  # a catalog built before the table existed
        target = out / f"{table}.parquet"
        tmp = target.with_name(f".{target.name}.tmp")
        query = f"select * from {table} where {filters.get(table, by_rollout)}"
        try:
            row = con.execute(f"copy ({query}) to {_literal(str(tmp))} (format parquet)").fetchone()
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        copied[table] = int(row[0]) if row else 0
        files.append(target)
    return ExportSummary(sweep, "parquet", files, copied.get("rollouts", 0))
