"""Schedules (one per sweep config with a cron) and the sensor that keeps partitions in sync with the configs."""

from __future__ import annotations

import dagster as dg

from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.cli_runs import fail_abandoned_cli_runs
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.sweeps import ConfigError, default_sweep_id, load_all_sweeps, sweep_scenarios
from eval_pipelines.schemas.sweep import SweepConfig

sweep_job = dg.define_asset_job(
    "sweep_partition",
    selection=dg.AssetSelection.assets("eval_run", "rollouts", "verification"),
    description="One scenario x model of a sweep: launch, execute and verify its rollouts.",
    # A partition's steps run one after another anyway; in one process they share one embedded evaluation
    # service, started once per run by the eval_service resource. Partitions run in parallel as separate runs.
    executor_def=dg.in_process_executor,
)


def sweep_partition_keys(sweep: SweepConfig) -> list[dg.MultiPartitionKey]:
    scenarios = sweep_scenarios(sweep, ScenarioCatalog(), source=f"sweep {sweep.name!r}")
    return [partition_of(m.name, s.key) for s in scenarios for m in sweep.models]


def sweep_run_requests(sweep: SweepConfig, sweep_id: str) -> list[dg.RunRequest]:
    return [
        dg.RunRequest(
            run_key=f"{sweep_id}:{key}",
            partition_key=key,
            tags={SWEEP_TAG: sweep.name, SWEEP_ID_TAG: sweep_id},
        )
        for key in sweep_partition_keys(sweep)
    ]


def _schedule_for(sweep: SweepConfig, job: dg.UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    assert sweep.cron is not None

    @dg.schedule(
        name=f"sweep_{sweep.name.replace('-', '_').replace('.', '_')}",
        cron_schedule=sweep.cron,
        job=job,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Runs sweep {sweep.name!r} on its cron; every row it writes carries the sweep id.",
    )
    def _schedule(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest]:
        day = context.scheduled_execution_time.date()
        return sweep_run_requests(sweep, default_sweep_id(sweep, day))

    return _schedule


def build_schedules(job: dg.UnresolvedAssetJobDefinition = sweep_job) -> list[dg.ScheduleDefinition]:
    """One schedule per sweep config with a cron, running `job` (in-process, or Celery in a deployment)."""
    try:
        sweeps = load_all_sweeps()
    except ConfigError:
        return []  # the sensor reports the broken config; the code location still loads
    return [_schedule_for(s, job) for s in sweeps.values() if s.cron]


@dg.sensor(
    name="sync_sweep_partitions",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds the model and scenario partitions named by the sweep configs (launches nothing itself).",
)
def sync_sweep_partitions(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    try:
        sweeps = load_all_sweeps()
    except ConfigError as exc:
        return dg.SkipReason(str(exc))
    catalog = ScenarioCatalog()
    models = sorted({m.name for s in sweeps.values() for m in s.models})
    try:
        scenarios = sorted({f.key for s in sweeps.values() for f in sweep_scenarios(s, catalog, f"sweep {s.name!r}")})
    except ConfigError as exc:
        return dg.SkipReason(str(exc))
    instance = context.instance
    new_models = [m for m in models if not instance.has_dynamic_partition(MODELS.name or "models", m)]
    new_scenarios = [s for s in scenarios if not instance.has_dynamic_partition(SCENARIOS.name or "scenarios", s)]
    if not new_models and not new_scenarios:
        return dg.SkipReason("partitions already match the sweep configs")
    return dg.SensorResult(
        dynamic_partitions_requests=[MODELS.build_add_request(new_models), SCENARIOS.build_add_request(new_scenarios)]
    )


@dg.sensor(
    name="abandoned_cli_runs",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Fails runs a CLI sweep was executing when its process died (kill -9), and frees their pool "
    "slots: Dagster's run monitoring does not watch runs executed in the CLI's own process.",
)
def abandoned_cli_runs(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    failed = fail_abandoned_cli_runs(context.instance)
    return dg.SkipReason(f"failed {failed} abandoned CLI run(s)" if failed else "no abandoned CLI run")
