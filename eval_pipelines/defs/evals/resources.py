"""Resources: where the evaluation service is, and where the pipeline keeps its data."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import dagster as dg
from pydantic import Field

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.paths import data_dir
from eval_pipelines.scenarios.catalog import ScenarioCatalog, default_scenarios_dir
from eval_pipelines.schemas.sweep import SweepConfig
from eval_pipelines.sweeps import default_sweeps_dir, load_all_sweeps


def default_data_dir() -> str:
    return str(data_dir())


class EvalPaths(dg.ConfigurableResource):
    """Every path the pipeline reads or writes, under one data directory."""

    data_dir: str = Field(default_factory=default_data_dir)
    scenarios_dir: str = Field(default_factory=lambda: str(default_scenarios_dir()))
    sweeps_dir: str = Field(default_factory=lambda: str(default_sweeps_dir()))

    @property
    def root(self) -> Path:
        return Path(self.data_dir)

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def duckdb(self) -> Path:
        return self.root / "eval.duckdb"

    @property
    def traces(self) -> Path:
        return self.root / "artifacts"

    def catalog(self) -> ScenarioCatalog:
        return ScenarioCatalog(Path(self.scenarios_dir))

    def sweeps(self) -> dict[str, SweepConfig]:
        return load_all_sweeps(Path(self.sweeps_dir))


class EvalService(dg.ConfigurableResource):
    """Selects the evaluation service: `embedded` (default, in-process over the local store and engine) or
    `http` (any server speaking spec 000 at `base_url`; the key comes from an EnvVar and is never shown)."""

    backend: Literal["embedded", "http"] = "embedded"
    base_url: str | None = None
    api_key: str | None = None
    data_dir: str = Field(default_factory=default_data_dir)
    scenarios_dir: str = Field(default_factory=lambda: str(default_scenarios_dir()))

    def get_backend(self) -> EvaluationBackend:
        if self.backend == "embedded":
            from eval_pipelines.service.embedded import EmbeddedEvaluationService

            return EmbeddedEvaluationService(Path(self.data_dir), ScenarioCatalog(Path(self.scenarios_dir)))
        if not self.base_url or not self.api_key:
            raise ValueError("eval_service: the http backend needs base_url and api_key (EnvVar EVAL_SERVICE_API_KEY)")
        from eval_pipelines.clients.http_backend import HttpEvaluationBackend

        return HttpEvaluationBackend(self.base_url, self.api_key)
