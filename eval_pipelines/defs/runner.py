"""Running sweeps through Dagster from a process (the CLI): the materialisations, and cleanup after a killed
sweep. The CLI stays Dagster-free and calls these. The CLI's instance is opened by `defs/instance.py`;
`eval-pipelines reverify` records through `defs/reverify.py`."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from eval_pipelines.defs.evals.assets import (
    SWEEP_ID_TAG,
    SWEEP_TAG,
    USER_ERROR_METADATA,
    build_error_check,
    build_scores_check,
)
from eval_pipelines.defs.evals.automation import register_partitions
from eval_pipelines.defs.evals.cli_runs import CLI_HOST_TAG, CLI_PID_TAG, Heartbeat, fail_abandoned_cli_runs
from eval_pipelines.defs.evals.gates import build_catalog_gate_checks
from eval_pipelines.defs.evals.partitions import SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from eval_pipelines.defs.instance import open_instance
from eval_pipelines.defs.registry import assets_by_name
from eval_pipelines.inputs.paths import data_dir, scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.lib.sweep_control import SweepStop
from eval_pipelines.local.services import local_evaluation_service
from eval_pipelines.schemas.sweep import SweepConfig, SweepModel

#: Set on a sweep's run that SIGINT or SIGTERM stopped, to the signal's name.
INTERRUPTED_TAG = "eval_pipelines/interrupted"
PARTITION_JOB = "__cli_sweep_partition"
CATALOG_JOB = "__cli_publish_catalog"
SERVICE_KEY_ENV = "EVAL_SERVICE_API_KEY"
PARTITION_STEPS = ("eval_run", "rollouts", "verification", "rubric_verification")
ASSESSMENT_STEPS = ("assessment_dataset", "judgements")
#: The CLI's progress bar is its view of a sweep; Dagster's event stream stays in its storage and UI.
QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _user_errors(result: dg.ExecuteInProcessResult) -> list[str]:
    """The causes of the run's step failures that were marked user errors (see `user_errors_are_final`)."""
    causes = []
    for event in result.all_events:
        data = event.step_failure_data if event.is_step_failure else None
        failure = data.user_failure_data if data is not None else None
        if failure is not None and USER_ERROR_METADATA in (failure.metadata or {}):
            causes.append(failure.description or "a user error")
    return causes


def _job_with_checks(
    steps: Sequence[dg.AssetsDefinition], resources: Mapping[str, object], name: str = PARTITION_JOB
) -> dg.JobDefinition:
    """The partition's steps and the checks on them, as one job: `dg.materialize` takes no asset checks."""
    defs = dg.Definitions(
        assets=steps,
        asset_checks=[build_scores_check(), build_error_check()],
        jobs=[dg.define_asset_job(name, selection=dg.AssetSelection.all())],
        resources=resources,
    )
    return defs.resolve_job_def(name)


def _publish_catalog(
    assets: Mapping[str, dg.AssetsDefinition],
    instance: dg.DagsterInstance,
    resources: Mapping[str, object],
    tags: Mapping[str, str],
) -> dg.ExecuteInProcessResult:
    """Materialise `eval_catalog` with its blocking gate checks (defs/evals/gates.py), for the sweep `tags` name:
    the gates' verdict is recorded in Dagster as it is for a daemon's run."""
    defs = dg.Definitions(
        assets=[assets["eval_catalog"]],
        asset_checks=build_catalog_gate_checks(),
        jobs=[dg.define_asset_job(CATALOG_JOB, selection=dg.AssetSelection.all())],
        resources=resources,
    )
    return defs.resolve_job_def(CATALOG_JOB).execute_in_process(
        instance=instance, tags=dict(tags), run_config=dict(QUIET_CONSOLE), raise_on_error=False
    )


def _cli_tags() -> dict[str, str]:
    """Tags that let `fail_abandoned_cli_runs` find this process's runs if it is killed."""
    return {CLI_PID_TAG: str(os.getpid()), CLI_HOST_TAG: socket.gethostname()}


def _execute_partition(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    partition_key: dg.MultiPartitionKey,
    tags: Mapping[str, str],
    run_config: Mapping[str, object] = QUIET_CONSOLE,
) -> dg.ExecuteInProcessResult:
    """One partition's run of `job` in this process, with a heartbeat while it runs."""
    run_id = str(uuid.uuid4())  # known before the run starts, so its heartbeat can tag it
    with Heartbeat(instance, run_id):
        return job.execute_in_process(
            partition_key=partition_key,
            instance=instance,
            run_id=run_id,
            tags=dict(tags),
            run_config=dict(run_config),
            raise_on_error=False,
        )


def register_scenario_partition(scenario_id: str) -> None:
    with open_instance() as instance:
        instance.add_dynamic_partitions(SCENARIOS.name or "scenarios", [scenario_id])


@dataclass
class SweepRun:
    """One sweep to materialise: which pairs, on which backend, with which run tags."""

    sweep: SweepConfig
    sweep_id: str
    scenarios: Sequence[ScenarioFiles]
    sweeps_dir: Path
    backend: str = "embedded"
    base_url: str | None = None
    skip_assessment: bool = False
    abandoned_runs: int = 0
    failures: list[str] = field(default_factory=list)
    #: failures that retrying cannot fix (a bad request, a broken configuration), one line each.
    user_errors: list[str] = field(default_factory=list)

    @property
    def pairs(self) -> list[tuple[SweepModel, ScenarioFiles]]:
        return [(m, s) for s in self.scenarios for m in self.sweep.models]

    def paths(self) -> EvalPaths:
        return EvalPaths(sweeps_dir=str(self.sweeps_dir))

    def eval_service(self) -> EvalService:
        if self.backend == "http":
            # The key is read through EnvVar at run time, so Dagster never shows it.
            return EvalService(backend="http", base_url=self.base_url, api_key=dg.EnvVar(SERVICE_KEY_ENV))
        return EvalService()

    def _local_service_held(self) -> contextlib.AbstractContextManager[object]:
        """The embedded service, held for the whole sweep: each partition's run then shares it instead of
        starting and stopping its own (see local/services.py)."""
        if self.backend == "http":
            return contextlib.nullcontext()
        return local_evaluation_service(data_dir(), scenarios_dir())

    def execute(self, on_pair: Callable[[SweepModel, ScenarioFiles], None], stop: SweepStop | None = None) -> list[str]:
        """Materialise every pair's partition (with the verification checks, as a Dagster-launched run has them),
        then the catalog; returns what failed (empty when all passed). Once `stop` is requested no further pair
        starts, and the runs it interrupted carry the signal in their tags."""
        assets = assets_by_name()
        steps = [assets[k] for k in PARTITION_STEPS + (() if self.skip_assessment else ASSESSMENT_STEPS)]
        resources = {
            "paths": self.paths(),
            "eval_service": self.eval_service(),
            "assessment_platform": AssessmentPlatform(),
        }
        partition_job = _job_with_checks(steps, resources)
        cli_tags = _cli_tags()
        with self._local_service_held(), open_instance() as instance:
            self.abandoned_runs = fail_abandoned_cli_runs(instance)
            register_partitions(instance, [partition_of(m.name, s.scenario_id) for m, s in self.pairs])
            for model, scenario in self.pairs:
                if stop is not None and stop.requested:
                    break
                on_pair(model, scenario)
                result = _execute_partition(
                    partition_job,
                    instance,
                    partition_of(model.name, scenario.scenario_id),
                    {SWEEP_TAG: self.sweep.name, SWEEP_ID_TAG: self.sweep_id, **cli_tags},
                )
                if stop is not None and stop.requested:
                    instance.add_run_tags(result.run_id, {INTERRUPTED_TAG: stop.signal_name})
                if not result.success:
                    self.failures.append(f"{model.name}|{scenario.scenario_id}")
                    self.user_errors.extend(
                        f"{model.name} x {scenario.scenario_id}: {cause}" for cause in _user_errors(result)
                    )
            sweep_tags = {SWEEP_TAG: self.sweep.name, SWEEP_ID_TAG: self.sweep_id, **cli_tags}
            catalog = _publish_catalog(assets, instance, resources, sweep_tags)
            # A failed gate fails the run too (a blocking check); the CLI reports that verdict itself.
            if not any(e.asset_key == dg.AssetKey("eval_catalog") for e in catalog.get_asset_materialization_events()):
                self.failures.append("eval_catalog")
        return self.failures
