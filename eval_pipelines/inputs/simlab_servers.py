"""The servers and apps of a SimLab task: which built-in server, user-named server or nobody plays each.

A SimLab task names tool servers (`tool_servers: [{name: erp-env, tool_server_url}]`) and apps (`apps: [ERP,
"SEC EDGAR"]`, toolsets of SimLab's catalog). Each one is played here by a built-in server (`email-env` ->
`email`, `schemas.hosted.SIMLAB_SERVER_NAMES`), by a server the user names for the bundle, or by nobody, which
makes the task unrunnable with the reason. The user names servers in

- SimLab's own MCP server file, `mcp-servers.json` (`{"mcpServers": {name: {command, args, env} | {url}}}`),
  found in the bundle folder or beside it, as `simlab env init --mcp-servers` reads it;
- a servers file given to the import (`--servers servers.yaml`): `{servers: {name: {url} | {command, args, env},
  ...}}` (or SimLab's shape), each with optional `transport` and `apps` (`schemas.hosted.NamedToolServer`).

A server given by `url` speaks spec 001 (GET /tools, POST /step) unless `transport: mcp`; SimLab's file means
MCP throughout. Such a server is used as it is: never provisioned or snapshotted, so it has no state diff.
Environment values whose names look like credentials are not written into the scenario: they become secrets the
MCP server's child resolves from the environment when it starts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from eval_pipelines.schemas.hosted import (
    SIMLAB_APPS,
    SIMLAB_MCP_SERVERS_KEY,
    SIMLAB_SERVER_NAMES,
    NamedToolServer,
    simlab_app,
)

#: SimLab's name for its MCP server file, read from the bundle folder or the folder holding it.
SIMLAB_MCP_SERVERS_FILE = "mcp-servers.json"
#: The key of a servers file in this project's own shape.
SERVERS_KEY = "servers"
#: A server's name becomes a tool-name prefix (`erp-env__get_order`) and an MCP server name.
_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CREDENTIAL_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


class ServersFileError(ValueError):
    """A servers file is malformed; the message names the file and the field."""


@dataclass
class NamedServers:
    """The servers the user named for a bundle, by name, and where each was read."""

    servers: dict[str, NamedToolServer] = field(default_factory=dict)
    sources: dict[str, Path] = field(default_factory=dict)

    def update(self, other: NamedServers) -> None:
        self.servers.update(other.servers)
        self.sources.update(other.sources)

    def playing(self, app: str) -> str | None:
        """The named server that plays SimLab app `app` (by its own name or its `apps`), if any."""
        for name, server in self.servers.items():
            if simlab_app(name) == app or any(simlab_app(entry) == app for entry in server.apps):
                return name
        return None


def read_servers_file(path: Path) -> NamedServers:
    """A servers file in this project's shape (`servers:`) or SimLab's (`mcpServers:`), YAML or JSON."""
    try:
        text = path.read_text(encoding="utf-8")
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise ServersFileError(f"{path}: cannot be read: {exc}") from None
    if not isinstance(raw, dict):
        raise ServersFileError(f"{path}: expected an object with '{SERVERS_KEY}' or '{SIMLAB_MCP_SERVERS_KEY}'")
    simlab = SIMLAB_MCP_SERVERS_KEY in raw
    key = SIMLAB_MCP_SERVERS_KEY if simlab else SERVERS_KEY
    entries = raw.get(key)
    if not isinstance(entries, dict):
        raise ServersFileError(f"{path}: {key}: expected an object of server name -> server")
    named = NamedServers()
    for name, entry in entries.items():
        where = f"{path}: {key}.{name}"
        if not isinstance(name, str) or not _SERVER_NAME.fullmatch(name):
            raise ServersFileError(f"{where}: a server name must be letters, digits, '_' or '-' (at most 64)")
        if not isinstance(entry, dict):
            raise ServersFileError(f"{where}: expected an object with 'url' or 'command'")
        if simlab:  # SimLab's file lists MCP servers only, and may carry keys of its own (`type`, `headers`)
            entry = {k: entry[k] for k in ("url", "command", "args", "env") if k in entry} | {"transport": "mcp"}
        try:
            named.servers[name] = NamedToolServer.model_validate(entry)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'server'}: {e['msg']}" for e in exc.errors())
            raise ServersFileError(f"{where}: {problems}") from None
        named.sources[name] = path
    return named


def discover_servers(bundle: Path, servers_file: Path | None) -> NamedServers:
    """SimLab's `mcp-servers.json` in or beside the bundle, then the servers file given (which wins)."""
    named = NamedServers()
    for folder in (bundle.parent, bundle):
        candidate = folder / SIMLAB_MCP_SERVERS_FILE
        if candidate.is_file() and not candidate.is_symlink():
            named.update(read_servers_file(candidate))
    if servers_file is not None:
        named.update(read_servers_file(servers_file))
    return named


def mcp_server_entry(name: str, server: NamedToolServer) -> tuple[dict[str, Any], list[str]]:
    """The task's `mcp_servers` entry for `server`, and the credential-like variables left to the environment."""
    if server.command is None:
        return {"name": name, "url": server.url}, []
    env = {k: v for k, v in server.env.items() if not _CREDENTIAL_NAME.search(k)}
    secrets = sorted(k for k in server.env if _CREDENTIAL_NAME.search(k))
    entry: dict[str, Any] = {"name": name, "command": server.command, "args": list(server.args)}
    if env:
        entry["env"] = env
    if secrets:
        entry["secrets"] = dict.fromkeys(secrets)
    return entry, secrets


@dataclass
class TaskServers:
    """What plays the servers and apps of one task."""

    #: built-in server -> the name the task gave it (`email` -> `email-env`), in the task's order
    builtin: dict[str, str] = field(default_factory=dict)
    #: user-named servers the task uses, by the name the task (and its verifiers) know them by
    named: dict[str, NamedToolServer] = field(default_factory=dict)
    #: why the task cannot run, one line per server or app nobody plays
    problems: list[str] = field(default_factory=list)


def _builtin_for(name: str) -> str | None:
    mapped = SIMLAB_SERVER_NAMES.get(name.strip().lower())
    if mapped is not None:
        return mapped
    app = simlab_app(name)
    aliases = SIMLAB_APPS.get(app, ()) if app is not None else ()
    return next((SIMLAB_SERVER_NAMES[a] for a in aliases if a in SIMLAB_SERVER_NAMES), None)


def resolve_task_servers(tool_servers: list[Any], apps: list[Any], named: NamedServers) -> TaskServers:
    """Who plays each of a task's `tool_servers` and `apps`: a server the user named (first: it is what they
    asked for), else a built-in one, else nobody (a problem naming the field)."""
    plan = TaskServers()
    unplayed: set[str] = set()  # the apps of servers already reported, so one gap is said once
    for pos, ref in enumerate(tool_servers):
        name = str((ref.get("name") if isinstance(ref, dict) else ref) or "").strip()
        builtin = _builtin_for(name) if name else None
        if name in named.servers:
            plan.named[name] = named.servers[name]
        elif builtin is not None:
            plan.builtin.setdefault(builtin, name)
        else:
            unplayed.add(simlab_app(name) or name)
            plan.problems.append(
                f"tool_servers[{pos}] {name!r}: no built-in server plays it and no server was named for it "
                "(name one in mcp-servers.json or --servers)"
            )
    for pos, entry in enumerate(apps):
        text = str(entry or "").strip()
        app = simlab_app(text)
        if text in named.servers:
            plan.named.setdefault(text, named.servers[text])
            continue
        player = named.playing(app) if app is not None else None
        if player is not None:
            plan.named.setdefault(player, named.servers[player])
            continue
        builtin = _builtin_for(text)
        if builtin is not None:
            plan.builtin.setdefault(builtin, text)
            continue
        if (app or text) not in unplayed:
            plan.problems.append(
                f"apps[{pos}] {text!r}: no server plays this SimLab app (name one in mcp-servers.json or --servers)"
            )
    return plan
