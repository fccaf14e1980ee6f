"""Explicit schemas of every warehouse table, with a doc string per column.

Schemas are written out rather than inferred: an inferred schema changes type the first time a column is
all-null or an int arrives as a float, and DuckDB's `union_by_name` then has to reconcile files that
disagree. The docs here generate `docs/warehouse.md`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

#: Hive partition columns. They live in the path (`model=<key>/scenario=<key>`), never inside the files:
#: DuckDB lets the path value silently win over a file column of the same name.
HIVE_MODEL = "model"
HIVE_SCENARIO = "scenario"
HIVE_COLUMN_DOCS: dict[str, str] = {
    HIVE_MODEL: "Partition key of the model (from the Hive path `model=<key>`); the sweep's partition-safe name.",
    HIVE_SCENARIO: "Partition key of the scenario (from the Hive path `scenario=<key>`); partition-safe form.",
}


class ColumnType(StrEnum):
    """A column's type, by its DuckDB name: DuckDB writes and reads the files (`store.py`) and the catalog's views
    have these types. Each is one Parquet logical type, the same ones pyarrow wrote before (string, int32, int64,
    double, boolean, timestamp in microseconds adjusted to UTC, a list of strings), so older files read alike."""

    STRING = "VARCHAR"
    INT32 = "INTEGER"
    INT64 = "BIGINT"
    FLOAT64 = "DOUBLE"
    BOOL = "BOOLEAN"
    #: Microseconds since the epoch in UTC (Parquet `TIMESTAMP(isAdjustedToUTC=true, MICROS)`).
    TIMESTAMP_UTC = "TIMESTAMP WITH TIME ZONE"
    STRING_LIST = "VARCHAR[]"


TIMESTAMP_UTC = ColumnType.TIMESTAMP_UTC


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    type: ColumnType
    doc: str
    nullable: bool = False


@dataclass(frozen=True)
class TableSpec:
    name: str
    doc: str
    partition_by: tuple[str, ...]
    columns: tuple[ColumnSpec, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def column_docs(self) -> dict[str, str]:
        return {c.name: c.doc for c in self.columns}


def _c(name: str, type_: ColumnType, doc: str, *, nullable: bool = False) -> ColumnSpec:
    return ColumnSpec(name, type_, doc, nullable)


_S = ColumnType.STRING
_I32 = ColumnType.INT32
_I64 = ColumnType.INT64
_F64 = ColumnType.FLOAT64
_BOOL = ColumnType.BOOL

_BY_MODEL_SCENARIO = (HIVE_MODEL, HIVE_SCENARIO)
_BY_SCENARIO = (HIVE_SCENARIO,)

ROLLOUTS = TableSpec(
    name="rollouts",
    doc="One row per rollout (one agent attempt at one task), as the evaluation service reported it.",
    partition_by=_BY_MODEL_SCENARIO,
    columns=(
        _c("sweep_id", _S, "Sweep that launched the rollout."),
        _c("run_id", _S, "Evaluation-service run id."),
        _c("run_name", _S, "Idempotent run name, e.g. `sweep-S-M-<date>`."),
        _c("rollout_id", _S, "Evaluation-service rollout id; unique across the warehouse."),
        _c("rollout_index", _I32, "Index of the rollout among the repeats of its task in the run."),
        _c("scenario_id", _S, "Raw scenario id (`family` or `family:version`)."),
        _c("task_id", _S, "Task id within the scenario."),
        _c("model_name", _S, "The model's name in the sweep config."),
        _c(
            "model_identifier",
            _S,
            "LLM model identifier sent to the provider (model_config.model); not called `model` because "
            "that name is the Hive partition column.",
            nullable=True,
        ),
        _c("provider", _S, "Provider (`custom`, `openai`, ...).", nullable=True),
        _c("base_url", _S, "Chat-completions base URL, credentials removed.", nullable=True),
        _c("is_simulated", _BOOL, "True for the offline simulated models (`sim://local`)."),
        _c("temperature", _F64, "Sampling temperature.", nullable=True),
        _c("max_steps", _I32, "Step budget of the rollout."),
        _c("status", _S, "Rollout status: completed, failed, workspace_error, pending or running."),
        _c("termination_reason", _S, "Why the rollout stopped (final_response, max_steps, ...).", nullable=True),
        _c(
            "error_class",
            _S,
            "Set when the rollout ended in an *error*, not a failure of the agent: model_endpoint, tool_server, "
            "npc_model, user_simulator, simulator_off_script, verifier, cancelled, budget, internal or "
            "agent_environment. Errors are left out of every pass rate.",
            nullable=True,
        ),
        _c(
            "attempts",
            _I32,
            "Attempts made; those before the last ended in retryable errors (see rollout_attempts). NULL in files "
            "written before attempts were counted.",
            nullable=True,
        ),
        _c(
            "success",
            _BOOL,
            "The engine's `result.success` at run time; re-verification does not change it (see rollout_scores).",
            nullable=True,
        ),
        _c("reward", _F64, "The engine's `result.reward` at run time.", nullable=True),
        _c("steps_taken", _I32, "Tool calls the agent made.", nullable=True),
        _c("prompt_tokens", _I64, "Prompt tokens over all LLM calls.", nullable=True),
        _c("completion_tokens", _I64, "Completion tokens over all LLM calls.", nullable=True),
        _c("total_tokens", _I64, "Prompt plus completion tokens.", nullable=True),
        _c("cost_usd", _F64, "Estimated cost in USD.", nullable=True),
        _c("duration_seconds", _F64, "Wall-clock duration of the rollout.", nullable=True),
        _c("created_at", TIMESTAMP_UTC, "When the rollout was created.", nullable=True),
        _c("started_at", TIMESTAMP_UTC, "When the rollout started running.", nullable=True),
        _c("completed_at", TIMESTAMP_UTC, "When the rollout reached a terminal status.", nullable=True),
        _c("error", _S, "Error text of a failed rollout.", nullable=True),
        _c("artifacts_path", _S, "Where the rollout's JSON trace (RunArtifacts) is stored.", nullable=True),
        _c(
            "final_answer_is_tool_call",
            _BOOL,
            "The final answer is a tool call written as text (bare JSON, a fenced block or <tool_call> tags): the "
            "endpoint did not parse the model's call. Still a failure, flagged so it can be filtered. NULL without "
            "a trace, or in files written before the flag existed.",
            nullable=True,
        ),
    ),
)

TASKS = TableSpec(
    name="tasks",
    doc="One row per task of a scenario. Partitioned by scenario only.",
    partition_by=_BY_SCENARIO,
    columns=(
        _c("scenario_id", _S, "Raw scenario id."),
        _c("task_id", _S, "Task id within the scenario."),
        _c("name", _S, "Task name."),
        _c("category", _S, "Task category."),
        _c("difficulty", _S, "Task difficulty label."),
        _c("version", _S, "Task version."),
        _c("num_reference_actions", _I32, "Tool calls in the task's reference solution."),
        _c("verifiers", ColumnType.STRING_LIST, "Verifier modules that grade the task."),
        _c("description", _S, "The instruction given to the agent."),
        _c(
            "benchmark",
            _S,
            "The benchmark whose adapter materialised the task (`bfcl`, `tau2`); NULL for every other task, and in "
            "files written before the column existed.",
            nullable=True,
        ),
        _c(
            "unrunnable_reason",
            _S,
            "Why the task cannot run here (a server or app nobody provides, a verifier with no file, nothing grades "
            "it): sweeps leave it out. NULL for a task that runs, and in files written before the column existed.",
            nullable=True,
        ),
    ),
)

MESSAGES = TableSpec(
    name="messages",
    doc="One row per chat message of a rollout's trace, in order.",
    partition_by=_BY_MODEL_SCENARIO,
    columns=(
        _c("sweep_id", _S, "Sweep that launched the rollout."),
        _c("rollout_id", _S, "Rollout the message belongs to."),
        _c("task_id", _S, "Task id within the scenario."),
        _c("model_name", _S, "The model's name in the sweep config."),
        _c("message_index", _I32, "Position of the message in the conversation, from 0."),
        _c("role", _S, "system, user, assistant or tool."),
        _c("content", _S, "Message text; non-string content (parts lists, objects) is JSON.", nullable=True),
        _c("tool_call_id", _S, "For a tool message, the call it answers.", nullable=True),
        _c("tool_calls_json", _S, "For an assistant message, its tool calls as JSON.", nullable=True),
        _c("timestamp", _S, "When the message was recorded (ISO 8601 text, as in the trace).", nullable=True),
    ),
)

TOOL_CALLS = TableSpec(
    name="tool_calls",
    doc="One row per tool call an agent made, with the observation it got back.",
    partition_by=_BY_MODEL_SCENARIO,
    columns=(
        _c("sweep_id", _S, "Sweep that launched the rollout."),
        _c("rollout_id", _S, "Rollout the call belongs to."),
        _c("task_id", _S, "Task id within the scenario."),
        _c("model_name", _S, "The model's name in the sweep config."),
        _c("call_index", _I32, "Position of the call in the rollout, from 0."),
        _c("tool_server", _S, "Tool server the call went to."),
        _c("tool_name", _S, "Tool called."),
        _c("parameters_json", _S, "Call parameters as JSON (secrets removed)."),
        _c("observation", _S, "What the tool returned (text; non-text as JSON).", nullable=True),
        _c("is_error", _BOOL, "True when the tool reported an error."),
        _c(
            "raw_arguments",
            _S,
            "The model's argument text when it was not a JSON object; the tool was then not called.",
            nullable=True,
        ),
        _c("arguments_error", _S, "What was wrong with raw_arguments, as the model was told.", nullable=True),
    ),
)

STATE_DIFFS = TableSpec(
    name="state_diffs",
    doc="Tool-server state changes: one `tool_call` diff per mutating call, then one `full` diff per server.",
    partition_by=_BY_MODEL_SCENARIO,
    columns=(
        _c("sweep_id", _S, "Sweep that launched the rollout."),
        _c("rollout_id", _S, "Rollout the diff belongs to."),
        _c("task_id", _S, "Task id within the scenario."),
        _c("model_name", _S, "The model's name in the sweep config."),
        _c("diff_index", _I32, "Position of the diff in the rollout's list, from 0."),
        _c("tool_server", _S, "Tool server whose state changed."),
        _c("scope", _S, "`tool_call` (one call) or `full` (initial vs final state)."),
        _c("step_index", _I32, "Step of the call that caused a `tool_call` diff.", nullable=True),
        _c("tool_name", _S, "Tool of the call that caused a `tool_call` diff.", nullable=True),
        _c("summary", _S, "Human-readable summary the agent saw."),
        _c("before_json", _S, "Changed entities before, as JSON."),
        _c("after_json", _S, "Changed entities after, as JSON."),
    ),
)

SIMULATOR_CHECKS = TableSpec(
    name="simulator_checks",
    doc="One row per check that a rollout's simulator (an NPC, a simulated user) stayed on script; only rollouts in "
    "which a simulator spoke have rows. A failed check makes the rollout a `simulator_off_script` error.",
    partition_by=_BY_MODEL_SCENARIO,
    columns=(
        _c("sweep_id", _S, "Sweep that launched the rollout."),
        _c("rollout_id", _S, "Rollout checked."),
        _c("task_id", _S, "Task id within the scenario."),
        _c("model_name", _S, "The model's name in the sweep config."),
        _c("simulator", _S, "`user` (the simulated user) or `npc:<profile_id>`."),
        _c(
            "check_name",
            _S,
            "`secret_only_when_asked`, `ended_on_its_conditions`, `stayed_in_character` or "
            "`followed_its_instructions`.",
        ),
        _c("method", _S, "`deterministic` (code over the transcript) or `judge` (the judge model read it)."),
        _c("passed", _BOOL, "True when the simulator stayed on script for this check."),
        _c("detail", _S, "What went wrong, or the judge's reason; empty for a plain pass."),
    ),
)

VERIFICATIONS = TableSpec(
    name="verifications",
    doc="One row per verifier run on a rollout. Re-verification appends rows with a newer `verified_at`.",
    partition_by=_BY_MODEL_SCENARIO,
    columns=(
        _c("sweep_id", _S, "Sweep that launched the rollout."),
        _c("run_id", _S, "Evaluation-service run id."),
        _c("rollout_id", _S, "Rollout verified."),
        _c("scenario_id", _S, "Raw scenario id."),
        _c("task_id", _S, "Task id within the scenario."),
        _c("model_name", _S, "The model's name in the sweep config."),
        _c("verifier", _S, "Verifier module."),
        _c("verifier_version", _S, "Content hash of the verifier's code."),
        _c("kind", _S, "`programmatic` or `rubric`."),
        _c("success", _BOOL, "Whether the verifier passed."),
        _c(
            "is_error",
            _BOOL,
            "The verifier gave no verdict (it crashed, exited or returned garbage): a `verifier` error, not a fail. "
            "NULL in files written before the column existed (read as false).",
            nullable=True,
        ),
        _c("reward", _F64, "Verifier reward in [0, 1]."),
        _c("message", _S, "Verifier message."),
        _c("output_json", _S, "Verifier output as JSON (secrets removed)."),
        _c("verified_at", TIMESTAMP_UTC, "When the verifier ran."),
    ),
)

ROLLOUT_ATTEMPTS = TableSpec(
    name="rollout_attempts",
    doc="One row per attempt of a rollout: the attempts that ended in a retryable error and were run again, then "
    "the final one (whose outcome is the rollout's). A rollout that needed no retry has one row.",
    partition_by=_BY_MODEL_SCENARIO,
    columns=(
        _c("sweep_id", _S, "Sweep that launched the rollout."),
        _c("rollout_id", _S, "Rollout the attempt belongs to."),
        _c("task_id", _S, "Task id within the scenario."),
        _c("model_name", _S, "The model's name in the sweep config."),
        _c("attempt", _I32, "Attempt number, from 1."),
        _c("is_final", _BOOL, "True for the attempt whose outcome the rollout kept."),
        _c("status", _S, "Rollout status the attempt ended in (earlier attempts: `failed`)."),
        _c("error_class", _S, "The attempt's error class; NULL when it passed or the agent failed.", nullable=True),
        _c("termination_reason", _S, "Why the attempt stopped.", nullable=True),
        _c("message", _S, "The attempt's result message (errors: the cause).", nullable=True),
        _c("started_at", TIMESTAMP_UTC, "When the attempt started.", nullable=True),
        _c("completed_at", TIMESTAMP_UTC, "When the attempt ended.", nullable=True),
    ),
)

JUDGEMENTS = TableSpec(
    name="judgements",
    doc="One row per judge verdict on a rollout's final response, from the assessment platform. Re-judging "
    "appends rows with a newer `judged_at`; `judgements_latest` keeps the newest per rollout and judge kind.",
    partition_by=(HIVE_MODEL, HIVE_SCENARIO),
    columns=(
        ColumnSpec("sweep_id", _S, "Sweep that launched the rollout."),
        ColumnSpec("rollout_id", _S, "Rollout judged."),
        ColumnSpec("scenario_id", _S, "Raw scenario id."),
        ColumnSpec("task_id", _S, "Task id within the scenario."),
        ColumnSpec("model_name", _S, "The judged agent model's name in the sweep config."),
        ColumnSpec("judge", _S, "Judge name on the platform (unique in its space)."),
        ColumnSpec("judge_id", _S, "Judge id on the platform."),
        ColumnSpec("judge_kind", _S, "`quality` (higher is better) or `safety` (higher is MORE concerning)."),
        ColumnSpec("judge_model", _S, "The judge's backing model_name (`veritas`, `collinear_guard`, ...)."),
        ColumnSpec("score", _F64, "Judge score, 1..10 on the local platform."),
        ColumnSpec("category", _S, "Verdict category (e.g. `helpful`, `weapons`); null when none.", nullable=True),
        ColumnSpec("rationale", _S, "The judge's rationale; `[simulated]` first for the simulated judges."),
        ColumnSpec(
            "ground_truth",
            _I32,
            "Label uploaded with the row: 1 the verifiers passed, 0 failed, null not verified.",
            nullable=True,
        ),
        ColumnSpec("dataset_id", _S, "Platform dataset the row was uploaded to.", nullable=True),
        ColumnSpec("judged_at", TIMESTAMP_UTC, "When the assessment ran."),
    ),
)

SYNTHETIC_ROWS = TableSpec(
    name="synthetic_rows",
    doc="Synthetic dataset rows generated from a scenario's seed examples. Partitioned by scenario only.",
    partition_by=_BY_SCENARIO,
    columns=(
        ColumnSpec("scenario_id", _S, "Raw scenario id whose seed examples were expanded."),
        ColumnSpec("row_index", _I32, "Position of the row in the generation's answer, from 0."),
        ColumnSpec("model_id", _S, "Generator model id on the platform."),
        ColumnSpec("prompt", _S, "Instruction given to the generator."),
        ColumnSpec("original_json", _S, "The seed example the row was expanded from, as JSON."),
        ColumnSpec("generated_json", _S, "The generated row, as JSON (same keys as the example)."),
        ColumnSpec("generated_at", TIMESTAMP_UTC, "When the rows were generated."),
    ),
)

PARITY = TableSpec(
    name="parity_gradings",
    doc="One row per benchmark rollout and grading run of `eval-pipelines parity`: our verdict beside the upstream "
    "grader's on the same trace. Re-running the same grading replaces its file; `parity` (the view) keeps the "
    "latest grading per rollout.",
    partition_by=_BY_MODEL_SCENARIO,
    columns=(
        _c("sweep_id", _S, "Sweep that launched the rollout."),
        _c("rollout_id", _S, "Rollout graded."),
        _c("benchmark", _S, "Benchmark of the task (`bfcl`, `tau2`)."),
        _c("scenario_id", _S, "Raw scenario id."),
        _c("task_id", _S, "Task id within the scenario."),
        _c("model_name", _S, "The model's name in the sweep config."),
        _c("ours_success", _BOOL, "Our verdict: every latest programmatic verifier passed and the rollout completed."),
        _c("ours_reward", _F64, "Our reward (`rollout_scores.reward`)."),
        _c("upstream_success", _BOOL, "The upstream grader's verdict."),
        _c("upstream_reward", _F64, "The upstream grader's reward."),
        _c("agree", _BOOL, "True when no component (nor the overall verdict) differs."),
        _c(
            "flips",
            ColumnType.STRING_LIST,
            "Names of the components whose verdicts differ; `success` for the overall verdict.",
        ),
        _c(
            "deterministic_disagreement",
            _BOOL,
            "A flip on a component no model judges (what makes `eval-pipelines parity` exit 1).",
        ),
        _c("ours_components_json", _S, "Our verifier's per-component verdicts, as JSON."),
        _c("upstream_components_json", _S, "The upstream grader's per-component verdicts, as JSON."),
        _c("upstream_message", _S, "The upstream grader's message (its reason or error)."),
        _c("upstream_version", _S, "Version of the upstream package whose grader ran (e.g. `2026.3.23`)."),
        _c("grading_id", _S, "Identity of the grading run: the upstream version and the verdicts of ours compared."),
        _c("graded_at", TIMESTAMP_UTC, "When the upstream grader ran."),
    ),
)


TABLE_SPECS: dict[str, TableSpec] = {
    t.name: t
    for t in (
        ROLLOUTS,
        ROLLOUT_ATTEMPTS,
        TASKS,
        MESSAGES,
        TOOL_CALLS,
        STATE_DIFFS,
        SIMULATOR_CHECKS,
        VERIFICATIONS,
        JUDGEMENTS,
        SYNTHETIC_ROWS,
        PARITY,
    )
}
TABLES: dict[str, tuple[ColumnSpec, ...]] = {name: spec.columns for name, spec in TABLE_SPECS.items()}
COLUMN_DOCS: dict[str, dict[str, str]] = {name: spec.column_docs for name, spec in TABLE_SPECS.items()}


def table_spec(table_name: str) -> TableSpec:
    try:
        return TABLE_SPECS[table_name]
    except KeyError:
        raise KeyError(f"unknown warehouse table {table_name!r}; known: {sorted(TABLE_SPECS)}") from None
