"""The run artifacts as a SimLab verifier reads them.

SimLab's verifiers (`verify(run_artifacts)` in a SimLab task bundle) read more than spec 001's RunArtifacts:
`server_url(name)` and `tool_server_url` to query a server after the run, `tool_servers`, `last_tool_message`,
`verifier_input`, and tool messages whose `content` is an object naming `tool_server` and `tool_name` (with the
names the bundle gave the servers, `email-env` for `email`). This view offers that over the project's own
artifacts, for tasks imported from such a bundle (`Task.simlab_servers`); every other attribute is the
artifacts' own, so a state-snapshot verifier keeps working. The built-in servers' URLs answer `/step` in the
hosted product's observation shape (`{"observation": {"text", "is_error"}}`); the task's own HTTP servers
(`Task.http_servers`) are handed out as they are.

A server whose end state cannot be brought back (after the rollout: the user's own server, a server nobody
snapshotted, one the tool host refused to restore) has no URL here: asking for it raises `ServerStateUnavailable`,
which ends the verifier's call without a verdict (a `verifier` error), never a failure. The view also notes each
server a verifier asked for and did not get, so a verifier that reports that as a failure itself is an error too.
SimLab hands an unknown name the first server instead; that would grade the rollout against the wrong server.

The rest of SimLab's adapter (`simlab.verifiers.runner._VerifierArtifactsAdapter`) is here too, with SimLab's
values: `task_file` (the task's SimLab task dict as a JSON file, written on first use and deleted after the verdict),
`agent_strategy`, `verifier_input`/`rollback_input`, `model`/`provider`/`max_steps` as `""`/`0` when unset, and
`None` for what this project has no counterpart of. `install_collinear_shims` makes the `collinear.core` modules
SimLab provides to verifiers importable in a verifier worker.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from eval_pipelines.lib.redact import redact_url
from eval_pipelines.schemas.artifacts import (
    META_HTTP_SERVERS,
    META_NPC_TRANSCRIPTS,
    META_SIMLAB_SERVERS,
    META_SIMLAB_TASK,
    META_STATE,
    META_TOOL_SERVERS,
    META_UNRESTORABLE_SERVERS,
    RunArtifacts,
)
from eval_pipelines.schemas.hosted import (
    HOSTED_STEP_PREFIX,
    SIMLAB_NPC_CHAT_SERVER,
    SIMLAB_SERVER_NAMES,
    TaskMeta,
    verifier_entry,
)
from eval_pipelines.schemas.scenarios import Task

#: What SimLab's adapter says of the agent: every agent it runs calls tools.
AGENT_STRATEGY = "tool-calling"
#: Metadata keys SimLab reads a verifier's input from, in order, before the final observation.
VERIFIER_INPUT_KEYS = ("resource_id", "resource_key", "page_id", "epic_key")
#: The metadata keys SimLab's NPC chat attaches after a run (`simlab.npc_chat.activation`): NPC name ->
#: `{role, messages: [{role: user | assistant, content}]}`, and the number of messages in them.
NPC_CHAT_TRANSCRIPTS = "npc_chat_transcripts"
NPC_CHAT_MESSAGE_COUNT = "npc_chat_message_count"
#: Our transcripts' speakers (`toolservers.npc.ROLE_AGENT` / `ROLE_NPC`) as SimLab's chat history names them.
_SIMLAB_SPEAKER = {"agent": "user", "npc": "assistant"}


class ServerStateUnavailable(BaseException):
    """A verifier asked for a server whose state at the end of the rollout cannot be queried. A BaseException on
    purpose: a verifier's own `except Exception` must not turn "nothing to ask" into a failing verdict."""


@dataclass(frozen=True)
class ToolServerInfo:
    name: str
    #: why the server's end state cannot be queried; None when `url` answers as the rollout left it
    unavailable: str | None = None
    url: str = ""

    @property
    def tool_server_url(self) -> str:
        if self.unavailable is not None:
            raise ServerStateUnavailable(_unavailable(self.name, self.unavailable))
        return self.url


def _unavailable(name: str, reason: str) -> str:
    return f"the state of tool server {name!r} at the end of the rollout cannot be queried: {reason}"


class SimLabRunArtifacts:
    """Read-only SimLab view of one rollout's artifacts."""

    def __init__(self, artifacts: RunArtifacts) -> None:
        self._artifacts = artifacts
        metadata = artifacts.metadata
        self._names: dict[str, str] = dict(metadata.get(META_SIMLAB_SERVERS) or {})
        urls: dict[str, str] = dict(metadata.get(META_TOOL_SERVERS) or {})
        self._urls = {server: f"{url.rstrip('/')}/{HOSTED_STEP_PREFIX}" for server, url in urls.items()}
        self._urls.update({name: url.rstrip("/") for name, url in (metadata.get(META_HTTP_SERVERS) or {}).items()})
        unrestorable: dict[str, str] = dict(metadata.get(META_UNRESTORABLE_SERVERS) or {})
        self._unavailable = {server: why for server, why in unrestorable.items() if server not in self._urls}
        #: the servers a verifier asked for and got no URL for (see `verifiers.protocol.run_verifier`)
        self.servers_not_found: list[str] = []
        self._task_file: str | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not yet set in __init__ (a copy, a pickle): never the artifacts' private state
            raise AttributeError(name)
        return getattr(self._artifacts, name)

    agent_strategy = AGENT_STRATEGY
    rollout_trace_path: str | None = None
    log_probs: list[Any] | None = None
    reference_folder_id: str | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        """The artifacts' metadata, with SimLab's NPC chat transcripts when the rollout had NPCs SimLab's NPC
        chat plays (those with a personality)."""
        metadata = dict(self._artifacts.metadata)
        transcripts = simlab_npc_chat_transcripts(metadata)
        if transcripts:
            metadata[NPC_CHAT_TRANSCRIPTS] = transcripts
            metadata[NPC_CHAT_MESSAGE_COUNT] = sum(len(entry["messages"]) for entry in transcripts.values())
        return metadata

    @property
    def model(self) -> str:
        return self._artifacts.model or ""

    @property
    def provider(self) -> str:
        return self._artifacts.provider or ""

    @property
    def max_steps(self) -> int:
        return self._artifacts.max_steps or 0

    @property
    def task_file(self) -> str:
        """A JSON file of the task as SimLab's task file holds it; written when first asked for, deleted by
        `close()` after the verdict (in the worker's private temp dir)."""
        if self._task_file is None:
            descriptor, path = tempfile.mkstemp(suffix=".json", prefix="simlab-task-")
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                json.dump(self._simlab_task(), file, indent=2)
            self._task_file = path
        return self._task_file

    def _simlab_task(self) -> dict[str, Any]:
        recorded = self._artifacts.metadata.get(META_SIMLAB_TASK)
        if isinstance(recorded, dict):
            return recorded
        # Artifacts recorded before the task was: what they say of it.
        names = [info.name for info in self.tool_servers]
        return {
            "meta": {"task_id": self._artifacts.task_id},
            "task": self._artifacts.task,
            "apps": names,
            "tool_servers": [{"name": name, "tool_server_url": ""} for name in names],
        }

    def close(self) -> None:
        """Delete what the view wrote for the verifier (its task file)."""
        path, self._task_file = self._task_file, None
        if path is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _simlab_name(self, server: str) -> str:
        return self._names.get(server, server)

    def _servers(self) -> list[str]:
        """Every server the rollout had, in the task's order first (SimLab's "first server" is the task's)."""
        known = {*self._urls, *self._unavailable}
        return [s for s in dict.fromkeys([*self._names, *self._urls, *self._unavailable]) if s in known]

    @property
    def tool_servers(self) -> list[ToolServerInfo]:
        return [
            ToolServerInfo(self._simlab_name(s), self._unavailable.get(s), self._urls.get(s, ""))
            for s in self._servers()
        ]

    @property
    def tool_server_name(self) -> str:
        return next((self._simlab_name(server) for server in self._servers()), "")

    @property
    def tool_server_url(self) -> str:
        first = next(iter(self._servers()), None)
        return "" if first is None else self._url_of(first)

    def _url_of(self, server: str) -> str:
        if server in self._unavailable:
            raise ServerStateUnavailable(_unavailable(self._simlab_name(server), self._unavailable[server]))
        return self._urls[server]

    def server_url(self, name: str | None = None) -> str | None:
        """The URL of the server SimLab calls `name` (`email-env`), or the built-in name; without a name the first
        server's (None when the rollout has none). An unknown name is None, never another server's URL."""
        if not name:
            return self.tool_server_url or None
        server = SIMLAB_SERVER_NAMES.get(name, name)
        for candidate in (server, name, *[s for s, alias in self._names.items() if alias == name]):
            if candidate in self._urls or candidate in self._unavailable:
                return self._url_of(candidate)
        self.servers_not_found.append(name)
        return None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The transcript with each tool message's content as SimLab's normalised tool payload."""
        calls = iter(zip(self._artifacts.tool_calls, self._artifacts.tool_results, strict=False))
        out: list[dict[str, Any]] = []
        for message in self._artifacts.messages:
            if message.get("role") != "tool":
                out.append(message)
                continue
            call, result = next(calls, (None, None))
            if isinstance(message.get("content"), dict):  # a SimLab agent recorded SimLab's payload itself
                out.append(message)
                continue
            payload: dict[str, Any] = {
                "tool_call_id": message.get("tool_call_id"),
                "tool_server": self._simlab_name(call.tool_server) if call else None,
                "tool_name": call.tool_name if call else None,
                "is_error": bool(result.is_error) if result else bool(message.get("is_error")),
            }
            if isinstance(message.get("content"), str) and message["content"]:
                payload["summary"] = message["content"]
            out.append({**message, "content": payload})
        return out

    @property
    def last_tool_message(self) -> str | None:
        texts = [m.get("content") for m in self._artifacts.messages if m.get("role") == "tool"]
        return str(texts[-1]) if texts else None

    @property
    def verifier_input(self) -> Any:
        """SimLab's: the resource the agent's metadata names, else the final observation ("" when none)."""
        metadata = self._artifacts.metadata
        named = next((metadata[key] for key in VERIFIER_INPUT_KEYS if metadata.get(key)), None)
        return named or self._artifacts.final_observation or ""

    @property
    def rollback_input(self) -> Any:
        return self.verifier_input

    @property
    def diffs(self) -> list[Any]:
        return list(self._artifacts.metadata.get("state_diffs") or [])

    @property
    def seed_data(self) -> dict[str, Any]:
        return {}


def _chat_npcs(metadata: dict[str, Any]) -> dict[str, Any]:
    """The NPCs of the chat server's final state (`toolservers.npc`'s `npcs`), by profile id."""
    chat = (metadata.get(META_STATE) or {}).get(SIMLAB_SERVER_NAMES[SIMLAB_NPC_CHAT_SERVER]) or {}
    final = chat.get("final") if isinstance(chat, dict) else None
    while isinstance(final, dict) and isinstance(final.get("state"), dict):  # a `/snapshot` body
        final = final["state"]
    npcs = final.get("npcs") if isinstance(final, dict) else None
    return npcs if isinstance(npcs, dict) else {}


def simlab_npc_chat_transcripts(metadata: dict[str, Any]) -> dict[str, Any]:
    """SimLab's `npc_chat_transcripts` from our `npc_transcripts`: each NPC SimLab's NPC chat would play (one
    with a personality) under its name, with its role and its conversation with the agent, oldest first."""
    ours = metadata.get(META_NPC_TRANSCRIPTS) or {}
    out: dict[str, Any] = {}
    for profile_id, npc in _chat_npcs(metadata).items():
        personality = npc.get("personality") if isinstance(npc, dict) else None
        if not isinstance(personality, dict):
            continue  # SimLab's NPC chat plays only NPCs given a personality
        name = f"{npc.get('first_name') or ''} {npc.get('last_name') or ''}".strip() or str(profile_id)
        out[name] = {
            # the import blanks a role equal to the occupation, so the prompt says it once
            "role": str(personality.get("role") or npc.get("occupation") or ""),
            "messages": [
                {"role": _SIMLAB_SPEAKER.get(str(m.get("role")), str(m.get("role"))), "content": m.get("content", "")}
                for m in ours.get(profile_id) or []
                if isinstance(m, dict)
            ],
        }
    return out


def verifier_view(artifacts: RunArtifacts) -> RunArtifacts | SimLabRunArtifacts:
    """What a task's verifiers are handed: SimLab's view for a task imported from a SimLab bundle, or one whose
    servers are the user's own (the only way to their URLs)."""
    keys = (META_SIMLAB_TASK, META_SIMLAB_SERVERS, META_HTTP_SERVERS, META_UNRESTORABLE_SERVERS)
    return SimLabRunArtifacts(artifacts) if any(artifacts.metadata.get(key) for key in keys) else artifacts


def simlab_task(task: Task, scenario_id: str) -> dict[str, Any]:
    """The task as a SimLab task file holds it (what SimLab's adapter writes to `task_file`): what the bundle said
    (`Task.simlab_origin`: `meta`, `apps`, `tool_servers`, the instruction's key) over the catalog's fields, and
    the verifiers as `{func, module}` entries under the package the scenario's bundle is served as."""
    origin = task.simlab_origin
    meta = TaskMeta(task_id=task.task_id, display_name=task.name, difficulty=task.difficulty, category=task.category)
    servers = origin.get("tool_servers") or [
        {"name": name, "tool_server_url": task.http_servers.get(name, "")}
        for name in [*task.simlab_servers.values(), *task.http_servers]
    ]
    body: dict[str, Any] = {
        "meta": {**meta.model_dump(), **(origin.get("meta") or {})},
        str(origin.get("text_key") or "task"): task.description,
        "apps": list(origin.get("apps") or [server["name"] for server in servers]),
        "tool_servers": [
            {"name": str(server.get("name")), "tool_server_url": _shown_url(server.get("tool_server_url"))}
            for server in servers
        ],
        "npcs": [{"id": profile.profile_id} for profile in task.npc_profiles],
        "verifiers": [verifier_entry(scenario_id, module) for module in task.verifiers],
    }
    if "category" in origin:
        body["category"] = origin["category"]
    return body


def _shown_url(url: Any) -> str:
    """A bundle's URL as a verifier may read it: credentials stay out of what foreign code is handed."""
    return redact_url(url) if url else ""


class SimLabVerifierResult:
    """What a verifier gets as `collinear.core.verifier.VerifierResult` (SimLab provides the same three fields)."""

    def __init__(self, success: bool, message: str = "", output: str = "") -> None:
        self.success = success
        self.message = message
        self.output = output

    def __bool__(self) -> bool:
        return bool(self.success)

    def __repr__(self) -> str:
        return f"VerifierResult(success={self.success!r}, message={self.message!r})"


def install_collinear_shims() -> None:
    """Make `collinear.core.run_artifacts.RunArtifacts` (this view) and `collinear.core.verifier.VerifierResult`
    importable, as SimLab does for the verifiers it runs. For a verifier worker only: it replaces whatever
    `collinear.core` this interpreter had."""
    if "collinear" not in sys.modules and importlib.util.find_spec("collinear") is None:
        sys.modules["collinear"] = _package("collinear")
    core = sys.modules["collinear.core"] = _package("collinear.core")
    run_artifacts = sys.modules["collinear.core.run_artifacts"] = _package("collinear.core.run_artifacts")
    run_artifacts.RunArtifacts = SimLabRunArtifacts  # type: ignore[attr-defined]
    verifier = sys.modules["collinear.core.verifier"] = _package("collinear.core.verifier")
    verifier.VerifierResult = SimLabVerifierResult  # type: ignore[attr-defined]
    core.run_artifacts = run_artifacts  # type: ignore[attr-defined]
    core.verifier = verifier  # type: ignore[attr-defined]
    if "collinear" in sys.modules:
        sys.modules["collinear"].core = core  # type: ignore[attr-defined]


def _package(name: str) -> ModuleType:
    module = ModuleType(name)
    module.__path__ = []
    module.__package__ = name
    return module
