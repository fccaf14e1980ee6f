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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval_pipelines.schemas.artifacts import (
    META_HTTP_SERVERS,
    META_SIMLAB_SERVERS,
    META_TOOL_SERVERS,
    META_UNRESTORABLE_SERVERS,
    RunArtifacts,
)
from eval_pipelines.schemas.hosted import HOSTED_STEP_PREFIX, SIMLAB_SERVER_NAMES


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

    def __getattr__(self, name: str) -> Any:
        return getattr(self._artifacts, name)

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
    def tool_server_name(self) -> str | None:
        return next((self._simlab_name(server) for server in self._servers()), None)

    @property
    def tool_server_url(self) -> str | None:
        first = next(iter(self._servers()), None)
        return None if first is None else self._url_of(first)

    def _url_of(self, server: str) -> str:
        if server in self._unavailable:
            raise ServerStateUnavailable(_unavailable(self._simlab_name(server), self._unavailable[server]))
        return self._urls[server]

    def server_url(self, name: str | None = None) -> str | None:
        """The URL of the server SimLab calls `name` (`email-env`), or the built-in name; else the first."""
        if not name:
            return self.tool_server_url
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
    def verifier_input(self) -> str | None:
        return self._artifacts.final_observation

    @property
    def diffs(self) -> list[Any]:
        return list(self._artifacts.metadata.get("state_diffs") or [])

    @property
    def seed_data(self) -> dict[str, Any]:
        return {}


def verifier_view(artifacts: RunArtifacts) -> RunArtifacts | SimLabRunArtifacts:
    """What a task's verifiers are handed: SimLab's view for a task imported from a SimLab bundle, or one whose
    servers are the user's own (the only way to their URLs)."""
    keys = (META_SIMLAB_SERVERS, META_HTTP_SERVERS, META_UNRESTORABLE_SERVERS)
    return SimLabRunArtifacts(artifacts) if any(artifacts.metadata.get(key) for key in keys) else artifacts
