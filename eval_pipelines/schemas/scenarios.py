"""Templates (scenarios), tasks, rubrics, NPC profiles and seed data (spec 000), plus the fields a local
scenario carries for execution (reference actions, seed bindings, verifier modules)."""

from __future__ import annotations

import hashlib
import json
import re
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from eval_pipelines.schemas._base import StrictModel, WireModel
from eval_pipelines.schemas.hosted import verifier_module_name
from eval_pipelines.schemas.limits import DEFAULT_USER_MAX_TURNS, MAX_PLAIN_NAME_CHARS, MAX_USER_TURNS
from eval_pipelines.schemas.tools import ToolCall, ToolDefinition

#: An id that names a file or folder (tasks/<task_id>.json, verifiers/<module>.py, a scenario's folder): no
#: separator, no NUL, and no leading dot, so it can be neither `..` nor a hidden file.
_PLAIN_NAME = rf"[A-Za-z0-9_][A-Za-z0-9_.-]{{0,{MAX_PLAIN_NAME_CHARS - 1}}}"
PLAIN_NAME_PATTERN = re.compile(_PLAIN_NAME)
PLAIN_NAME_RULE = (
    f"must be letters, digits, '_', '.' or '-', not start with '.' or '-', and be at most {MAX_PLAIN_NAME_CHARS} "
    "characters long"
)
#: `family` or `family:version`, each part a plain name; `partition_key` turns the `:` into `_` for folder names.
SCENARIO_ID_PATTERN = re.compile(rf"{_PLAIN_NAME}(:{_PLAIN_NAME})?")
#: How much of a refused id an error message shows.
_SHOWN_CHARS = 80


def is_plain_name(value: object) -> bool:
    return isinstance(value, str) and PLAIN_NAME_PATTERN.fullmatch(value) is not None


def plain_name_error(value: object) -> str:
    """Why `value` is not a plain name, showing a bounded part of it (an id may be megabytes long)."""
    shown = value[:_SHOWN_CHARS] if isinstance(value, str) else value
    return f"{shown!r} {PLAIN_NAME_RULE}"


def _plain_name(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str) and not is_plain_name(value):
        raise ValueError(f"{info.field_name} {plain_name_error(value)}")
    return value


class TemplateToolServer(WireModel):
    name: str
    server_type: str = "http"


#: A template or task listed only to a caller who asks for hidden ones (`include_hidden=true`).
HIDDEN_VISIBILITY = "hidden"
#: The hosted product lists test tasks only to a caller who asks for them (`include_test=true`); the SimLab CLI
#: compares the category this way (`_is_test_task`).
TEST_CATEGORY = "test"
#: A scenario folder's guidance for the agent, as markdown (when its template.json has no scenario_guidance_md).
SCENARIO_GUIDANCE_FILE = "guidance.md"
#: Guidance longer than this is not served: SimLab appends it to every instruction of the scenario.
MAX_SCENARIO_GUIDANCE_CHARS = 64_000


def is_test_category(category: str | None) -> bool:
    return (category or "").strip().lower() == TEST_CATEGORY


class Template(WireModel):
    scenario_id: str
    name: str
    description: str = ""
    num_tasks: int = 0
    num_npcs: int = 0
    tool_servers: list[TemplateToolServer] = Field(default_factory=list)
    #: the hosted product's scenario guidance: markdown SimLab's `env init` copies into env.yaml and its `tasks run`
    #: appends to every instruction. None: the folder's guidance.md, if any, is served.
    scenario_guidance_md: str | None = Field(default=None, max_length=MAX_SCENARIO_GUIDANCE_CHARS)
    visibility: str = "public"

    @field_validator("scenario_id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not SCENARIO_ID_PATTERN.fullmatch(value) or len(value) > MAX_PLAIN_NAME_CHARS:
            raise ValueError(
                f"scenario_id must look like 'family' or 'family:version', where each part {PLAIN_NAME_RULE}"
            )
        return value


#: A scenario's folder of simulated tool servers: `servers/<name>.json`, one `SimulatedServer` each.
SIMULATED_SERVERS_DIR = "servers"
#: Key of a generated task file holding its simulated servers ({name: {"tools": [...]}}), as `seed_files` holds
#: its seeds; a scenario folder keeps them in `servers/`.
SIMULATED_SERVERS_KEY = "simulated_servers"
#: How a tool host names a simulated server it serves: this prefix and a digest of its definition.
SIMULATED_HOST_PREFIX = "sim-"


class SimulatedServer(StrictModel):
    """A tool server known only by its tools' schemas (a user's own toolset): the tool host serves a stand-in
    simulated from them, stateful and deterministic, so its tasks replay and verify like a built-in server's."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$", max_length=MAX_PLAIN_NAME_CHARS)
    tools: list[ToolDefinition] = Field(min_length=1)

    @cached_property
    def host_name(self) -> str:
        """The name a tool host serves it under: the same definition is the same server, wherever it is read."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return SIMULATED_HOST_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()[:32]


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
    #: the NPC's chat handle (SimLab's `rocketchat_username`); the agent may address the NPC by it.
    username: str = ""

    _profile_id_shape = field_validator("profile_id")(_plain_name)


class NpcPersonality(StrictModel):
    """How an NPC behaves in one task's conversations (SimLab's NPC chat personality). It travels with the NPC
    in a chat seed file's `npcs[]` item (`personality`), stays in the chat server's state, and is written into the
    prompt of the model that plays the NPC."""

    #: the part the NPC plays in the task (`frustrated_customer`), beside its occupation
    role: str = ""
    traits: str = ""
    #: the NPC's situation: what it knows and wants in this task
    context: str = ""
    #: how it writes (`short sentences, no greetings`)
    quirks: str = ""


class SeedDataFile(WireModel):
    scenario_id: str
    filename: str
    content: str


class ScriptedUserSpec(WireModel):
    """A user who says fixed lines, one per turn (BFCL multi-turn)."""

    kind: Literal["scripted"] = "scripted"
    #: user messages, one per turn; turn 0 is the task's `description`, so the instruction stays the first message.
    #: A turn whose text is None or "" only unlocks tools (BFCL miss_func) and says `unlock_message` instead.
    turns: list[str | None]
    #: turn index (as a string: JSON keys) -> tool names that become visible at that turn (hidden before it).
    unlocks: dict[str, list[str]] = Field(default_factory=dict)
    unlock_message: str = ""

    @field_validator("turns")
    @classmethod
    def _some_turn(cls, value: list[str | None]) -> list[str | None]:
        if not value:
            raise ValueError("turns must hold at least one user message")
        return value

    @field_validator("unlocks")
    @classmethod
    def _turn_keys(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for key in value:
            if not key.isdigit():
                raise ValueError(f"unlocks keys must be turn indexes such as '1', not {key[:_SHOWN_CHARS]!r}")
        return value

    def unlocked_at(self, turn: int) -> list[str]:
        return list(self.unlocks.get(str(turn), []))

    def hidden_before(self) -> set[str]:
        """Every tool some turn after the first unlocks: hidden until its turn."""
        return {name for key, names in self.unlocks.items() if int(key) > 0 for name in names}


class SimulatedUserSpec(WireModel):
    """A user played by a model from a persona and instructions (τ²-bench)."""

    kind: Literal["simulated"] = "simulated"
    #: the simulator's whole system prompt (guidelines + scenario), assembled by whoever made the task.
    system_prompt: str
    #: tokens the user says to end the conversation; the one said is recorded as `user_ending`.
    stop_tokens: list[str] = Field(default_factory=list)
    #: the agent's fixed first message, said before the user opens (τ²: "Hi! How can I help you today?").
    agent_greeting: str | None = None
    #: user messages at most, the opening included.
    max_turns: int = Field(default=DEFAULT_USER_MAX_TURNS, ge=1, le=MAX_USER_TURNS)
    #: what the simulated user persona (offline) says first; also the key the sim-oracle finds the task by.
    opening: str = ""


UserSpec = Annotated[ScriptedUserSpec | SimulatedUserSpec, Field(discriminator="kind")]


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
    #: HTTP tool servers (spec 001 protocol: GET /tools, POST /step) the agent also gets, by name -> URL. They are
    #: used as they are, never provisioned, seeded or snapshotted: a rollout records no state diff for them.
    http_servers: dict[str, str] = Field(default_factory=dict)
    #: why the task cannot run here (a server or app nobody provides, a verifier with no file, nothing grades it);
    #: None: it runs. Sweeps leave such a task out and say so: it is never counted as a failure.
    unrunnable_reason: str | None = None
    #: what a SimLab bundle said of the task, kept so the scenario can be served back under the bundle's own
    #: names: `meta`, `apps`, `tool_servers` (name, tool_server_url) and `text_key` (`task` or `instruction`).
    simlab_origin: dict[str, Any] = Field(default_factory=dict)

    #: built-in server -> the name a SimLab bundle gave it (`email` -> `email-env`). When set, the task's
    #: verifiers are SimLab's and see SimLab's view of the artifacts (`verifiers/simlab_view.py`).
    simlab_servers: dict[str, str] = Field(default_factory=dict)
    #: whether a rollout that used up `max_steps` without a final answer may still pass on its verifiers. Off by
    #: default: an agent that never stops (the same email sent four times) has not done the task, whatever the
    #: final state looks like.
    pass_at_max_steps: bool = False

    #: the user the agent talks with over several turns; None: one instruction, one turn (the default).
    user: UserSpec | None = None
    #: the agent's system prompt for this task (τ²: the domain policy); "" sends none; None keeps the agent's own.
    system_prompt: str | None = None
    #: the model sees each tool by its own name (`cd`), not the server-prefixed one (`bfcl__cd`); names must then
    #: be unique across the task's servers.
    bare_tool_names: bool = False
    #: steps at most inside one user turn (BFCL: 20); reaching it ends the rollout as `max_steps` does.
    max_steps_per_turn: int | None = Field(default=None, ge=1)
    #: the reference calls per user turn: the sim-oracle's plan on a multi-turn task (`reference_actions` stays
    #: their flat concatenation, which gates and single-turn code read).
    reference_turns: list[list[ToolCall]] = Field(default_factory=list)
    #: which benchmark adapter materialised the task ("bfcl", "tau2"), for parity and the authors' metrics.
    benchmark: str | None = None

    @field_validator("verifiers", mode="before")
    @classmethod
    def _module_names(cls, value: Any) -> Any:
        return [verifier_module_name(entry) for entry in value] if isinstance(value, list) else value

    _task_id_shape = field_validator("task_id")(_plain_name)

    @field_validator("http_servers")
    @classmethod
    def _http_urls(cls, value: dict[str, str]) -> dict[str, str]:
        for name, url in value.items():
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"http_servers.{name}: the URL must start with http:// or https://")
        return value

    @field_validator("verifiers")
    @classmethod
    def _module_files(cls, value: list[str]) -> list[str]:
        # each name becomes verifiers/<name>.py
        for index, name in enumerate(value):
            if not is_plain_name(name):
                raise ValueError(f"verifiers[{index}] {plain_name_error(name)}")
        return value
