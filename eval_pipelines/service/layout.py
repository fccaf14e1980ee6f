"""Where the local service keeps its data under a data directory (the one home of these paths)."""

from __future__ import annotations

from pathlib import Path


def service_paths(data_dir: Path) -> tuple[Path, Path]:
    """(store file, artifacts folder) of the local service under a data directory."""
    return data_dir / "service" / "runs.sqlite3", data_dir / "service" / "artifacts"


def rollout_artifacts_path(artifacts_dir: Path, run_id: str, rollout_id: str) -> Path:
    """Where the service keeps one rollout's artifacts (the pipeline reads them there when it shares the disk)."""
    return artifacts_dir / run_id / f"{rollout_id}.json"
