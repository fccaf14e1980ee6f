"""What the pipeline needs from an evaluation service, whichever backend serves it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.runs import Rollout, Run, RunLaunchRequest

ProgressCallback = Callable[[Rollout], None]


class EvaluationBackend(Protocol):
    name: str

    def launch_or_resume(self, request: RunLaunchRequest) -> str:
        """Launch the run, or when `run_name` exists already, resume that run. Returns the run id."""
        ...

    def find_run(self, run_name: str) -> Run | None: ...

    def cancel(self, run_id: str) -> int:
        """Stop the run: active rollouts end `cancelled` within a second, pending ones never start. Returns how
        many rollouts were cancelled."""
        ...

    def complete_run(
        self,
        run_id: str,
        request: RunLaunchRequest,
        *,
        timeout_seconds: float,
        progress: ProgressCallback | None = None,
    ) -> Run:
        """Block until every rollout of the launched run is terminal; never launches it again."""
        ...

    def list_rollouts(self, run_id: str) -> list[Rollout]: ...

    def rollout_pages(self, run_id: str, page_size: int) -> Iterator[list[Rollout]]:
        """`list_rollouts` a page at a time, so a large run need not be held whole."""
        ...

    def artifacts_file(self, run_id: str, rollout_id: str) -> Path | None:
        """The file holding the rollout's artifacts when the service shares this process's disk, else None."""
        ...

    def get_artifacts(self, rollout_id: str) -> RunArtifacts | None:
        """A finished rollout's artifacts; None when it has none (its trace could not be written)."""
        ...
