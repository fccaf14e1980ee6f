"""Tool servers brought back for verification after the run, for verifiers that query a server.

A SimLab verifier may call `run_artifacts.server_url(...)` and ask the live server (`/step`) rather than read
the recorded state. During `POST /runs` that works: the engine verifies before it tears the workspaces down.
The `verification` step of a sweep, and every re-verification, verify the stored rollouts long after those
workspaces are gone, so each rollout's final state (`metadata["state"][server]["final"]`) is restored into a
fresh workspace of the local tool host (each built-in server rebuilds its own state type from it:
`BuiltinToolServer.restore_state`), and the verifier reads a copy of the artifacts that points there.

A server whose end state cannot be brought back (a task's own HTTP server, which nobody snapshots and which may
have changed since; a server without a recorded final state; a snapshot the tool host refuses) gets no URL on the
copy: it is named with the reason (`META_UNRESTORABLE_SERVERS`), so a verifier that asks for it ends in a
`verifier` error saying so (`verifiers/simlab_view.py`), never in a failure. The workspaces and the copies are
removed afterwards.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from eval_pipelines.runtime.local import shared_tool_host
from eval_pipelines.schemas.artifacts import (
    META_HTTP_SERVERS,
    META_STATE,
    META_TOOL_SERVERS,
    META_UNRESTORABLE_SERVERS,
    STORED_ARTIFACTS_SUFFIX,
    RunArtifacts,
    UnreadableArtifacts,
)
from eval_pipelines.toolservers.admin import ToolServerAdmin, WorkspaceError
from eval_pipelines.verifiers.isolation import VerifyJob

USER_SERVER_NOT_RESTORABLE = (
    "it is a tool server of your own (the task's http_servers), used as it is: nobody recorded its state at the "
    "end of the rollout, and it may have changed since"
)
NO_FINAL_STATE = "the rollout recorded no final state for it"


class RestoredServers:
    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="ep-restored-"))
        self._workspaces: list[str] = []
        self._copies = 0

    def prepare(self, job: VerifyJob) -> VerifyJob:
        """The job, verifying a copy of its artifacts whose servers hold the rollout's final state again, and
        whose servers that cannot are named with the reason. A rollout that had no server is left as it is."""
        if not isinstance(job.artifacts, Path):
            return job
        try:
            artifacts = RunArtifacts.load(job.artifacts)
        except (OSError, UnreadableArtifacts):
            return job  # verified from the same file, which reports why it cannot be read as the rollout's verdicts
        metadata = artifacts.metadata
        unrestorable: dict[str, str] = dict(metadata.get(META_UNRESTORABLE_SERVERS) or {})
        unrestorable.update(dict.fromkeys(metadata.get(META_HTTP_SERVERS) or {}, USER_SERVER_NOT_RESTORABLE))
        recorded = metadata.get(META_STATE) or {}
        finals = {
            server: state["final"]
            for server, state in recorded.items()
            if server not in unrestorable and isinstance(state, dict) and isinstance(state.get("final"), dict)
        }
        for server in metadata.get(META_TOOL_SERVERS) or {}:
            if server not in finals:
                unrestorable.setdefault(server, NO_FINAL_STATE)
        if not finals and not unrestorable:
            return job
        urls, refused = asyncio.run(self._restore(finals)) if finals else ({}, {})
        metadata[META_TOOL_SERVERS] = urls
        metadata[META_HTTP_SERVERS] = {}
        metadata[META_UNRESTORABLE_SERVERS] = {**unrestorable, **refused}
        self._copies += 1
        copy = self._dir / f"{self._copies}{STORED_ARTIFACTS_SUFFIX}"
        artifacts.dump(copy)
        return VerifyJob(copy, job.modules)

    async def _restore(self, finals: dict[str, dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
        """(server -> URL of its restored workspace, server -> why it was not restored)."""
        host = shared_tool_host()
        urls: dict[str, str] = {}
        refused: dict[str, str] = {}
        async with ToolServerAdmin() as admin:
            for server, state in finals.items():
                try:
                    urls[server] = await admin.restore_workspace(host.base_url(server), state)
                except KeyError:
                    refused[server] = "no built-in server of that name can hold its state"
                except WorkspaceError as exc:
                    refused[server] = f"the local tool host could not restore it: {exc}"
        self._workspaces.extend(urls.values())
        return urls, refused

    async def _delete(self) -> None:
        async with ToolServerAdmin() as admin:
            for url in self._workspaces:
                try:
                    await admin.delete_workspace(url)
                except WorkspaceError:
                    continue  # best effort: an orphan workspace only costs the tool host some memory

    def close(self) -> None:
        if self._workspaces:
            asyncio.run(self._delete())
            self._workspaces.clear()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> RestoredServers:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
