"""The toolset of a request: tool definitions normalised, sorted into tool servers, and bound to the built-in
server that implements them (when one does), plus reading a running server's `/tools` listing.

Tool kinds come from `mutates_state` when the definition carries it, otherwise from the verb the tool's name
starts with (`search_events` reads, `update_event` writes). Parameters named `id`, `uid`, `*_id` or `*_uid`
refer to an item; their stem (`event_id` -> `event`) names the collection the item lives in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

import httpx
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

from eval_pipelines.schemas.taskgen import flat_tool_item
from eval_pipelines.schemas.tools import ToolDefinition
from eval_pipelines.taskgen.errors import TaskGenRequestError
from eval_pipelines.toolservers.base import BuiltinToolServer
from eval_pipelines.toolservers.registry import BUILTIN_SERVERS

#: The server name used for tools that name none and match no built-in server.
EXTERNAL_SERVER = "tools"
#: Keys a tool definition may use to name its tool server.
SERVER_HINT_KEYS = ("tool_server", "server")
DEFAULT_FETCH_TIMEOUT_SECONDS = 10.0
#: keys of a SimLab config's `[[toolset]]` entry describing a service rather than one tool.
SERVICE_ENTRY_KEYS = ("operations", "service_name", "service_url")
#: a word of a service entry's name (or service name, or description) -> the built-in server standing in.
SERVICE_STAND_INS = {
    "email": "email",
    "mail": "email",
    "inbox": "email",
    "calendar": "calendar",
    "chronos": "calendar",
    "chat": "chat",
    "rocketchat": "chat",
    "slack": "chat",
    "helpdesk": "records",
    "ticketing": "records",
    "tickets": "records",
    "hris": "records",
    "hrms": "records",
    "crm": "records",
    "records": "records",
    "coding": "files",
    "files": "files",
    "filesystem": "files",
}

READ_VERBS = frozenset(
    [
        "get",
        "read",
        "fetch",
        "show",
        "describe",
        "view",
        "list",
        "search",
        "find",
        "query",
        "lookup",
        "look",
        "count",
        "check",
        "browse",
        "retrieve",
    ]
)
DELETE_VERBS = frozenset(["delete", "remove", "cancel", "trash", "purge", "destroy", "erase", "drop"])
UPDATE_VERBS = frozenset(
    ["update", "edit", "modify", "set", "change", "rename", "move", "assign", "patch", "reschedule", "mark"]
)
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_ID_SUFFIXES = ("_uid", "_id", "uid", "id", "Uid", "Id")
PREPOSITIONS = frozenset(["to", "on", "for", "from", "in", "into", "with", "at", "of"])


def name_words(name: str) -> list[str]:
    """`update_event` -> ["update", "event"]; camelCase is split too."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def id_stem(param: str) -> str | None:
    """The referenced collection's stem of an id parameter (`event_id` -> `event`), `""` for a bare `id`,
    None when the parameter is not an id."""
    lowered = param.lower()
    if lowered in ("id", "uid"):
        return ""
    for suffix in _ID_SUFFIXES:
        if param.endswith(suffix) and len(param) > len(suffix):
            stem = param[: -len(suffix)].rstrip("_")
            return stem.lower() if stem else None
    return None


def singular(noun: str) -> str:
    if noun.endswith(("ss", "us", "is")):
        return noun  # status, analysis: singular already
    if noun.endswith("ies") and len(noun) > 3:
        return noun[:-3] + "y"
    if noun.endswith(("ses", "xes", "ches", "shes")):
        return noun[:-2]
    if noun.endswith("s") and not noun.endswith("ss"):
        return noun[:-1]
    return noun


@dataclass(frozen=True)
class ToolInfo:
    server: str
    name: str
    description: str
    schema: dict[str, Any]
    mutates: bool
    #: its position in the request's toolset, for errors naming it.
    index: int = 0

    @property
    def properties(self) -> dict[str, dict[str, Any]]:
        props = self.schema.get("properties") or {}
        return {k: v if isinstance(v, dict) else {} for k, v in props.items()}

    @property
    def required(self) -> list[str]:
        return [r for r in self.schema.get("required") or [] if isinstance(r, str)]

    @property
    def words(self) -> list[str]:
        return name_words(self.name) or [self.name]

    @property
    def verb(self) -> str:
        return self.words[0]

    @property
    def object_words(self) -> list[str]:
        return [w for w in self.words[1:] if w not in PREPOSITIONS] or [self.words[-1]]

    @property
    def kind(self) -> str:
        """`read`, `delete`, `update` or `create` (anything else that writes)."""
        if not self.mutates:
            return "read"
        if self.verb in DELETE_VERBS:
            return "delete"
        if self.verb in UPDATE_VERBS:
            return "update"
        return "create"

    @property
    def id_params(self) -> list[str]:
        return [p for p in self.properties if id_stem(p) is not None]

    def as_definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.schema}


@dataclass
class ServerTools:
    """The tools of one tool server, and the built-in implementation when there is one."""

    name: str
    tools: list[ToolInfo]
    builtin: type[BuiltinToolServer] | None = None

    @cached_property
    def by_name(self) -> dict[str, ToolInfo]:
        return {t.name: t for t in self.tools}


@dataclass
class Toolset:
    servers: dict[str, ServerTools] = field(default_factory=dict)
    #: what binding the tools decided that the user should know (a built-in tool's schema that differs).
    notes: list[str] = field(default_factory=list)

    @property
    def tools(self) -> list[ToolInfo]:
        return [tool for server in self.servers.values() for tool in server.tools]

    def tool(self, server: str, name: str) -> ToolInfo | None:
        found = self.servers.get(server)
        return found.by_name.get(name) if found else None

    @property
    def builtin_servers(self) -> list[str]:
        return [name for name, s in self.servers.items() if s.builtin is not None]

    @property
    def external_servers(self) -> list[str]:
        return [name for name, s in self.servers.items() if s.builtin is None]


def _infer_mutates(definition: ToolDefinition, annotations: Mapping[str, Any]) -> bool:
    if definition.mutates_state is not None:
        return bool(definition.mutates_state)
    if isinstance(annotations.get("readOnlyHint"), bool):
        return not annotations["readOnlyHint"]
    words = name_words(definition.name)
    return not (words and words[0] in READ_VERBS)


def _builtin_tools(builtin: Mapping[str, type[BuiltinToolServer]]) -> dict[str, dict[str, ToolDefinition]]:
    return {name: {t.name: t for t in cls().tools()} for name, cls in builtin.items()}


def _json_type(schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    return tuple(sorted(kind)) if isinstance(kind, list) else kind


def schema_difference(tool: ToolInfo, builtin: ToolDefinition) -> str | None:
    """Why a built-in tool of the same name cannot serve `tool` (None when it can): the user's schema is the
    authority, so the built-in must require exactly what the user's requires and know every parameter the
    user's names, with the same type and every value its enum allows."""
    theirs = builtin.parameters.get("properties") or {}
    required = sorted(builtin.parameters.get("required") or [])
    if sorted(tool.required) != required:
        return f"it requires {sorted(tool.required)}, the built-in {required}"
    for name, schema in tool.properties.items():
        other = theirs.get(name)
        if not isinstance(other, dict):
            return f"the built-in has no parameter {name!r}"
        if "type" in schema and "type" in other and _json_type(schema) != _json_type(other):
            return f"parameter {name!r} is {schema['type']!r}, the built-in's {other['type']!r}"
        wanted, allowed = schema.get("enum"), other.get("enum")
        if isinstance(wanted, list) and isinstance(allowed, list) and not all(v in allowed for v in wanted):
            return f"parameter {name!r} allows {wanted}, the built-in {allowed}"
        if isinstance(allowed, list) and not isinstance(wanted, list) and "const" not in schema:
            return f"parameter {name!r} takes any value, the built-in only {allowed}"
    return None


def _read(index: int, raw: Mapping[str, Any]) -> tuple[str | None, ToolInfo]:
    """(the server it names, the tool) of one toolset item; TaskGenRequestError naming its field."""
    if not isinstance(raw, Mapping):
        raise TaskGenRequestError(f"toolset[{index}]", "must be a tool definition object")
    item = flat_tool_item(dict(raw))
    try:
        definition = ToolDefinition.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise TaskGenRequestError(f"toolset[{index}].{loc}".rstrip("."), first["msg"]) from None
    if not isinstance(definition.parameters, dict):
        raise TaskGenRequestError(f"toolset[{index}].inputSchema", "must be a JSON Schema object")
    try:
        Draft202012Validator.check_schema(definition.parameters)
    except SchemaError as exc:
        # Every call is checked against this schema: a broken one would fail the job half-way instead.
        where = "".join(f".{part}" for part in exc.absolute_path)
        raise TaskGenRequestError(
            f"toolset[{index}].inputSchema{where}", f"tool {definition.name!r}: not a valid JSON Schema: {exc.message}"
        ) from None
    hint = next((item[k] for k in SERVER_HINT_KEYS if isinstance(item.get(k), str) and item.get(k)), None)
    if hint is not None and not _SERVER_NAME.match(hint):
        raise TaskGenRequestError(f"toolset[{index}].tool_server", f"{hint!r} must match [A-Za-z0-9_-]+")
    annotations = item.get("annotations")
    return hint, tool_info(
        hint or EXTERNAL_SERVER, definition, index, annotations if isinstance(annotations, dict) else {}
    )


def _bind_unnamed(
    unnamed: list[ToolInfo], known: Mapping[str, Mapping[str, ToolDefinition]], notes: list[str]
) -> dict[str, list[ToolInfo]]:
    """An unnamed listing is one server's: a built-in one only if built-in servers serve every tool with the
    user's own schema; otherwise a server of its own (`tools`), which task generation simulates."""
    names = {t.name for t in unnamed}
    scores = {server: len(names & set(tools)) for server, tools in known.items()}
    choices: dict[str, str] = {}
    for tool in unnamed:
        fitting = []
        for server, tools in known.items():
            if tool.name not in tools:
                continue
            difference = schema_difference(tool, tools[tool.name])
            if difference is None:
                fitting.append(server)
            else:
                notes.append(
                    f"{tool.name}: not served by the built-in {server!r} server, whose schema differs ({difference}); "
                    "it is simulated from your schema"
                )
        if fitting:
            choices[tool.name] = max(fitting, key=lambda s: (scores[s], s))
    if len(choices) < len(unnamed):
        return {EXTERNAL_SERVER: [replace(t, server=EXTERNAL_SERVER) for t in unnamed]}
    grouped: dict[str, list[ToolInfo]] = {}
    for tool in unnamed:
        server = choices[tool.name]
        grouped.setdefault(server, []).append(replace(tool, server=server))
    return grouped


def _check_builtin_name(server: str, tools: list[ToolInfo], known: Mapping[str, ToolDefinition]) -> None:
    """A server named like a built-in one is that server: every tool must be one of its tools, as it is."""
    for tool in tools:
        field = f"toolset[{tool.index}]"
        if tool.name not in known:
            raise TaskGenRequestError(
                f"{field}.tool_server",
                f"{server!r} is a built-in tool server with no tool {tool.name!r}; name your server otherwise",
            )
        difference = schema_difference(tool, known[tool.name])
        if difference is not None:
            raise TaskGenRequestError(
                f"{field}.inputSchema",
                f"{tool.name!r} is not the built-in {server!r} server's tool ({difference}); "
                "name your server otherwise (tool_server) or leave it out",
            )


def is_service_entry(item: Mapping[str, Any]) -> bool:
    """A SimLab config's `[[toolset]]` entry naming a service and its operations, not a tool: no schema."""
    has_schema = any(key in item for key in ("inputSchema", "input_schema", "parameters", "function"))
    return not has_schema and any(key in item for key in SERVICE_ENTRY_KEYS)


def _stand_in(item: Mapping[str, Any], registry: Mapping[str, Any]) -> str | None:
    for key in ("name", "service_name", "description"):
        for word in name_words(str(item.get(key) or "")):
            server = SERVICE_STAND_INS.get(word)
            if server in registry:
                return server
    return None


def _stand_ins(
    services: list[tuple[int, Mapping[str, Any]]], known: Mapping[str, Mapping[str, ToolDefinition]], notes: list[str]
) -> dict[str, list[ToolInfo]]:
    """The built-in servers standing in for services named without tool schemas (`HRIS`, `Email`): their
    tools, with their own schemas, since the entry gives none to honour."""
    servers: dict[str, list[ToolInfo]] = {}
    for index, item in services:
        label = str(item.get("name") or item.get("service_name") or f"toolset[{index}]")
        server = _stand_in(item, known)
        if server is None:
            notes.append(f"{label}: a service named without tool schemas, like no built-in server; left out")
            continue
        tools = [tool_info(server, tool, index, {}) for tool in known[server].values()]
        note = f"{label}: a service named without tool schemas; its tasks use the built-in {server!r} server"
        operations = [str(op) for op in item.get("operations") or []]
        if operations:
            # SimLab's generator reads them as a hint of what the service does; the built-in server's tools
            # say it exactly (a reading-only subset of a built-in server gives no task: nothing to ask about).
            note += f" with all its tools (operations {operations[:20]} are not used to choose them)"
        if item.get("service_url"):
            note += f"; service_url {str(item['service_url'])[:200]!r} is SimLab's own container, not contacted"
        notes.append(note)
        if server in servers:
            known_names = {tool.name for tool in servers[server]}
            servers[server] += [tool for tool in tools if tool.name not in known_names]
        else:
            servers[server] = tools
    return servers


def normalise_toolset(
    raw: Sequence[Mapping[str, Any]], builtin: Mapping[str, type[BuiltinToolServer]] | None = None
) -> Toolset:
    """Group tool definitions by server. A tool names its server with `tool_server`/`server`; a server named
    like a built-in one must hold that server's tools with their schemas. Unnamed tools join the built-in
    server implementing them (the one implementing most of them when several do) if built-in servers serve
    every unnamed tool with the user's own schema (`schema_difference`); otherwise they are all one server of
    the user's, `tools`. Accepts `inputSchema`, `input_schema` and `parameters`, and OpenAI function items.
    A SimLab config's service entries (`{name, description, operations}`, no schema) are stood in for by the
    built-in server their name says (`SERVICE_STAND_INS`), or left out, with a note either way."""
    registry = dict(BUILTIN_SERVERS if builtin is None else builtin)
    known = _builtin_tools(registry)
    hinted: dict[str, list[ToolInfo]] = {}
    unnamed: list[ToolInfo] = []
    toolset = Toolset()
    services = [(index, item) for index, item in enumerate(raw) if is_service_entry(item)]
    for server, tools in _stand_ins(services, known, toolset.notes).items():
        hinted[server] = tools
    for index, item in enumerate(raw):
        if is_service_entry(item):
            continue
        hint, info = _read(index, item)
        if hint is None:
            unnamed.append(info)
        else:
            hinted.setdefault(hint, []).append(info)
    if not hinted and not unnamed:
        raise TaskGenRequestError("toolset", "no tool to generate tasks with: " + "; ".join(toolset.notes))
    for server, tools in hinted.items():
        if server in known:
            _check_builtin_name(server, tools, known[server])
    if unnamed:
        for server, tools in _bind_unnamed(unnamed, known, toolset.notes).items():
            hinted.setdefault(server, []).extend(tools)
    for server, tools in hinted.items():
        seen: set[str] = set()
        for tool in tools:
            if tool.name in seen:
                raise TaskGenRequestError("toolset", f"tool {tool.name!r} of server {server!r} is listed twice")
            seen.add(tool.name)
        toolset.servers[server] = ServerTools(name=server, tools=tools, builtin=registry.get(server))
    return toolset


def tool_info(server: str, definition: ToolDefinition, index: int, annotations: Mapping[str, Any]) -> ToolInfo:
    schema = dict(definition.parameters)
    schema.setdefault("type", "object")
    return ToolInfo(
        server=server,
        name=definition.name,
        description=definition.description,
        schema=schema,
        mutates=_infer_mutates(definition, annotations),
        index=index,
    )


def _server_name_from_url(url: str) -> str | None:
    # Only a built-in server's mount name counts: a path such as `/workspaces/ws-1` names no server.
    last = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    return last if last in BUILTIN_SERVERS else None


def _listing(body: Any, url: str) -> list[dict[str, Any]]:
    tools = body.get("tools") if isinstance(body, dict) else body
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise ValueError(f"{url}/tools did not return a tool listing ({{'tools': [...]}} or a list)")
    return tools


def _as_toolset_items(tools: list[dict[str, Any]], server_name: str | None) -> list[dict[str, Any]]:
    items = []
    for tool in tools:
        definition = ToolDefinition.model_validate(tool)
        item: dict[str, Any] = definition.as_task_gen_tool()
        if definition.mutates_state is not None:
            item["mutates_state"] = definition.mutates_state
        if server_name:
            item["tool_server"] = server_name
        items.append(item)
    return items


async def afetch_toolset(
    url: str, *, server_name: str | None = None, timeout_seconds: float = DEFAULT_FETCH_TIMEOUT_SECONDS
) -> list[dict[str, Any]]:
    """The `/tools` listing of a running tool server as task-generation toolset items (`inputSchema`).

    Each item is tagged with `tool_server`: `server_name`, else the URL's last path segment when it is a
    built-in server's mount name (`http://host/calendar` -> `calendar`), else untagged (then built-in servers
    are matched by tool names).
    """
    base = url.rstrip("/")
    async with httpx.AsyncClient(timeout=timeout_seconds) as client:
        response = await client.get(f"{base}/tools")
        response.raise_for_status()
        body = response.json()
    return _as_toolset_items(_listing(body, base), server_name or _server_name_from_url(base))


def toolset_from_server(
    url: str, *, server_name: str | None = None, timeout_seconds: float = DEFAULT_FETCH_TIMEOUT_SECONDS
) -> list[dict[str, Any]]:
    """Synchronous `afetch_toolset`, for the CLI and other code without an event loop."""
    base = url.rstrip("/")
    with httpx.Client(timeout=timeout_seconds) as client:
        response = client.get(f"{base}/tools")
        response.raise_for_status()
        body = response.json()
    return _as_toolset_items(_listing(body, base), server_name or _server_name_from_url(base))
