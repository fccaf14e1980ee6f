"""Where the local service keeps its data under a data directory (the one home of these paths)."""

from __future__ import annotations

from pathlib import Path

from eval_pipelines.schemas.artifacts import STORED_ARTIFACTS_SUFFIX

#: How the service named a rollout's artifacts before they were stored compressed: a store and the warehouse's
#: `artifacts_path` may still point at such files, and they still load.
PLAIN_ARTIFACTS_SUFFIX = ".json"


def service_paths(data_dir: Path) -> tuple[Path, Path]:
    """(store file, artifacts folder) of the local service under a data directory."""
    return data_dir / "service" / "runs.sqlite3", data_dir / "service" / "artifacts"


def feedback_log_path(data_dir: Path) -> Path:
    """The JSON-lines file where `simlab feedback` messages sent to the service are kept for its operator."""
    return data_dir / "service" / "feedback.jsonl"


def rollout_artifacts_path(artifacts_dir: Path, run_id: str, rollout_id: str) -> Path:
    """Where the service writes one rollout's artifacts (the pipeline reads them there when it shares the disk)."""
    return artifacts_dir / run_id / f"{rollout_id}{STORED_ARTIFACTS_SUFFIX}"


def stored_rollout_artifacts(artifacts_dir: Path, run_id: str, rollout_id: str) -> Path:
    """The file that holds one rollout's artifacts: where the service writes them now, or the plain JSON file of a
    rollout it stored before compression (a run resumed across the change has both kinds)."""
    current = rollout_artifacts_path(artifacts_dir, run_id, rollout_id)
    plain = current.with_name(f"{rollout_id}{PLAIN_ARTIFACTS_SUFFIX}")
    return plain if not current.is_file() and plain.is_file() else current
