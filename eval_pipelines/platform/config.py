"""Settings of the local assessment platform: where it stores data, who may call it, which models it uses."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.platform.auth import TokenRegistry
from eval_pipelines.platform.models import ModelRegistry
from eval_pipelines.schemas.platform import DEFAULT_JUDGE_CONCURRENCY, DEFAULT_JUDGE_TIMEOUT_SECONDS

DEFAULT_MAX_UPLOAD_BYTES = 50 * 1024 * 1024
#: Upper bound of len(examples) x multiplier per synthetic-data request (the spec sets none).
DEFAULT_MAX_SYNTH_ROWS = 1000


def platform_store_path(data_dir: Path) -> Path:
    return data_dir / "platform" / "platform.sqlite3"


@dataclass(frozen=True)
class PlatformSettings:
    data_dir: Path
    tokens: TokenRegistry
    models: ModelRegistry = field(default_factory=ModelRegistry.defaults)
    judge_concurrency: int = DEFAULT_JUDGE_CONCURRENCY
    #: The defaults of an assessment run that sets no judge timeout or concurrency of its own (the sweep's
    #: `platform_judges` sets them per run); also the synthetic-data generator's.
    model_timeout_seconds: float = DEFAULT_JUDGE_TIMEOUT_SECONDS
    model_retry: RetryPolicy = field(default_factory=RetryPolicy.for_llm)
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    max_synth_rows: int = DEFAULT_MAX_SYNTH_ROWS

    def __post_init__(self) -> None:
        if self.judge_concurrency < 1:
            raise ValueError("judge_concurrency must be at least 1")
        if self.model_timeout_seconds <= 0:
            raise ValueError("model_timeout_seconds must be positive")

    @property
    def store_path(self) -> Path:
        return platform_store_path(self.data_dir)

    @classmethod
    def from_env(cls, data_dir: Path, environ: Mapping[str, str] | None = None) -> PlatformSettings:
        """Tokens from PLATFORM_TOKENS / PLATFORM_TOKENS_FILE, models from PLATFORM_MODELS_FILE."""
        env = os.environ if environ is None else environ
        return cls(data_dir=data_dir, tokens=TokenRegistry.from_env(env), models=ModelRegistry.from_env(env))
