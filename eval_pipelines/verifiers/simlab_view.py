"""The run artifacts as a SimLab verifier reads them.

SimLab's verifiers (`verify(run_artifacts)` in a SimLab task bundle) read more than spec 001's RunArtifacts:
`server_url(name)` and `tool_server_url` to query a server after the run, `tool_servers`, `last_tool_message`,
`verifier_input`, and tool messages whose `content` is an object naming `tool_server` and `tool_name` (with the
names the bundle gave the servers, `email-env` for `email`). This view offers that over the project's own
artifacts, for tasks imported from such a bundle (`Task.simlab_servers`); every other attribute is the
artifacts' own, so a state-snapshot verifier keeps working. The server URLs answer `/step` in the hosted
product's observation shape (`{"observation": {"text", "is_error"}}`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval_pipelines.schemas.artifacts import META_SIMLAB_SERVERS, META_TOOL_SERVERS, RunArtifacts
from eval_pipelines.schemas.hosted import HOSTED_STEP_PREFIX, SIMLAB_SERVER_NAMES


@dataclass(frozen=True)
class ToolServerInfo:
    name: str
    tool_server_url: str


class SimLabRunArtifacts:
    """Read-only SimLab view of one rollout's artifacts."""

    def __init__(self, artifacts: RunArtifacts) -> None:
        self._artifacts = artifacts
        self._names: dict[str, str] = dict(artifacts.metadata.get(META_SIMLAB_SERVERS) or {})
        urls: dict[str, str] = dict(artifacts.metadata.get(META_TOOL_SERVERS) or {})
        self._urls = {server: f"{url.rstrip('/')}/{HOSTED_STEP_PREFIX}" for server, url in urls.items()}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._artifacts, name)

    def _simlab_name(self, server: str) -> str:
        return self._names.get(server, server)

    @property
    def tool_servers(self) -> list[ToolServerInfo]:
        return [ToolServerInfo(self._simlab_name(server), url) for server, url in self._urls.items()]

    @property
    def tool_server_name(self) -> str | None:
        return next((self._simlab_name(server) for server in self._urls), None)

    @property
    def tool_server_url(self) -> str | None:
        return next(iter(self._urls.values()), None)

    def server_url(self, name: str | None = None) -> str | None:
        """The URL of the server SimLab calls `name` (`email-env`), or the built-in name; else the first."""
        if name:
            server = SIMLAB_SERVER_NAMES.get(name, name)
            for candidate in (server, *[s for s, alias in self._names.items() if alias == name]):
                if candidate in self._urls:
                    return self._urls[candidate]
            return None
        return self.tool_server_url

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
    """What a task's verifiers are handed: SimLab's view for a task imported from a SimLab bundle."""
    return SimLabRunArtifacts(artifacts) if artifacts.metadata.get(META_SIMLAB_SERVERS) else artifacts
