"""Configuration of the local evaluation service (HTTP)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipelines.inputs.scenarios import default_scenarios_dir
from eval_pipelines.schemas.limits import DEFAULT_MAX_ROLLOUTS_PER_RUN
from eval_pipelines.schemas.runs import DEFAULT_ROLLOUT_TIMEOUT_SECONDS
from eval_pipelines.service.auth import ApiKeyRegistry
from eval_pipelines.service.taskgen_jobs import TaskGenerator
from eval_pipelines.taskgen.default import DefaultTaskGenerator

DEFAULT_MAX_ACTIVE_RUNS = 16
DEFAULT_RETRY_AFTER_SECONDS = 5
DEFAULT_MODEL_TEST_TIMEOUT = 8.0
DEFAULT_DRAIN_SECONDS = 10.0


@dataclass
class ServiceSettings:
    data_dir: Path
    api_keys: ApiKeyRegistry
    scenarios_dir: Path = field(default_factory=default_scenarios_dir)
    #: Runs executing at once; one more launch (or resume) gets 503 with Retry-After.
    max_active_runs: int = DEFAULT_MAX_ACTIVE_RUNS
    retry_after_seconds: int = DEFAULT_RETRY_AFTER_SECONDS
    #: len(task_ids) x rollout_count of one run (400 beyond it).
    max_rollouts_per_run: int = DEFAULT_MAX_ROLLOUTS_PER_RUN
    rollout_timeout_seconds: float = DEFAULT_ROLLOUT_TIMEOUT_SECONDS
    model_test_timeout_seconds: float = DEFAULT_MODEL_TEST_TIMEOUT
    #: On shutdown, how long active runs may finish before they are stopped (and failed, resumable).
    drain_seconds: float = DEFAULT_DRAIN_SECONDS
    task_generator: TaskGenerator = field(default_factory=DefaultTaskGenerator.from_environment)

    def __post_init__(self) -> None:
        if self.max_active_runs < 1:
            raise ValueError("max_active_runs must be at least 1")
        if self.rollout_timeout_seconds <= 0 or self.model_test_timeout_seconds <= 0:
            raise ValueError("timeouts must be positive")

    @classmethod
    def from_environment(
        cls,
        data_dir: Path,
        scenarios_dir: Path | None = None,
        environ: Mapping[str, str] | None = None,
        **overrides: object,
    ) -> ServiceSettings:
        """Keys from `EVAL_SERVICE_API_KEYS` / `EVAL_SERVICE_KEYS_FILE` (see service.auth)."""
        return cls(
            data_dir=data_dir,
            api_keys=ApiKeyRegistry.from_environment(environ),
            scenarios_dir=scenarios_dir or default_scenarios_dir(),
            **overrides,  # type: ignore[arg-type]
        )
