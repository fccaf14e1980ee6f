"""Runs and rollouts (spec 000)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import AliasChoices, Field, model_validator

from eval_pipelines.schemas._base import StrictModel, WireModel
from eval_pipelines.schemas.artifacts import RunArtifacts
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
    scenario_id: str = Field(min_length=1)
    task_ids: list[str] = Field(min_length=1)
    model_config_: ModelConfig = Field(alias="model_config")
    rollout_count: int = Field(default=DEFAULT_ROLLOUT_COUNT, ge=1)
    max_parallel: int | None = Field(default=None, ge=1)
    run_name: str | None = Field(default=None, min_length=1)
    user_model_config: ModelConfig | None = None
    task_overrides: dict[str, TaskOverride] = Field(default_factory=dict)
    source: RunSource = RunSource.RL_GYM
    #: local extension: stop starting rollouts once the run's estimated cost reaches this (USD).
    max_cost_usd: float | None = Field(default=None, gt=0)
    #: local extension: a custom agent as 'module.path:ClassName'; omitted from requests when unset.
    agent: str | None = Field(default=None, pattern=AGENT_PATH_PATTERN)

    @model_validator(mode="after")
    def _check_overrides_and_source(self) -> RunLaunchRequest:
        unknown = sorted(set(self.task_overrides) - set(self.task_ids))
        if unknown:
            raise ValueError(f"task_overrides keys must be among task_ids; unknown: {unknown}")
        if self.source == RunSource.ALL:
            raise ValueError("source 'all' is a list filter, not a run source")
        if len(set(self.task_ids)) != len(self.task_ids):
            raise ValueError("task_ids must not repeat; use rollout_count for repeated rollouts")
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
    cost_usd: float = 0.0
    llm_calls: int = 0

    def add(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            llm_calls=self.llm_calls + other.llm_calls,
        )


class RolloutResult(WireModel):
    success: bool = False
    message: str = ""
    reward: float = 0.0
    partial_credit: float = 0.0
    steps_taken: int = 0
    duration_seconds: float = 0.0
    estimated_cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    verifiers: list[VerifierOutcome] = Field(default_factory=list)
    termination_reason: str | None = None


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
