"""Resources: where the evaluation service is, and where the pipeline keeps its data."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Literal

import dagster as dg
from pydantic import Field, PrivateAttr

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.clients.evaluation import EvaluationClient, EvaluationClientSync
from eval_pipelines.clients.platform import PlatformTarget
from eval_pipelines.inputs.paths import data_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, default_scenarios_dir
from eval_pipelines.inputs.sweeps import default_sweeps_dir, load_all_sweeps
from eval_pipelines.local.services import local_evaluation_service, open_platform
from eval_pipelines.schemas.sweep import SweepConfig


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
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def report_html(self) -> Path:
        """Where the report asset writes, and `eval-pipelines report` by default."""
        return self.reports / "report.html"

    @property
    def traces(self) -> Path:
        return self.root / "artifacts"

    def catalog(self) -> ScenarioCatalog:
        return ScenarioCatalog(Path(self.scenarios_dir))

    def sweeps(self) -> dict[str, SweepConfig]:
        return load_all_sweeps(Path(self.sweeps_dir))


class EvalService(dg.ConfigurableResource):
    """Selects the evaluation service: `embedded` (default: the local service on a loopback port, started for the
    run and stopped at its teardown) or `http` (any server speaking spec 000 at `base_url`; the key comes from an
    EnvVar and is never shown). Either way the steps talk to it through the same client."""

    backend: Literal["embedded", "http"] = "embedded"
    base_url: str | None = None
    api_key: str | None = None
    data_dir: str = Field(default_factory=default_data_dir)
    scenarios_dir: str = Field(default_factory=lambda: str(default_scenarios_dir()))

    _open: ExitStack | None = PrivateAttr(default=None)
    _client: EvaluationBackend | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._open = ExitStack()
        if self.backend == "embedded":
            local = self._open.enter_context(local_evaluation_service(Path(self.data_dir), Path(self.scenarios_dir)))
            self._client = local.backend()
        else:
            if not self.base_url or not self.api_key:
                raise ValueError(
                    "eval_service: the http backend needs base_url and api_key (EnvVar EVAL_SERVICE_API_KEY)"
                )
            self._client = EvaluationBackend(EvaluationClientSync(EvaluationClient(self.base_url, self.api_key)))
        self._open.callback(self._client.close)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._open is not None:
            self._open.close()
        self._open = self._client = None

    def get_backend(self) -> EvaluationBackend:
        if self._client is None:
            raise RuntimeError("eval_service is set up only inside a Dagster run")
        return self._client


class AssessmentPlatform(dg.ConfigurableResource):
    """The assessment platform (spec 002) the assessment steps call: the hosted one when `PLATFORM_URL` is set
    (token and space from the environment, never shown), else the embedded local platform, started for the run
    and stopped at its teardown."""

    data_dir: str = Field(default_factory=default_data_dir)

    _open: ExitStack | None = PrivateAttr(default=None)
    _target: PlatformTarget | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._open = ExitStack()
        self._target = self._open.enter_context(open_platform(Path(self.data_dir)))

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._open is not None:
            self._open.close()
        self._open = self._target = None

    def target(self) -> PlatformTarget:
        if self._target is None:
            raise RuntimeError("assessment_platform is set up only inside a Dagster run")
        return self._target
