"""Runs and rollouts (spec 000)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import AliasChoices, Field, model_validator

from eval_pipelines.schemas._base import StrictModel, WireModel
from eval_pipelines.schemas.agent_environment import AgentEnvironment
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.limits import MAX_ID_CHARS, MAX_NAME_CHARS
from eval_pipelines.schemas.model_config import ModelConfig, ModelConfigEcho
from eval_pipelines.schemas.verifiers import VerifierOutcome

DEFAULT_ROLLOUT_COUNT = 1
DEFAULT_LIST_LIMIT = 50
MIN_LIST_LIMIT = 1
MAX_LIST_LIMIT = 200
DEFAULT_SOURCE = "rl-gym"
#: A custom agent class named as 'module.path:ClassName'.
AGENT_PATH_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"


class RunSource(StrEnum):
    RL_GYM = "rl-gym"
    TASK_EDITOR = "task-editor"
    SYNTHETICS = "datadog-synthetics"
    ALL = "all"  # a list filter only, never a run's own source


class RolloutStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    WORKSPACE_ERROR = "workspace_error"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset({RolloutStatus.COMPLETED, RolloutStatus.FAILED, RolloutStatus.WORKSPACE_ERROR})


class RolloutPhase(StrEnum):
    BUILDING_ENVIRONMENT = "building_environment"
    SEEDING = "seeding"
    AGENT_RUNNING = "agent_running"
    VERIFYING = "verifying"
    COMPLETED = "completed"


class TerminationReason(StrEnum):
    """Why a rollout stopped. The message strings follow the hosted reference runner."""

    FINAL_RESPONSE = "final_response"
    MAX_STEPS = "max_steps"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    AGENT_ERROR = "agent_error"
    WORKSPACE_ERROR = "workspace_error"
    VERIFIER_ERROR = "verifier_error"
    INFRASTRUCTURE_ERROR = "infrastructure_error"
    SERVER_RESTART = "server_restart"
    COST_CEILING = "cost_ceiling"


class ErrorClass(StrEnum):
    """Why a rollout ended in an *error*: something other than the agent failed, so the rollout says nothing
    about the model's skill. Errors are kept out of every pass rate and shown beside it (a local extension)."""

    #: the model endpoint was unreachable, refused the key, stayed rate limited, failed (5xx), timed out, or
    #: answered with something that is not a completion.
    MODEL_ENDPOINT = "model_endpoint"
    #: a tool server could not provision, seed, answer or snapshot a workspace.
    TOOL_SERVER = "tool_server"
    #: the model playing an NPC failed, or did not reveal what its persona must reveal when asked.
    NPC_MODEL = "npc_model"
    #: the model playing the user of a multi-turn task failed: down, answered garbage, or never answered in time.
    USER_SIMULATOR = "user_simulator"
    #: a verifier crashed, returned garbage, or could not run: the verdict is missing, not negative.
    VERIFIER = "verifier"
    #: the rollout was stopped (cancel, SIGINT/SIGTERM, or the process running it died).
    CANCELLED = "cancelled"
    #: the sweep's cost ceiling kept the rollout from starting.
    BUDGET = "budget"
    #: a fault in this project's own engine.
    INTERNAL = "internal"
    #: the agent's own interpreter could not run it: a venv that would not install, a bad interpreter path, a
    #: module that does not import, a constructor that raised, or the channel to its worker broke. Deterministic,
    #: so never retried; an exception raised by the agent's `run` stays the agent's failure.
    AGENT_ENVIRONMENT = "agent_environment"
    #: a simulator (an NPC or a simulated user) went off its script: it told a secret nobody asked for, ended the
    #: conversation outside its ending conditions, or broke its instructions (`engine/simulator_checks.py`; each
    #: check in the artifacts' `simulator_checks`, labelled deterministic or judge). Its verdict would grade the
    #: simulator, not the agent. Not retried: the same script gives the same simulator the same chance to stray.
    SIMULATOR_OFF_SCRIPT = "simulator_off_script"

    @property
    def is_retryable(self) -> bool:
        """Worth running the rollout again: a passing outage, not a deterministic or deliberate stop."""
        return self in RETRYABLE_ERROR_CLASSES


RETRYABLE_ERROR_CLASSES = frozenset(
    {
        ErrorClass.MODEL_ENDPOINT,
        ErrorClass.TOOL_SERVER,
        ErrorClass.NPC_MODEL,
        ErrorClass.USER_SIMULATOR,
        ErrorClass.INTERNAL,
    }
)

#: Errors known only by their termination reason (rows written before `error_class` existed, other services).
ERROR_CLASS_OF_REASON: dict[str, ErrorClass] = {
    "cancelled": ErrorClass.CANCELLED,
    "server_restart": ErrorClass.CANCELLED,
    "cost_ceiling": ErrorClass.BUDGET,
    "workspace_error": ErrorClass.TOOL_SERVER,
    "infrastructure_error": ErrorClass.TOOL_SERVER,
    "verifier_error": ErrorClass.VERIFIER,
}

#: Error retries per rollout when a launch does not say (the sweep option `error_retries`).
DEFAULT_ERROR_RETRIES = 2
MAX_ERROR_RETRIES = 10
#: First wait before an errored rollout runs again; doubled per attempt, with jitter (`error_retry_backoff_seconds`).
DEFAULT_ERROR_RETRY_BACKOFF_SECONDS = 1.0
MAX_ERROR_RETRY_BACKOFF_SECONDS = 300.0
DEFAULT_VERIFIER_TIMEOUT_SECONDS = 30.0
MAX_VERIFIER_TIMEOUT_SECONDS = 3600.0
#: One rollout's time limit when a launch does not say (the sweep option `rollout_timeout_seconds`).
DEFAULT_ROLLOUT_TIMEOUT_SECONDS = 300.0
MAX_ROLLOUT_TIMEOUT_SECONDS = 86400.0

MSG_MAX_STEPS = "Max steps reached without final assistant response"
MSG_CANCELLED = "Cancelled"
MSG_TIMEOUT = "Rollout timeout exceeded"
MSG_AGENT_FAILED = "Agent execution failed: {error}"
MSG_SERVER_RESTART = "Service restarted while the rollout was running"
MSG_COST_CEILING = "Cost ceiling of ${ceiling:.4f} reached (${spent:.4f} spent); the rollout was not started"


class TaskOverride(StrictModel):
    task_json: dict[str, Any] | None = None
    name: str | None = None
    description: str | None = None
    rubric_markdown: str | None = None
    client_context: dict[str, Any] | None = None


class RunLaunchRequest(StrictModel):
    scenario_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    task_ids: list[Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]] = Field(min_length=1)
    model_config_: ModelConfig = Field(alias="model_config")
    rollout_count: int = Field(default=DEFAULT_ROLLOUT_COUNT, ge=1)
    max_parallel: int | None = Field(default=None, ge=1)
    run_name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_CHARS)
    user_model_config: ModelConfig | None = None
    #: local extension: the judge model that reads what the run's NPCs and simulated users said against their
    #: instructions (`engine/simulator_judge.py`); None: only the deterministic simulator checks.
    simulator_judge_config: ModelConfig | None = None
    task_overrides: dict[str, TaskOverride] = Field(default_factory=dict)
    source: RunSource = RunSource.RL_GYM
    #: local extension: stop starting rollouts once the run's estimated cost reaches this (USD).
    max_cost_usd: float | None = Field(default=None, gt=0)
    #: local extension: a custom agent as 'module.path:ClassName'; omitted from requests when unset.
    agent: str | None = Field(default=None, pattern=AGENT_PATH_PATTERN)
    #: local extension: the interpreter `agent` runs in, as a worker process of its own; omitted when unset.
    agent_environment: AgentEnvironment | None = None
    #: local extension: how many times a rollout that ends in a retryable *error* (never a failure) runs again;
    #: None (omitted from requests) means DEFAULT_ERROR_RETRIES.
    error_retries: int | None = Field(default=None, ge=0, le=MAX_ERROR_RETRIES)
    #: local extension: the first wait before such a retry, doubled per attempt, with jitter; None: the default.
    error_retry_backoff_seconds: float | None = Field(default=None, ge=0, le=MAX_ERROR_RETRY_BACKOFF_SECONDS)
    #: local extension: how long one verifier may run on one rollout before it costs a `verifier` error.
    verifier_timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_VERIFIER_TIMEOUT_SECONDS)
    #: local extension: one rollout's time limit; None means the service's own (DEFAULT_ROLLOUT_TIMEOUT_SECONDS).
    rollout_timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_ROLLOUT_TIMEOUT_SECONDS)

    @model_validator(mode="after")
    def _check_overrides_and_source(self) -> RunLaunchRequest:
        unknown = sorted(set(self.task_overrides) - set(self.task_ids))
        if unknown:
            raise ValueError(f"task_overrides keys must be among task_ids; unknown: {unknown}")
        if self.source == RunSource.ALL:
            raise ValueError("source 'all' is a list filter, not a run source")
        if len(set(self.task_ids)) != len(self.task_ids):
            raise ValueError("task_ids must not repeat; use rollout_count for repeated rollouts")
        if self.agent_environment is not None and self.agent is None:
            raise ValueError("agent_environment needs an agent: the class to run in it ('module.path:ClassName')")
        return self


class Run(WireModel):
    """RunStatusResponse."""

    run_id: str
    scenario_id: str
    source: str = DEFAULT_SOURCE
    run_name: str | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    in_progress: int = 0
    pending: int = 0
    running: int = 0
    #: local extension: finished rollouts that ended in an error (see `ErrorClass`), counted among `failed`.
    errors: int = 0
    rollout_ids: list[str] = Field(default_factory=list)
    created_at: str | None = None

    @property
    def is_finished(self) -> bool:
        return self.pending == 0 and self.running == 0


class RolloutLaunchItem(WireModel):
    rollout_id: str
    scenario_id: str
    task_id: str
    run_id: str
    status: RolloutStatus = RolloutStatus.PENDING


class RunLaunchResponse(WireModel):
    run_id: str
    run_status: Run
    rollouts: list[RolloutLaunchItem]


class RunList(WireModel):
    total: int
    runs: list[Run]


class CancelRunResponse(WireModel):
    run_id: str
    cancelled_rollouts: int


class DeleteRunResponse(WireModel):
    run_id: str
    deleted_rollouts: int


class StatusEvent(WireModel):
    """`status` is a rollout status or `phase:<phase>`; the hosted product adds `detail`."""

    status: str
    timestamp: str
    detail: str | None = None


class TokenUsage(WireModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    #: None when any call's model has no known price: a partial sum would read as the whole cost.
    cost_usd: float | None = 0.0
    llm_calls: int = 0

    def add(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cost_usd=None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd,
            llm_calls=self.llm_calls + other.llm_calls,
        )


class AttemptError(WireModel):
    """An attempt of a rollout that ended in a retryable error and was run again (a local extension)."""

    attempt: int
    error_class: ErrorClass
    message: str = ""
    termination_reason: str | None = None
    started_at: str | None = None
    completed_at: str | None = None


class RolloutResult(WireModel):
    success: bool = False
    message: str = ""
    reward: float = 0.0
    partial_credit: float = 0.0
    steps_taken: int = 0
    duration_seconds: float = 0.0
    #: None (unknown) when a model the rollout called has no known price; never 0.0 for unknown.
    estimated_cost_usd: float | None = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    verifiers: list[VerifierOutcome] = Field(default_factory=list)
    termination_reason: str | None = None
    #: local extension: set when the rollout ended in an error (not the agent's failure); see `ErrorClass`.
    error_class: ErrorClass | None = None
    #: local extension: attempts made, the final one included; earlier ones ended in retryable errors.
    attempts: int = 1
    attempt_errors: list[AttemptError] = Field(default_factory=list)


def error_class_of(status: str, termination_reason: str | None, result: RolloutResult | None) -> ErrorClass | None:
    """The error class of a finished rollout: what the engine recorded, else what its termination reason implies
    (rollouts failed by the store, rows from before the field existed). None for a pass or an agent's failure."""
    if result is not None and result.error_class is not None:
        return result.error_class
    if status == RolloutStatus.WORKSPACE_ERROR.value:
        return ErrorClass.TOOL_SERVER
    reason = termination_reason or (result.termination_reason if result is not None else None)
    return ERROR_CLASS_OF_REASON.get(reason or "")


class Rollout(WireModel):
    rollout_id: str
    scenario_id: str
    task_id: str
    run_id: str
    rollout_index: int = 0
    status: RolloutStatus
    phase: RolloutPhase | None = None
    current_step: int | None = None
    max_steps: int = 30
    created_at: str | None = None
    started_at: str | None = None
    completed_at: str | None = None
    result: RolloutResult | None = None
    termination_reason: str | None = None
    model_config_: ModelConfigEcho | None = Field(
        default=None,
        alias="model_config",
        validation_alias=AliasChoices("model_config", "model_config_data"),
    )
    status_events: list[StatusEvent] = Field(default_factory=list)


class RolloutList(WireModel):
    total: int
    rollouts: list[Rollout]


class ArtifactsResponse(WireModel):
    rollout_id: str
    artifacts: RunArtifacts
