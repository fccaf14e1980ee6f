"""Tool servers brought back for re-verification, for verifiers that query a server after the run.

A SimLab verifier may call `run_artifacts.server_url(...)` and ask the live server (`/step`) rather than read
the recorded state. At rollout time that works: the engine verifies before it tears the workspaces down. When
the `verification` step re-verifies stored rollouts (a verifier changed), those workspaces are long gone, so
each such rollout's final state (`metadata["state"][server]["final"]`) is restored into a fresh workspace of
the local tool host, and the verifier reads a copy of the artifacts that points there. The workspaces and the
copies are removed afterwards.
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
    META_STATE,
    META_TOOL_SERVERS,
    STORED_ARTIFACTS_SUFFIX,
    RunArtifacts,
    UnreadableArtifacts,
)
from eval_pipelines.toolservers.admin import ToolServerAdmin, WorkspaceError
from eval_pipelines.verifiers.isolation import VerifyJob


class RestoredServers:
    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="ep-restored-"))
        self._workspaces: list[str] = []
        self._copies = 0

    def prepare(self, job: VerifyJob) -> VerifyJob:
        """The job, verifying a copy of its artifacts whose servers hold the rollout's final state again.
        A rollout without a recorded final state is left as it is (its verifier sees no live server)."""
        if not isinstance(job.artifacts, Path):
            return job
        try:
            artifacts = RunArtifacts.load(job.artifacts)
        except (OSError, UnreadableArtifacts):
            return job  # verified from the same file, which reports why it cannot be read as the rollout's verdicts
        finals = {
            server: recorded["final"]
            for server, recorded in (artifacts.metadata.get(META_STATE) or {}).items()
            if isinstance(recorded, dict) and isinstance(recorded.get("final"), dict)
        }
        if not finals:
            return job
        urls = asyncio.run(self._restore(finals))
        artifacts.metadata[META_TOOL_SERVERS] = urls
        self._copies += 1
        copy = self._dir / f"{self._copies}{STORED_ARTIFACTS_SUFFIX}"
        artifacts.dump(copy)
        return VerifyJob(copy, job.modules)

    async def _restore(self, finals: dict[str, dict[str, Any]]) -> dict[str, str]:
        host = shared_tool_host()
        urls: dict[str, str] = {}
        async with ToolServerAdmin() as admin:
            for server, state in finals.items():
                try:
                    urls[server] = await admin.restore_workspace(host.base_url(server), state)
                except (KeyError, WorkspaceError):
                    continue  # not a built-in server, or it refused: the verifier finds no live server there
        self._workspaces.extend(urls.values())
        return urls

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
