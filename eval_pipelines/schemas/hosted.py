"""The hosted product's shapes where its clients read more than the spec text names (the SimLab CLI).

One home for those names: the verifier package path SimLab imports (`collinear.scenarios.<family>.verifiers`),
the verifier entries of its task files (`{"func": "python_module", "module": ...}`), the keys its task loader
reads (`meta.task_id`, `task`, `apps`, `npcs`), the seed lists of its task listing (`seed_emails`,
`seed_calendar_events`) and where its tool listings put a tool's schema (`input_schema`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from eval_pipelines.schemas._base import StrictModel, WireModel

#: Top-level package of a verifier bundle: SimLab imports `collinear.scenarios.<family>.verifiers.<module>`.
VERIFIER_PACKAGE_ROOT = "collinear"
VERIFIER_ENTRY_FUNC = "python_module"
_IDENTIFIER_UNSAFE = re.compile(r"\W")
#: SimLab tool-server and app names -> the built-in server that plays the same part.
SIMLAB_SERVER_NAMES: dict[str, str] = {
    "email": "email",
    "email-env": "email",
    "calendar": "calendar",
    "calendar-env": "calendar",
    "chronos-server": "calendar",
    "rocketchat": "chat",
    "rocketchat-env": "chat",
    "chat": "chat",
    "coding": "files",
    "coding-env": "files",
    "files": "files",
    "records": "records",
    # the namespace SimLab gives its NPC chat (`npc_send_message`, `npc_list_contacts`), which the chat server has
    "npc-chat": "chat",
}
#: SimLab's namespace of its NPC chat tool server, started for a task whose `npcs` have a chat personality.
SIMLAB_NPC_CHAT_SERVER = "npc-chat"
#: SimLab's apps (its catalog's toolsets, `src/simlab/catalog/tools/<name>.yaml`) -> the names a task file may
#: give one: the catalog name, its display name, its compose service and the names SimLab's own examples give the
#: server (the cookbook's email agent reaches SEC EDGAR through an MCP server it calls `edgar-mcp`).
SIMLAB_APPS: dict[str, tuple[str, ...]] = {
    "email": ("email", "email-env", "email (mailhog)"),
    "calendar": ("calendar", "calendar-env", "calendar (baikal)", "chronos-server"),
    "rocketchat": ("rocketchat", "rocketchat-env", "rocket.chat", "chat"),
    "coding": ("coding", "coding-env", "coding environment", "files"),
    "erp": ("erp", "erp-env"),
    "crm": ("crm", "crm-env"),
    "sec-edgar": ("sec-edgar", "sec-edgar-env", "sec edgar", "edgar-mcp"),
    "twelve-data": ("twelve-data", "twelve-data-env", "twelve data"),
    "frappe-hrms": ("frappe-hrms", "frappe-hrms-env", "frappe hrms"),
    "frappe-helpdesk": ("frappe-helpdesk", "frappe-helpdesk-env", "frappe helpdesk"),
    "google-workspace": ("google-workspace", "google-workspace-env", "google workspace"),
    "playwright": ("playwright", "playwright-env", "playwright browser", "playwright-mcp-server"),
    "project-management": ("project-management", "project-management-env", "project management"),
    "web-search": ("web-search", "web-search-env", "web search", "web search (parallel)"),
}
_APP_BY_ALIAS = {alias: app for app, aliases in SIMLAB_APPS.items() for alias in aliases}
#: The key of SimLab's MCP server file (`--mcp-servers mcp-servers.json`): {name: {command, args, env} | {url}}.
SIMLAB_MCP_SERVERS_KEY = "mcpServers"
#: The package SimLab's own verifier modules live in (`simlab.verifiers.<name>`).
SIMLAB_VERIFIER_PACKAGE = "simlab.verifiers"


def simlab_app(name: object) -> str | None:
    """The SimLab app (catalog name) a task's `apps` entry or server name stands for; None when unknown."""
    return _APP_BY_ALIAS.get(str(name).strip().lower()) if name else None


class NamedToolServer(StrictModel):
    """A server the user provides for a SimLab bundle's server or app (`eval-pipelines import --servers FILE`):
    `url` of a spec 001 HTTP tool server (`transport: mcp` for a streamable-HTTP MCP server), or `command` +
    `args` + `env` of a stdio MCP server. `apps` names the SimLab apps it plays besides its own name's."""

    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    transport: Literal["http", "mcp"] | None = None
    apps: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_way_in(self) -> NamedToolServer:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of 'url' or 'command'")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        if self.command is not None and self.transport == "http":
            raise ValueError("a command server speaks MCP over stdio; transport 'http' needs a url")
        if self.command is None and (self.args or self.env):
            raise ValueError("args and env apply to a command server only")
        return self

    @property
    def is_mcp(self) -> bool:
        return self.command is not None or self.transport == "mcp"


#: The path under a workspace URL that answers `/step` in the hosted product's observation shape.
HOSTED_STEP_PREFIX = "hosted"
#: Where the hosted product's tool listings (and SimLab's environment, which reads them) put a tool's JSON schema;
#: spec 001 names it `parameters`.
HOSTED_TOOL_SCHEMA_KEY = "input_schema"
_HOSTED_MODULE = re.compile(r"^[A-Za-z_]\w*\.scenarios\.(?P<package>\w+)\.verifiers\.(?P<module>\w+)$")


def hosted_tool(definition: dict[str, Any]) -> dict[str, Any]:
    """A tool of a spec-001 listing (`{name, description, parameters}`) as the hosted product lists it: the schema
    also under `input_schema`, where SimLab's environment reads it (it sees an empty schema otherwise)."""
    return {**definition, HOSTED_TOOL_SCHEMA_KEY: definition.get("parameters") or {"type": "object"}}


def family_id(scenario_id: str) -> str:
    """`email_ops:1.0.0` -> `email_ops`: the id the hosted product names a scenario's newest version by."""
    return scenario_id.strip().partition(":")[0]


def scenario_package(scenario_id: str) -> str:
    """The `<family>` folder of a verifier bundle: the family id as a Python identifier (`9lives` -> `_9lives`).

    SimLab derives the scenario to fetch from this folder, so it is the family id whenever that is an identifier.
    """
    name = _IDENTIFIER_UNSAFE.sub("_", family_id(scenario_id))
    if not name:
        raise ValueError("scenario_id must not be empty")
    return f"_{name}" if name[0].isdigit() else name


def verifier_module_path(scenario_id: str, module: str) -> str:
    """The dotted path SimLab imports a verifier module by."""
    return f"{VERIFIER_PACKAGE_ROOT}.scenarios.{scenario_package(scenario_id)}.verifiers.{module}"


def verifier_entry(scenario_id: str, module: str) -> dict[str, str]:
    """A verifier as a SimLab task file lists it."""
    return {"func": VERIFIER_ENTRY_FUNC, "module": verifier_module_path(scenario_id, module)}


def verifier_module_name(entry: Any) -> Any:
    """The module name inside a scenario's `verifiers/` of a task's verifier entry: a bare name, a SimLab entry
    (`{"func": "python_module", "module": "collinear.scenarios.x.verifiers.name"}`) or a dotted path. Anything
    else is returned as it is, for the caller's validation to name."""
    if isinstance(entry, dict) and entry.get("func", VERIFIER_ENTRY_FUNC) == VERIFIER_ENTRY_FUNC:
        entry = entry.get("module")
    if isinstance(entry, str):
        match = _HOSTED_MODULE.match(entry.strip())
        return match.group("module") if match else entry
    return entry


class TaskMeta(WireModel):
    """`meta` of a SimLab task file: its loader finds a task by `meta.task_id`."""

    task_id: str
    display_name: str
    difficulty: str
    category: str


class SeedEmail(WireModel):
    """An email SimLab's `tasks seed` sends into the mailbox before a run."""

    from_profile_id: str
    to_addr: str
    subject: str
    body_text: str = ""


class SeedCalendarEvent(WireModel):
    """A calendar event SimLab's `tasks seed` creates before a run."""

    account: str
    calendar_id: str = "default"
    summary: str
    description: str = ""
    start: str
    end: str
    attendees: list[str] = Field(default_factory=list)
