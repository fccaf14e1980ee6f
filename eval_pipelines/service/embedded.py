"""The embedded evaluation backend: the local service's store and executor, in-process, no server needed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from eval_pipelines.clients.backend import ProgressCallback
from eval_pipelines.lib import aio
from eval_pipelines.scenarios.catalog import ScenarioCatalog
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.runs import Rollout, Run, RunLaunchRequest
from eval_pipelines.service.executor import NotFound, RunExecutor
from eval_pipelines.service.runtime import shared_runtime
from eval_pipelines.service.store import DuplicateRunName, RunStore


def service_paths(data_dir: Path) -> tuple[Path, Path]:
    """(store file, artifacts folder) of the local service under a data directory."""
    return data_dir / "service" / "runs.sqlite3", data_dir / "service" / "artifacts"


class EmbeddedEvaluationService:
    name = "embedded"

    def __init__(self, data_dir: Path, catalog: ScenarioCatalog | None = None) -> None:
        store_path, artifacts_dir = service_paths(data_dir)
        self.catalog = catalog or ScenarioCatalog()
        self.store = RunStore(store_path)
        self.executor = RunExecutor(self.store, self.catalog, shared_runtime(self.catalog), artifacts_dir)

    def launch_or_resume(self, request: RunLaunchRequest) -> str:
        try:
            return self.executor.launch(request).run_id
        except DuplicateRunName as existing:
            self.executor.resume(existing.run_id)
            return existing.run_id

    def find_run(self, run_name: str) -> Run | None:
        run_id = self.store.find_run_id_by_name(run_name)
        return None if run_id is None else self.store.get_run(run_id)

    def cancel(self, run_id: str) -> int:
        return self.executor.cancel(run_id)

    def complete_run(
        self,
        run_id: str,
        request: RunLaunchRequest,
        *,
        timeout_seconds: float,
        progress: ProgressCallback | None = None,
    ) -> Run:
        return aio.run(
            self.executor.execute(
                run_id,
                request.model_config_,
                max_parallel=request.max_parallel,
                timeout_seconds=timeout_seconds,
                on_rollout_done=progress,
                user_model_config=request.user_model_config,
            )
        )

    def list_rollouts(self, run_id: str) -> list[Rollout]:
        if self.store.get_run(run_id) is None:
            raise NotFound(f"run {run_id!r} not found")
        return self.store.list_rollouts(run_id=run_id)

    def rollout_pages(self, run_id: str, page_size: int) -> Iterator[list[Rollout]]:
        if self.store.get_run(run_id) is None:
            raise NotFound(f"run {run_id!r} not found")
        return self.store.run_rollout_pages(run_id, page_size)

    def get_artifacts(self, rollout_id: str) -> RunArtifacts | None:
        try:
            return self.executor.load_artifacts(rollout_id)
        except NotFound:
            return None
