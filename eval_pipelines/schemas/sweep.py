"""Sweep configuration files (`sweeps/<name>.yaml` of a project): which scenarios, which models, how many rollouts."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from eval_pipelines.schemas._base import StrictModel
from eval_pipelines.schemas.agent_environment import AgentEnvironment
from eval_pipelines.schemas.judging import DEFAULT_JUDGE_MIN_KAPPA
from eval_pipelines.schemas.limits import MAX_MODEL_CONCURRENCY
from eval_pipelines.schemas.model_config import (
    DEFAULT_CONTEXT_STRIDE,
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_TOOL_CALLS_PER_REPLY,
    DEFAULT_SUMMARIZE_EVERY_N_TURNS,
    DEFAULT_TEMPERATURE,
    MAX_REQUEST_TIMEOUT_SECONDS,
    MAX_TEMPERATURE,
    MAX_TOOL_CALLS_PER_REPLY,
    MIN_TEMPERATURE,
    Provider,
)
from eval_pipelines.schemas.runs import (
    AGENT_PATH_PATTERN,
    DEFAULT_ERROR_RETRIES,
    DEFAULT_ERROR_RETRY_BACKOFF_SECONDS,
    DEFAULT_ROLLOUT_TIMEOUT_SECONDS,
    DEFAULT_VERIFIER_TIMEOUT_SECONDS,
    MAX_ERROR_RETRIES,
    MAX_ERROR_RETRY_BACKOFF_SECONDS,
    MAX_ROLLOUT_TIMEOUT_SECONDS,
    MAX_VERIFIER_TIMEOUT_SECONDS,
)

SIMULATED_BASE_URL = "sim://local"
#: Every simulated model's name starts with this, so no table or report can mistake one for a real model.
SIMULATED_PREFIX = "sim-"
#: The simulated model that plays a task's user offline (served beside the simulated agents).
SIMULATED_USER_MODEL = "sim-user"


def is_simulated_model(name: str) -> bool:
    return name.strip().startswith(SIMULATED_PREFIX)


NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+$")
#: The cron macros the scheduler accepts, and whether each fires more than once a day.
CRON_MACROS_MORE_THAN_DAILY = {
    "@hourly": True,
    "@daily": False,
    "@midnight": False,
    "@weekly": False,
    "@monthly": False,
    "@yearly": False,
    "@annually": False,
}
#: Share of errored rollouts in one model x scenario above which a sweep is reported broken (`error_threshold`).
DEFAULT_ERROR_THRESHOLD = 0.2
#: The difference between two models' pass rates a sweep should be able to detect, 10 points
#: (`detectable_difference`): the comparisons and the noise floor say how many epochs it takes.
DEFAULT_DETECTABLE_DIFFERENCE = 0.10
#: Share of a model x scenario's planned rollouts that must have a score (passed or failed) for the sweep's
#: numbers to be published (`min_coverage`); errors, rollouts never run and unverified ones are not scored.
DEFAULT_MIN_COVERAGE = 0.8


class ModelCallLimits(StrictModel):
    """How a model is called, whatever role it plays. None keeps each caller's default. A slow local server
    (one request at a time) wants `max_concurrency: 1` and a timeout above one answer's time, not above the
    whole queue's: a call waiting for a free slot has no clock running, the timeout bounds each HTTP attempt."""

    request_timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        le=MAX_REQUEST_TIMEOUT_SECONDS,
        description="timeout of one HTTP attempt of a chat-completion call to this model, whether it acts as agent, "
        "judge or NPC; default: 120 s as an agent, 60 s as a judge, 20 s as an NPC",
    )
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        le=MAX_MODEL_CONCURRENCY,
        description="calls in flight to this model at once; the others wait for a slot; default: 8 as a judge, "
        "the run's max_parallel as an agent or NPC",
    )


class SweepModel(ModelCallLimits):
    """A model in a sweep. The key is never in the file: `api_key_env` names the variable that holds it.
    `base_url: sim://local` selects the project's simulated models (offline, labelled simulated). A `provider:
    custom` endpoint that takes no key (a local vLLM, Ollama or llama.cpp server) leaves `api_key_env` out, and its
    requests carry no Authorization header."""

    name: str = Field(min_length=1, description="the model's name in partitions and tables")
    model: str = Field(min_length=1)
    provider: Provider = Provider.CUSTOM
    base_url: str | None = None
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="the environment variable holding the key, read at run time (a named variable that is unset "
        "stops the sweep); required for a hosted provider, optional for `provider: custom` (a keyless local "
        "endpoint: no Authorization header is sent)",
    )
    temperature: float = Field(default=DEFAULT_TEMPERATURE, ge=MIN_TEMPERATURE, le=MAX_TEMPERATURE)
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1)
    system_prompt: str | None = None
    summarize_every_n_turns: int = Field(default=DEFAULT_SUMMARIZE_EVERY_N_TURNS, ge=0)
    context_stride: int = Field(default=DEFAULT_CONTEXT_STRIDE, ge=1)
    log_prob: bool = False
    agent: str | None = Field(
        default=None,
        pattern=AGENT_PATH_PATTERN,
        description="a custom agent as 'module.path:ClassName' (a BaseAgent subclass); default: the reference agent",
    )
    agent_environment: AgentEnvironment | None = Field(
        default=None,
        description="run `agent` (a SimLab agent) in an interpreter of its own: {python: ...}, {venv: ...} or "
        "{requirements: [...], pip_flags: [...]}, with optional paths; it reaches the model through a loopback "
        "proxy and never sees the key",
    )
    user_model: str | None = Field(
        default=None, description="name of another model of this sweep that plays the NPCs (simulated users)"
    )
    max_tool_calls_per_reply: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOOL_CALLS_PER_REPLY,
        description=f"tool calls of one model reply the reference agent runs (default "
        f"{DEFAULT_MAX_TOOL_CALLS_PER_REPLY}); each call past it is answered 'not run' and the rollout records that "
        "the cap was hit",
    )

    @property
    def is_simulated(self) -> bool:
        return self.base_url == SIMULATED_BASE_URL

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not NAME_PATTERN.match(value):
            raise ValueError("model name may only contain letters, digits, '_', '.' and '-'")
        return value

    @model_validator(mode="after")
    def _where_to_reach(self) -> SweepModel:
        if self.provider == Provider.CUSTOM and not self.base_url:
            raise ValueError("base_url is required when provider is 'custom'")
        if self.provider != Provider.CUSTOM and not self.api_key_env:
            raise ValueError(
                f"api_key_env is required for provider {self.provider.value!r} (only a `provider: custom` endpoint, "
                "such as a local vLLM, Ollama or llama.cpp server, may take no key)"
            )
        if self.agent_environment is not None and self.agent is None:
            raise ValueError("agent_environment needs an agent: the class to run in it ('module.path:ClassName')")
        return self


class SweepScenario(StrictModel):
    """A scenario entry with a choice of its tasks (`{id: tau2_airline, split: test, limit: 20}`); a plain string
    entry is the whole scenario."""

    id: str = Field(min_length=1)
    tasks: list[str] | None = Field(default=None, min_length=1, description="these tasks only, in this order")
    split: str | None = Field(default=None, min_length=1, description="the tasks of this upstream split")
    limit: int | None = Field(default=None, ge=1, description="at most this many of the chosen tasks, first first")


class SweepConfig(StrictModel):
    name: str = Field(min_length=1)
    description: str = ""
    scenarios: list[str | SweepScenario] = Field(
        min_length=1,
        description="scenario ids, `*` for every scenario but the benchmarks (which must be named), or entries "
        "choosing tasks: `{id, tasks, split, limit}`",
    )
    models: list[SweepModel] = Field(min_length=1)
    rollout_count: int = Field(default=3, ge=1)
    max_parallel: int = Field(default=8, ge=1)
    rollout_timeout_seconds: float = Field(
        default=DEFAULT_ROLLOUT_TIMEOUT_SECONDS, gt=0, le=MAX_ROLLOUT_TIMEOUT_SECONDS
    )
    task_ids: list[str] | None = Field(default=None, description="default: every task of each scenario")
    cron: str | None = Field(default=None, description="schedule for this sweep; none means manual only")
    user_model: SweepModel | None = Field(
        default=None,
        description="the model that plays the simulated users (τ²-bench's customers) and NPCs of every model's "
        "rollouts, unless a model names its own `user_model`; default: `sim-user` when every model of the sweep "
        "is simulated, else a task with a simulated user makes the sweep refuse to start",
    )
    rubric_judge: SweepModel | None = Field(
        default=None,
        description="a model that also judges every rollout against its task's rubric (judge validity); "
        "its verdicts are compared with the verifiers, never counted in pass rates",
    )
    simulator_judge: SweepModel | None = Field(
        default=None,
        description="a model that reads what every NPC and simulated user said against its instructions; a reply "
        "that contradicts them makes the rollout a simulator_off_script error (a check labelled judge, apart from "
        "the deterministic ones, which always run)",
    )
    platform_judges: ModelCallLimits | None = Field(
        default=None,
        description="how the assessment platform calls its quality and safety judge models for this sweep's "
        "judgements (the models themselves are the platform's); default: the platform's own, 60 s and 8 at once",
    )
    max_cost_usd: float | None = Field(default=None, gt=0)
    baseline_model: str | None = Field(
        default=None,
        min_length=1,
        description="the name of one of `models`: every other model is compared with it, paired by task and epoch "
        "(CLI table, report, viewer); default: every pair of models",
    )
    detectable_difference: float = Field(
        default=DEFAULT_DETECTABLE_DIFFERENCE,
        gt=0,
        le=1,
        description="the difference in pass rate the sweep should be able to detect (0.10 = 10 points): the CLI's "
        "comparison table says how many epochs (`rollout_count`) that needs",
    )
    servers: dict[str, str] = Field(
        default_factory=dict,
        description="server name -> URL for the servers tasks reach by URL (an imported SimLab bundle's `erp-env`, "
        "an MCP server given by url): the URL replaces the one the task records, for this sweep's runs only",
    )
    error_retries: int = Field(
        default=DEFAULT_ERROR_RETRIES,
        ge=0,
        le=MAX_ERROR_RETRIES,
        description="how many times a rollout that ends in an error (endpoint, tool server, NPC model) runs again; "
        "a failure by the agent is never retried",
    )
    error_retry_backoff_seconds: float = Field(
        default=DEFAULT_ERROR_RETRY_BACKOFF_SECONDS,
        ge=0,
        le=MAX_ERROR_RETRY_BACKOFF_SECONDS,
        description="first wait before such a retry; doubled per attempt, with jitter",
    )
    verifier_timeout_seconds: float = Field(
        default=DEFAULT_VERIFIER_TIMEOUT_SECONDS,
        gt=0,
        le=MAX_VERIFIER_TIMEOUT_SECONDS,
        description="how long one verifier may run on one rollout; past it the verdict is a `verifier` error",
    )
    error_threshold: float = Field(
        default=DEFAULT_ERROR_THRESHOLD,
        ge=0,
        le=1,
        description="share of errored rollouts in a model x scenario above which the sweep exits non-zero and the "
        "verification asset check fails; also the `error_share` gate of the catalog and the report",
    )
    min_coverage: float = Field(
        default=DEFAULT_MIN_COVERAGE,
        ge=0,
        le=1,
        description="gate `coverage`: the share of each model x scenario's planned rollouts (tasks x rollout_count) "
        "that must be scored (passed or failed) before the catalog and the report publish the sweep",
    )
    min_judge_kappa: float = Field(
        default=DEFAULT_JUDGE_MIN_KAPPA,
        ge=-1,
        le=1,
        description="gate `judge_agreement`: when the report shows judge scores, each judge's Cohen's kappa "
        "against the verifiers (per scenario, the judge_calibration view) must be at least this",
    )

    @field_validator("servers")
    @classmethod
    def _server_urls(cls, value: dict[str, str]) -> dict[str, str]:
        for name, url in value.items():
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"servers.{name}: the URL must start with http:// or https://")
        return value

    @field_validator("cron")
    @classmethod
    def _five_field_cron(cls, value: str | None) -> str | None:
        # Checked here so a malformed cron is a config error naming the field, not a code location that fails
        # to load; the fields' own syntax is the scheduler's to check.
        if value is not None and value not in CRON_MACROS_MORE_THAN_DAILY and len(value.split()) != 5:
            raise ValueError(
                "cron must have five fields (minute hour day-of-month month day-of-week), e.g. '0 2 * * *', or be "
                f"one of {sorted(CRON_MACROS_MORE_THAN_DAILY)}"
            )
        return value

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not NAME_PATTERN.match(value):
            raise ValueError("sweep name may only contain letters, digits, '_', '.' and '-'")
        return value

    @field_validator("models")
    @classmethod
    def _unique_models_and_known_user_models(cls, models: list[SweepModel]) -> list[SweepModel]:
        names = [m.name for m in models]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"model names must be unique; repeated: {duplicates}")
        for index, model in enumerate(models):
            if model.user_model is not None and model.user_model not in names:
                raise ValueError(f"models[{index}].user_model: no model named {model.user_model!r} in this sweep")
        return models

    @model_validator(mode="after")
    def _known_baseline(self) -> SweepConfig:
        names = [m.name for m in self.models]
        if self.baseline_model is not None and self.baseline_model not in names:
            raise ValueError(f"baseline_model: no model named {self.baseline_model!r} in this sweep ({names})")
        return self

    @property
    def scenario_ids(self) -> list[str]:
        """The scenario ids the sweep names, in order (`*` included as itself)."""
        return [entry if isinstance(entry, str) else entry.id for entry in self.scenarios]

    def scenario_entry(self, scenario_id: str, aliases: tuple[str, ...] = ()) -> SweepScenario | None:
        """The entry choosing tasks of `scenario_id` (or one of its `aliases`: family id, partition key), if any."""
        names = {scenario_id, *aliases}
        return next((e for e in self.scenarios if isinstance(e, SweepScenario) and e.id in names), None)
