"""Task generation (spec 000)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import AliasChoices, ConfigDict, Field, field_validator, model_validator

from eval_pipelines.schemas._base import StrictModel, WireModel, utc_now_iso

DEFAULT_NUM_TASKS = 10
MAX_NUM_TASKS = 200
DEFAULT_EMAIL_DOMAIN = "example.com"
DEFAULT_AGENT_EMAIL = "agent@example.com"
MAX_DESCRIPTION_CHARS = 20_000


class JobStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class AgentSpec(StrictModel):
    role: str = ""
    description: str = ""


class ScenarioSpec(StrictModel):
    name: str = ""
    role_label: str = ""
    conventions: str = ""
    policies: list[str] = Field(default_factory=list)


class SimLabItem(StrictModel):
    """A sub-object SimLab's request types as a plain dict (`categories`, `workflows`, `npcs`, `complexity`), so
    any key may come: one with no use here is kept aside and named in the job's notes (`ignored_keys`), never
    refused. The fields still validate their values."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @property
    def ignored_keys(self) -> list[str]:
        return sorted(self.model_extra or {})


def _text_of_step(step: Any) -> str:
    if isinstance(step, dict):
        for key in STEP_TEXT_KEYS:
            if isinstance(step.get(key), str) and step[key].strip():
                return str(step[key])
    return step if isinstance(step, str) else str(step)


#: Keys of a workflow step given as an object (`{"action": ..., "description": ...}`) whose text is the step.
STEP_TEXT_KEYS = ("description", "action", "step", "name", "text")


class Category(SimLabItem):
    #: either may be left out: it is then the other (`name` and `title` are read as the label).
    id: str = ""
    label: str = Field(default="", validation_alias=AliasChoices("label", "name", "title"))

    @model_validator(mode="after")
    def _id_or_label(self) -> Category:
        if not self.id.strip() and not self.label.strip():
            raise ValueError("a category needs an id or a label")
        self.id = self.id or "_".join(self.label.lower().split())
        self.label = self.label or self.id
        return self


class Workflow(SimLabItem):
    name: str = Field(validation_alias=AliasChoices("name", "title", "id"))
    #: each step's text; a step given as an object gives its `description` (or `action`, `step`, `name`, `text`),
    #: one given as a string is one step, and a workflow with no steps but a `description` has that one step.
    steps: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _steps_as_text(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        steps = data.get("steps")
        if isinstance(steps, str):
            data["steps"] = [steps]
        elif isinstance(steps, list):
            data["steps"] = [_text_of_step(step) for step in steps]
        if not data.get("steps") and isinstance(data.get("description"), str):
            data["steps"] = [data.pop("description")]
        return data


class NpcRole(SimLabItem):
    role: str = Field(validation_alias=AliasChoices("role", "title", "occupation"))
    typical_asks: list[str] | str = Field(default_factory=list)


class Workspace(StrictModel):
    email_domain: str = DEFAULT_EMAIL_DOMAIN
    agent_email: str = DEFAULT_AGENT_EMAIL


class Complexity(SimLabItem):
    easy: float = Field(default=0.3, ge=0)
    medium: float = Field(default=0.5, ge=0)
    hard: float = Field(default=0.2, ge=0)


class TaskGenRequest(StrictModel):
    toolset: list[dict[str, Any]] = Field(min_length=1)
    num_tasks: int = Field(default=DEFAULT_NUM_TASKS, ge=1, le=MAX_NUM_TASKS)
    model: str | None = None
    preset: str | None = None
    agent: AgentSpec | None = None
    scenario: ScenarioSpec | None = None
    categories: list[Category] | None = None
    workflows: list[Workflow] | None = None
    npcs: list[NpcRole] | None = None
    #: null (as the SimLab CLI sends it when a config has no [workspace]) means the defaults.
    workspace: Workspace = Field(default_factory=Workspace)
    complexity: Complexity | None = None
    diversity: dict[str, Any] | None = None
    #: the hosted product's quality filter (SimLab always sends it): false keeps the tasks no verifier passed.
    filter: bool = True
    #: free text on what to generate (SimLab's `--describe`); the LLM-driven generator reads it.
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION_CHARS)

    @field_validator("workspace", mode="before")
    @classmethod
    def _null_is_the_default(cls, value: Any) -> Any:
        return Workspace() if value is None else value

    @field_validator("toolset")
    @classmethod
    def _tools_have_names(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        flat = [flat_tool_item(tool) for tool in value]
        for index, tool in enumerate(flat):
            if not isinstance(tool.get("name"), str) or not tool["name"]:
                raise ValueError(f"toolset[{index}].name is required")
        return flat


def flat_tool_item(item: dict[str, Any]) -> dict[str, Any]:
    """A toolset item as a plain tool definition: an OpenAI function-calling item
    (`{"type": "function", "function": {"name", "description", "parameters"}}`) loses its wrapper."""
    inner = item.get("function")
    if item.get("type") == "function" and isinstance(inner, dict):
        return {**{k: v for k, v in item.items() if k not in ("type", "function")}, **inner}
    return item


class TaskGenJob(WireModel):
    job_id: str
    status: JobStatus = JobStatus.PENDING
    progress: str | None = None
    created_at: str = Field(default_factory=utc_now_iso)
    completed_at: str | None = None
    error: str | None = None


class GeneratedFile(WireModel):
    filename: str
    content: str


#: The results' NPC file: a JSON list of NPC profiles, where SimLab's task loader reads them (`npcs/`).
NPC_PROFILES_FILENAME = "profiles.json"


class TaskGenResults(WireModel):
    job_id: str
    tasks: list[GeneratedFile] = Field(default_factory=list)
    instructions: list[GeneratedFile] = Field(default_factory=list)
    rubrics: list[GeneratedFile] = Field(default_factory=list)
    verifiers: list[GeneratedFile] = Field(default_factory=list)
    skills_md: str = ""
    #: `[{filename: "profiles.json", content: <JSON list of NPC profiles>}]`, or empty: the hosted product's shape
    npcs: list[GeneratedFile] = Field(default_factory=list)
    filter_summary: dict[str, Any] | None = None


class ModelTestErrorType(StrEnum):
    AUTHENTICATION_ERROR = "authentication_error"
    CONNECTION_ERROR = "connection_error"
    TIMEOUT = "timeout"
    INVALID_MODEL = "invalid_model"
    RATE_LIMIT = "rate_limit"
    BAD_REQUEST = "bad_request"
    UNKNOWN = "unknown"


class ModelConfigTestResult(WireModel):
    success: bool
    message: str
    error_type: ModelTestErrorType | None = None


# -- filter_summary in the hosted product's keys -------------------------------------------------------------

#: The funnel a generated task goes through, in order: SimLab's `stage_stats` `check1`, `check2`, ... Each gate of
#: a verifier (`taskgen/gates.py`) is one stage; a task dropped with no verifier gated never got past the first.
FILTER_STAGES: tuple[tuple[str | None, str], ...] = (
    (None, "usable_draft"),
    ("static", "verifier_compiles"),
    ("import", "verifier_imports"),
    ("reference", "reference_run_passes"),
    ("noop", "idle_run_fails"),
)


def with_simlab_filter_keys(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """`summary` with the hosted product's keys beside ours, as SimLab's `tasks-gen run` prints them when fewer
    tasks than asked for came out: `filtered_tasks` (each dropped task: `display_name`, `checks` {stage key: 1
    passed, 0 failed}, `issues`), `stage_stats` (`check1`... {`check_key`, `filtered`, `passed`}) and `total`
    (the tasks that went into the filter). A task is filtered at the furthest gate one of its verifiers
    reached. Tasks kept by `filter: false` are not filtered."""
    if summary is None or "produced" not in summary:
        return summary
    unfiltered = set(summary.get("unfiltered_tasks") or [])
    stage_of: dict[str, int] = {}
    gates = [gate for gate, _ in FILTER_STAGES]
    for failure in summary.get("failed_verifiers") or []:
        task_id, gate = failure.get("task_id"), failure.get("gate")
        if task_id in unfiltered or gate not in gates:
            continue
        stage_of[task_id] = max(stage_of.get(task_id, 0), gates.index(gate))
    filtered = []
    for dropped in summary.get("dropped_tasks") or []:
        task_id = str(dropped.get("task_id", ""))
        stage = stage_of.get(task_id, 0)
        filtered.append(
            {
                "display_name": task_id,
                "file": f"{task_id}.json",
                "checks": {key: int(index < stage) for index, (_, key) in enumerate(FILTER_STAGES[: stage + 1])},
                "issues": [str(dropped.get("reason", ""))],
                "stage": stage,
            }
        )
    total = int(summary["produced"].get("num_tasks", 0)) + len(filtered)
    stage_stats: dict[str, dict[str, Any]] = {}
    remaining = total
    for index, (_, key) in enumerate(FILTER_STAGES):
        out = sum(1 for entry in filtered if entry["stage"] == index)
        remaining -= out
        stage_stats[f"check{index + 1}"] = {"check_key": key, "filtered": out, "passed": remaining}
    for entry in filtered:
        del entry["stage"]
    return {**summary, "filtered_tasks": filtered, "stage_stats": stage_stats, "total": total}
