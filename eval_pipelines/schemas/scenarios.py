"""Templates (scenarios), tasks, rubrics, NPC profiles and seed data (spec 000), plus the fields a local
scenario carries for execution (reference actions, seed bindings, verifier modules)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from eval_pipelines.schemas._base import WireModel
from eval_pipelines.schemas.hosted import verifier_module_name
from eval_pipelines.schemas.tools import ToolCall

SCENARIO_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)?$")


class TemplateToolServer(WireModel):
    name: str
    server_type: str = "http"


class Template(WireModel):
    scenario_id: str
    name: str
    description: str = ""
    num_tasks: int = 0
    num_npcs: int = 0
    tool_servers: list[TemplateToolServer] = Field(default_factory=list)

    @field_validator("scenario_id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not SCENARIO_ID_PATTERN.match(value):
            raise ValueError("scenario_id must look like 'family' or 'family:version' ([A-Za-z0-9_.-])")
        return value


class TaskToolServer(WireModel):
    name: str
    #: where the server answers; the local service fills in its own tool host's URL for a built-in server
    tool_server_url: str = ""


class ScoringLevel(WireModel):
    label: str
    description: str


class Rubric(WireModel):
    task_id: str
    title: str
    overview: str = ""
    success_criteria: list[str] = Field(default_factory=list)
    testing_requirements: list[str] = Field(default_factory=list)
    quality_criteria: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    scoring: list[ScoringLevel] = Field(default_factory=list)


class NpcProfile(WireModel):
    profile_id: str
    first_name: str
    last_name: str
    email: str
    occupation: str = ""
    public_info: str | None = None


class SeedDataFile(WireModel):
    scenario_id: str
    filename: str
    content: str


class Task(WireModel):
    """A task as the service lists it. `description` is the instruction given to the agent."""

    task_id: str
    name: str
    version: str = "1.0.0"
    category: str = "general"
    difficulty: str = "medium"
    visibility: str = "public"
    description: str
    tool_servers: list[TaskToolServer] = Field(default_factory=list)
    rubric: Rubric | None = None
    npc_profiles: list[NpcProfile] = Field(default_factory=list)
    #: seed file names (inside the scenario's seed_data/) per tool server name.
    seed_data: dict[str, list[str]] = Field(default_factory=dict)
    #: verifier module names inside the scenario's verifiers/ package; a SimLab entry
    #: (`{"func": "python_module", "module": "collinear.scenarios.<family>.verifiers.<name>"}`) names `<name>`.
    verifiers: list[str] = Field(default_factory=list)
    #: the tool calls a competent agent makes, in order; drives `sim-oracle` and task-generation gates.
    reference_actions: list[ToolCall] = Field(default_factory=list)
    reference_answer: str = ""
    #: task-specific NPC secrets, keyed by profile_id (never listed in the public NPC listing).
    npc_secrets: dict[str, Any] = Field(default_factory=dict)
    #: MCP servers the agent also gets: {name, url} or {name, command, args, env, secrets} (spec 001 naming rules).
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)

    #: built-in server -> the name a SimLab bundle gave it (`email` -> `email-env`). When set, the task's
    #: verifiers are SimLab's and see SimLab's view of the artifacts (`verifiers/simlab_view.py`).
    simlab_servers: dict[str, str] = Field(default_factory=dict)

    @field_validator("verifiers", mode="before")
    @classmethod
    def _module_names(cls, value: Any) -> Any:
        return [verifier_module_name(entry) for entry in value] if isinstance(value, list) else value
