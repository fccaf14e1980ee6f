"""Response envelopes of spec 000 (task listings, NPC and seed-data listings, errors) and the local service's
extensions (resume, health), shared by the service and its client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, Field

from eval_pipelines.schemas._base import WireModel
from eval_pipelines.schemas.hosted import SeedCalendarEvent, SeedEmail, verifier_module_path
from eval_pipelines.schemas.runs import Run
from eval_pipelines.schemas.scenarios import NpcProfile, ScoringLevel, Task, TaskToolServer


class ErrorDetail(WireModel):
    """FastAPI's error body."""

    detail: str


class TaskRubric(WireModel):
    """The rubric inside a task listing: spec 000 lists only these fields there."""

    task_id: str
    title: str
    overview: str = ""
    success_criteria: list[str] = Field(default_factory=list)
    scoring: list[ScoringLevel] = Field(default_factory=list)


class TaskNpcProfile(WireModel):
    """An NPC inside a task listing: no `public_info` (that is in the NPC list only), never a secret."""

    profile_id: str
    first_name: str
    last_name: str
    email: str
    occupation: str = ""
    #: the NPC's chat handle (`NpcProfile.username`) under SimLab's name: its `tasks seed` makes the NPC's
    #: rocketchat user by it (the profile id when empty)
    rocketchat_username: str = Field(default="", validation_alias=AliasChoices("rocketchat_username", "username"))


class PublicTask(WireModel):
    """A task as the service lists it to callers, who may be the agents under test.

    The execution-only fields of `schemas.Task` (reference actions and answer, NPC secrets) are absent by
    construction: a field that is not declared here cannot leak. Verifiers appear by import path only.
    """

    task_id: str
    name: str
    version: str = "1.0.0"
    category: str = "general"
    difficulty: str = "medium"
    visibility: str = "public"
    description: str
    tool_servers: list[TaskToolServer] = Field(default_factory=list)
    rubric: TaskRubric | None = None
    npc_profiles: list[TaskNpcProfile] = Field(default_factory=list)
    #: seed file names (inside the scenario's seed data) per tool server name.
    seed_data: dict[str, list[str]] = Field(default_factory=dict)
    #: the hosted product's fields, which the SimLab CLI reads: the verifiers' import paths (names, no code)
    #: and the task's seed mail and calendar events (`tasks seed`).
    verifier_modules: list[str] = Field(default_factory=list)
    seed_emails: list[SeedEmail] = Field(default_factory=list)
    seed_calendar_events: list[SeedCalendarEvent] = Field(default_factory=list)

    @classmethod
    def of(
        cls,
        task: Task,
        *,
        scenario_id: str | None = None,
        seed_emails: list[SeedEmail] | None = None,
        seed_calendar_events: list[SeedCalendarEvent] | None = None,
        tool_server_urls: Mapping[str, str] | None = None,
    ) -> PublicTask:
        public = cls.model_validate(task.model_dump(include=set(cls.model_fields)))
        for server in public.tool_servers:
            server.tool_server_url = (tool_server_urls or {}).get(server.name, server.tool_server_url)
        if scenario_id is not None:
            public.verifier_modules = [verifier_module_path(scenario_id, module) for module in task.verifiers]
        public.seed_emails = list(seed_emails or [])
        public.seed_calendar_events = list(seed_calendar_events or [])
        return public


class ScenarioTasks(WireModel):
    scenario_id: str
    tasks: list[PublicTask]


class ScenarioNpcs(WireModel):
    scenario_id: str
    npc_profiles: list[NpcProfile]


class SeedDataList(WireModel):
    scenario_id: str
    files: list[str]


class ResumeRunResponse(WireModel):
    """`POST /runs/{run_id}/resume` (a local extension of spec 000)."""

    run_id: str
    #: rollouts put back to pending by this call.
    requeued_rollouts: int
    #: whether the service is executing the run after this call.
    active: bool
    run_status: Run


class AuthVerification(WireModel):
    """`GET /auth/verify`: the key is known (an unknown one gets 401), and what it may do."""

    valid: bool = True
    #: `read` (GET only) or `write`.
    permission: str


class HealthResponse(WireModel):
    status: str = "healthy"
    draining: bool = False
    active_runs: int = 0


# -- SimLab's CLI telemetry (`POST /telemetry/cli-events`, the hosted product's path; outside spec 000) -----------

#: A telemetry body over this is refused (413): one event with its properties is far smaller.
MAX_CLI_EVENT_BYTES = 64 << 10
#: Properties of one event at most (SimLab sends about a dozen); more is refused (422).
MAX_CLI_EVENT_PROPERTIES = 64
MAX_CLI_EVENT_NAME_CHARS = 128
#: Nesting of a property value at most (SimLab's are flat).
MAX_CLI_EVENT_DEPTH = 8
#: The event `simlab feedback` sends; the only one kept (the others are accepted and dropped).
FEEDBACK_EVENT = "feedback_submitted"
#: The feedback log is rotated once it would grow past this (one older generation is kept).
MAX_FEEDBACK_LOG_BYTES = 8 << 20
#: A property of the feedback event that is kept beside the message, at most this many characters each.
FEEDBACK_CONTEXT_KEYS = ("env_name", "simlab_version", "command", "python_version", "platform_system")
MAX_FEEDBACK_CONTEXT_CHARS = 200


class CliEvent(WireModel):
    """One event of SimLab's CLI: `{"event", "properties"}`."""

    event: str = Field(min_length=1, max_length=MAX_CLI_EVENT_NAME_CHARS)
    properties: dict[str, Any] = Field(default_factory=dict, max_length=MAX_CLI_EVENT_PROPERTIES)


class CliEventAccepted(WireModel):
    """The answer to an event; SimLab reads none of it."""

    status: str = "accepted"
    #: whether the service kept the event (feedback) or dropped it (every other event).
    stored: bool = False


class FeedbackRecord(WireModel):
    """One line of the service's feedback log: the message (credentials redacted) and where it came from; never
    the caller's key or its install and session ids."""

    received_at: str
    message: str
    context: dict[str, str] = Field(default_factory=dict)
