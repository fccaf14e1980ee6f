"""Naming rules of spec 001 for what an environment adds to the built-in tool servers, and scoped secrets.

- An MCP server name matches `^[A-Za-z0-9_-]+$` and stays distinct from the other MCP servers after
  normalisation (upper-case, each run of non-alphanumerics becomes `_`), because the normalised form names
  its scoped secret variables: `MY-SRV` and `my_srv` would read the same variables.
- An MCP server name collides neither with a built-in tool server name nor with a custom tool name.
- A custom tool name does not shadow a built-in tool name and is unique within its environment.
- A command (stdio) server's secret `KEY` is looked up as `<PREFIX>_MCP_<NORMALISED_SERVER>__<KEY>`, then
  as the raw `KEY` (only when exactly one server of the environment declares it), then its default.

Every violation is a ValueError whose message names the offending name. Secret values never appear in one.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from functools import cache

from eval_pipelines.toolservers.registry import BUILTIN_SERVERS

MCP_SERVER_NAME_PATTERN = r"^[A-Za-z0-9_-]+$"
DEFAULT_SECRET_PREFIX = "EVAL"

_MCP_SERVER_NAME_RE = re.compile(MCP_SERVER_NAME_PATTERN)
_NON_ALPHANUMERIC_RUN_RE = re.compile(r"[^A-Z0-9]+")
_ENV_VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def normalise_name(name: str) -> str:
    """`my-server.v2` -> `MY_SERVER_V2`: the form used in scoped secret variables and collision checks."""
    return _NON_ALPHANUMERIC_RUN_RE.sub("_", name.upper())


def validate_mcp_server_name(name: str) -> str:
    if not isinstance(name, str) or not _MCP_SERVER_NAME_RE.fullmatch(name):
        raise ValueError(
            f"MCP server name {name!r} is invalid: use only letters, digits, '_' and '-' (at least one character)"
        )
    return name


def validate_secret_key(key: str, what: str = "secret key") -> str:
    """A secret key becomes an environment variable name, so it must be one."""
    if not isinstance(key, str) or not _ENV_VAR_NAME_RE.fullmatch(key):
        raise ValueError(
            f"{what} {key!r} is invalid: it must be an environment variable name (letters, digits, '_', "
            "not starting with a digit)"
        )
    return key


def validate_secret_prefix(prefix: str) -> str:
    return validate_secret_key(prefix, what="secret prefix")


def validate_mcp_server_names(
    names: Iterable[str],
    *,
    builtin_server_names: Collection[str] = (),
    custom_tool_names: Collection[str] = (),
    other_server_names: Collection[str] = (),
) -> list[str]:
    """Check a whole environment's MCP server names; return them in order.

    `other_server_names` are the environment's other tool servers (for example its HTTP servers): they share
    the namespace the agent sees (`<server>__<tool>`), so an MCP server may not reuse one.
    """
    checked: list[str] = []
    seen: dict[str, str] = {}
    reserved = [
        *((n, "a built-in tool server name") for n in builtin_server_names),
        *((n, "a custom tool name") for n in custom_tool_names),
        *((n, "another tool server of this environment") for n in other_server_names),
    ]
    reserved_by_normalised = {normalise_name(n): (n, what) for n, what in reserved}
    for name in names:
        validate_mcp_server_name(name)
        normalised = normalise_name(name)
        if normalised in seen:
            previous = seen[normalised]
            if previous == name:
                raise ValueError(f"MCP server name {name!r} is used more than once")
            raise ValueError(
                f"MCP server names {previous!r} and {name!r} are the same after normalisation ({normalised!r})"
            )
        if normalised in reserved_by_normalised:
            other, what = reserved_by_normalised[normalised]
            same = "" if other == name else f" ({other!r} after normalisation)"
            raise ValueError(f"MCP server name {name!r} collides with {what}{same}")
        seen[normalised] = name
        checked.append(name)
    return checked


def validate_custom_tool_names(names: Iterable[str], *, builtin_tool_names: Collection[str] = ()) -> list[str]:
    """Custom tools must not shadow a built-in tool and must be unique; return them in order."""
    builtin = set(builtin_tool_names)
    checked: list[str] = []
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"custom tool name {name!r} is invalid: it must be a non-empty string")
        if name in builtin:
            raise ValueError(f"custom tool name {name!r} shadows a built-in tool")
        if name in checked:
            raise ValueError(f"custom tool name {name!r} is defined more than once")
        checked.append(name)
    return checked


def check_tool_name_collisions(
    http_tools: Mapping[str, Collection[str]], mcp_tools: Mapping[str, Collection[str]]
) -> None:
    """Both arguments map a server name to its tool names. A tool name served over both transports is
    refused: MCP tools are the environment's custom tools, and they may not shadow the HTTP (built-in) ones."""
    http_owner: dict[str, str] = {}
    for server, names in http_tools.items():
        for name in names:
            http_owner.setdefault(name, server)
    for server, names in mcp_tools.items():
        for name in names:
            if name in http_owner:
                raise ValueError(
                    f"tool name {name!r} is served both by HTTP tool server {http_owner[name]!r} "
                    f"and by MCP server {server!r}"
                )


def scoped_secret_variable(server: str, key: str, prefix: str = DEFAULT_SECRET_PREFIX) -> str:
    """`scoped_secret_variable("my-srv", "API_KEY")` -> `EVAL_MCP_MY_SRV__API_KEY`."""
    validate_mcp_server_name(server)
    validate_secret_key(key)
    validate_secret_prefix(prefix)
    return f"{prefix}_MCP_{normalise_name(server)}__{key}"


def resolve_secret(
    key: str,
    server: str,
    servers_declaring: Collection[str],
    env: Mapping[str, str],
    prefix: str = DEFAULT_SECRET_PREFIX,
    default: str | None = None,
) -> str | None:
    """The value of `server`'s secret `key`: the scoped variable, else the raw `key` when `server` is the only
    one of `servers_declaring` (a shared raw name would hand one server's credential to another), else
    `default`. A variable that is set counts even when empty: that is how a user blanks a secret."""
    scoped = scoped_secret_variable(server, key, prefix)
    declaring = set(servers_declaring)
    if server not in declaring:
        raise ValueError(f"MCP server {server!r} does not declare secret {key!r}")
    if scoped in env:
        return env[scoped]
    if len(declaring) == 1 and key in env:
        return env[key]
    return default


@cache
def builtin_server_names() -> frozenset[str]:
    """Names of the built-in tool servers, read from the registry so new servers are reserved automatically."""
    return frozenset(BUILTIN_SERVERS)


@cache
def builtin_tool_names() -> frozenset[str]:
    return frozenset(tool.name for server in BUILTIN_SERVERS.values() for tool in server().tools())
