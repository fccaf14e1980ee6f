"""What keeps the pipeline fresh under the daemon: one schedule per sweep config with a cron, the sensors that keep
partitions in sync with the configs and re-verify a scenario whose verifiers changed, and the sensor that evaluates
the assets' automation conditions (on by default).

Who launches what, so that no pair is launched twice and none is lost:
- a sweep with a `cron`: its schedule, which registers the partitions it launches in the same tick;
- a sweep without one: the CLI, the UI, or `sync_sweep_partitions` for pairs added to its config later;
- re-verification: `reverify_changed_verifiers`, per scenario;
- everything downstream (rubric judging, the dataset, judgements, the catalog, the report): `eval_automation`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence

import dagster as dg

from eval_pipelines.benchmarks.catalog import ensure_materialised
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG, verification
from eval_pipelines.defs.evals.cli_runs import fail_abandoned_cli_runs
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.inputs.paths import data_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError
from eval_pipelines.inputs.sweeps import (
    ConfigError,
    default_sweep_id,
    load_all_sweeps,
    scheduled_sweep_id,
    sweep_scenarios,
)
from eval_pipelines.pipeline.reverification import stale_partitions, verifier_versions
from eval_pipelines.pipeline.schedule_pace import RunSpan, last_sweep_seconds, pace_warning
from eval_pipelines.schemas.sweep import SweepConfig
from eval_pipelines.warehouse.store import Warehouse

#: Run tag of a re-verification run: the scenario's verifier version it verifies at.
REVERIFY_TAG = "eval_pipelines/reverify"
#: How often the sensors run (seconds); the daemon never evaluates a sensor more often than this.
SENSOR_INTERVAL_ENV = "EVAL_PIPELINES_SENSOR_INTERVAL_SECONDS"
DEFAULT_SENSOR_INTERVAL_SECONDS = 30
#: Runs of these statuses hold a partition: a new-pair launch waits for them rather than racing them.
_IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]
#: Runs of a sweep a schedule's tick reads to tell whether its cron fires faster than its runs finish.
PACE_RUNS_READ = 500


def sensor_interval_seconds() -> int:
    raw = os.environ.get(SENSOR_INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_SENSOR_INTERVAL_SECONDS
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{SENSOR_INTERVAL_ENV}={raw!r}: expected a whole number of seconds, at least 1")
    return int(raw)


sweep_job = dg.define_asset_job(
    "sweep_partition",
    selection=dg.AssetSelection.assets("eval_run", "rollouts", "verification"),
    description="One scenario x model of a sweep: launch, execute and verify its rollouts.",
    # A partition's steps run one after another anyway; in one process they share one embedded evaluation
    # service, started once per run by the eval_service resource. Partitions run in parallel as separate runs.
    executor_def=dg.in_process_executor,
)

reverify_job = dg.define_asset_job(
    "reverify_partition",
    selection=dg.AssetSelection.assets(verification),
    description="Re-verifies one scenario x model's stored rollouts with the scenario's current verifiers (no "
    "agent, model or tool server runs).",
    executor_def=dg.in_process_executor,
)


def sweep_partition_keys(sweep: SweepConfig, catalog: ScenarioCatalog | None = None) -> list[dg.MultiPartitionKey]:
    scenarios = sweep_scenarios(
        sweep, catalog or ScenarioCatalog(), source=f"sweep {sweep.name!r}", prepare=ensure_materialised
    )
    return [partition_of(m.name, s.scenario_id) for s in scenarios for m in sweep.models]


def _missing_partitions(instance: dg.DagsterInstance, keys: Iterable[dg.MultiPartitionKey]) -> dict[str, list[str]]:
    """The dimension keys of `keys` the instance does not have yet, per dynamic partitions definition name."""
    wanted = {MODELS.name or "models": set[str](), SCENARIOS.name or "scenarios": set[str]()}
    for key in keys:
        dims = key.keys_by_dimension
        wanted[MODELS.name or "models"].add(dims["model"])
        wanted[SCENARIOS.name or "scenarios"].add(dims["scenario"])
    return {
        name: sorted(k for k in values if not instance.has_dynamic_partition(name, k))
        for name, values in wanted.items()
    }


def register_partitions(instance: dg.DagsterInstance, keys: Iterable[dg.MultiPartitionKey]) -> None:
    """Adds the models and scenarios of `keys` that the instance lacks, so a run request for them is valid now
    (instead of after the next `sync_sweep_partitions` tick)."""
    for name, new in _missing_partitions(instance, keys).items():
        if new:
            instance.add_dynamic_partitions(name, new)


def sweep_run_requests(
    sweep: SweepConfig, sweep_id: str, keys: Sequence[dg.MultiPartitionKey] | None = None
) -> list[dg.RunRequest]:
    return [
        dg.RunRequest(
            run_key=f"{sweep_id}:{key}",
            partition_key=key,
            tags={SWEEP_TAG: sweep.name, SWEEP_ID_TAG: sweep_id},
        )
        for key in (sweep_partition_keys(sweep) if keys is None else keys)
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
    def _schedule(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        # The config is read at the tick, not at code-location load: a model added a second before is in it.
        try:
            current = load_all_sweeps().get(sweep.name, sweep)
            keys = sweep_partition_keys(current)
        except ConfigError as exc:
            return dg.SkipReason(str(exc))
        register_partitions(context.instance, keys)
        warning = schedule_pace_warning(context.instance, current)
        if warning is not None:
            context.log.warning(warning)
        return sweep_run_requests(current, scheduled_sweep_id(current, context.scheduled_execution_time), keys)

    return _schedule


def schedule_pace_warning(instance: dg.DagsterInstance, sweep: SweepConfig) -> str | None:
    """The warning a tick of `sweep`'s schedule logs when its cron fires faster than its runs finish: runs of
    earlier ticks still queued or running, or a last sweep (its runs' first start to last end) longer than the
    cron's shortest interval (`pipeline/schedule_pace.py`). None when neither holds."""
    if sweep.cron is None:
        return None
    records = instance.get_run_records(filters=dg.RunsFilter(tags={SWEEP_TAG: sweep.name}), limit=PACE_RUNS_READ)
    spans = []
    unfinished = 0
    for record in records:
        sweep_id = record.dagster_run.tags.get(SWEEP_ID_TAG)
        running = record.dagster_run.status in _IN_FLIGHT
        unfinished += running
        if sweep_id is not None and (running or record.end_time is not None):
            spans.append(RunSpan(sweep_id, record.start_time, None if running else record.end_time))
    return pace_warning(
        sweep.name, sweep.cron, last_sweep_seconds=last_sweep_seconds(spans), unfinished_runs=unfinished
    )


def build_schedules(job: dg.UnresolvedAssetJobDefinition = sweep_job) -> list[dg.ScheduleDefinition]:
    """One schedule per sweep config with a cron, running `job` (in-process, or Celery in a deployment)."""
    try:
        sweeps = load_all_sweeps()
    except ConfigError:
        return []  # the sensor reports the broken config; the code location still loads
    return [_schedule_for(s, job) for s in sweeps.values() if s.cron]


def _in_flight(instance: dg.DagsterInstance, key: dg.MultiPartitionKey) -> bool:
    runs = instance.get_run_records(
        filters=dg.RunsFilter(tags={"dagster/partition": str(key)}, statuses=_IN_FLIGHT), limit=1
    )
    return bool(runs)


def _new_pair_requests(
    instance: dg.DagsterInstance,
    sweeps: dict[str, SweepConfig],
    keys_by_sweep: dict[str, list[dg.MultiPartitionKey]],
    known: set[str],
) -> list[dg.RunRequest]:
    """Run requests for pairs of sweeps without a cron that appeared in a config since the last tick (a sweep
    with a cron gets them from its schedule)."""
    requests: list[dg.RunRequest] = []
    materialised = instance.get_materialized_partitions(dg.AssetKey("rollouts"))
    for name in sorted(sweeps):
        sweep = sweeps[name]
        if sweep.cron:
            continue
        keys = keys_by_sweep[name]
        fresh = [k for k in keys if str(k) not in known and str(k) not in materialised and not _in_flight(instance, k)]
        requests.extend(sweep_run_requests(sweep, default_sweep_id(sweep), fresh))
    return requests


def build_sync_sensor(job: dg.UnresolvedAssetJobDefinition = sweep_job) -> dg.SensorDefinition:
    """The sensor that keeps partitions in sync with the sweep configs; new pairs run as `job`."""

    @dg.sensor(
        name="sync_sweep_partitions",
        job=job,
        minimum_interval_seconds=sensor_interval_seconds(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Adds the model and scenario partitions named by the sweep configs, and runs the pairs added "
        "to a sweep without a cron since it last looked (a sweep with a cron runs them at its next tick).",
    )
    def sync_sweep_partitions(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        try:
            sweeps = load_all_sweeps()
            catalog = ScenarioCatalog()  # scanned once per tick, for every sweep
            keys_by_sweep = {name: sweep_partition_keys(sweep, catalog) for name, sweep in sweeps.items()}
        except (ConfigError, ScenarioError) as exc:  # a broken config or scenario: said in the tick, file named
            return dg.SkipReason(str(exc))
        keys = [k for sweep_keys in keys_by_sweep.values() for k in sweep_keys]
        missing = _missing_partitions(context.instance, keys)
        known = set(json.loads(context.cursor)) if context.cursor else set()
        seen = {str(k) for k in keys}
        # The first tick only learns the pairs: the configs' existing pairs are the CLI's or a schedule's.
        requests = [] if context.cursor is None else _new_pair_requests(context.instance, sweeps, keys_by_sweep, known)
        if not requests and not any(missing.values()) and seen == known:
            return dg.SkipReason("partitions already match the sweep configs")
        return dg.SensorResult(
            run_requests=requests,
            dynamic_partitions_requests=_add_requests(missing),
            cursor=json.dumps(sorted(seen)),
        )

    return sync_sweep_partitions


def _add_requests(missing: dict[str, list[str]]) -> list[dg.AddDynamicPartitionsRequest]:
    return [
        MODELS.build_add_request(missing[MODELS.name or "models"]),
        SCENARIOS.build_add_request(missing[SCENARIOS.name or "scenarios"]),
    ]


@dg.sensor(
    name="reverify_changed_verifiers",
    job=reverify_job,
    minimum_interval_seconds=sensor_interval_seconds(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="When a scenario's verifiers change, re-verifies that scenario's stored partitions (and no other "
    "scenario's): one run per model x scenario whose rollouts lack verdicts at the new verifier version.",
)
def reverify_changed_verifiers(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    catalog = ScenarioCatalog()
    try:
        versions = verifier_versions(catalog)
    except (OSError, ScenarioError) as exc:
        return dg.SkipReason(f"the scenario catalog cannot be read: {exc}")
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    # Hashing the verifier sources is cheap; reading the warehouse is not, so only changed scenarios are read
    # (all of them on the first tick, which catches edits made while the daemon was down).
    changed = sorted(s for s, v in versions.items() if seen.get(s) != v)
    if not changed:
        return dg.SkipReason("no scenario's verifiers changed")
    stale = stale_partitions(Warehouse(data_dir() / "warehouse"), catalog, scenario_ids=changed)
    keys = [partition_of(p.model_key, p.scenario.scenario_id) for p in stale]
    missing = _missing_partitions(context.instance, keys)
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                # once per partition and verifier version: a failed re-verification is not retried in a loop
                run_key=f"reverify:{key}:{p.verifier_version}",
                partition_key=key,
                tags={REVERIFY_TAG: p.verifier_version},
            )
            for key, p in zip(keys, stale, strict=True)
        ],
        dynamic_partitions_requests=_add_requests(missing),
        cursor=json.dumps(versions, sort_keys=True),
    )


#: Evaluates every asset's automation condition; on by default (Dagster's own default sensor is off by default,
#: and with it the catalog and report would never rebuild after a scheduled run).
eval_automation = dg.AutomationConditionSensorDefinition(
    "eval_automation",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=sensor_interval_seconds(),
    description="Rebuilds what depends on new verdicts: rubric judging, the assessment dataset, judgements (only "
    "when what the judges read changed), the DuckDB catalog and the HTML report.",
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


def build_sensors(job: dg.UnresolvedAssetJobDefinition = sweep_job) -> list[dg.SensorDefinition]:
    """Every sensor of the code location; new sweep pairs run as `job` (in-process, or Celery in a deployment)."""
    return [build_sync_sensor(job), reverify_changed_verifiers, eval_automation, abandoned_cli_runs]
