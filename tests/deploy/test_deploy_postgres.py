"""A small sweep on a Dagster instance stored in PostgreSQL (deploy/postgres/dagster.yaml, filled in from the
environment): runs, event logs and dynamic partitions are asserted in Postgres's own tables."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_pipelines.definitions import build_assets
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from tests.deploy.conftest import SCENARIO_KEY, PostgresHome, sweep_pools, tiny_sweep

pytestmark = pytest.mark.services

MODELS_UNDER_TEST = ["sim-oracle", "sim-noop"]


def test_a_sweep_lives_in_postgres(postgres_home: PostgresHome) -> None:
    (postgres_home.sweeps_dir / "pg.yaml").write_text(tiny_sweep("pg", [(m, m) for m in MODELS_UNDER_TEST]))
    resources = {
        "paths": EvalPaths(data_dir=str(postgres_home.data_dir), sweeps_dir=str(postgres_home.sweeps_dir)),
        "eval_service": EvalService(data_dir=str(postgres_home.data_dir)),
        "assessment_platform": AssessmentPlatform(data_dir=str(postgres_home.data_dir)),
    }
    with dg.DagsterInstance.get() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        # The shared blocks of the file took effect on this instance too.
        limits = instance.get_concurrency_config().run_queue_config
        assert limits is not None and limits.tag_concurrency_limits[0]["key"] == "dagster/partition/model"
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] == 300

        instance.add_dynamic_partitions(MODELS.name or "", MODELS_UNDER_TEST)
        instance.add_dynamic_partitions(SCENARIOS.name or "", [SCENARIO_KEY])
        run_ids = []
        for model in MODELS_UNDER_TEST:
            result = dg.materialize(
                build_assets()[:3],
                partition_key=partition_of(model, SCENARIO_KEY),
                instance=instance,
                resources=resources,
                tags={SWEEP_TAG: "pg", SWEEP_ID_TAG: "pg-test"},
            )
            assert result.success
            run_ids.append(result.run_id)

    db = postgres_home.database
    runs = {str(run_id): str(status) for run_id, status in db.query("select run_id, status from runs")}
    assert runs == {run_id: "SUCCESS" for run_id in run_ids}
    tags = db.query(
        "select run_id, key, value from run_tags where key like 'dagster/partition/%%' or key = %s", SWEEP_ID_TAG
    )
    assert {(r, k, v) for r, k, v in tags if k == "dagster/partition/model"} == {
        (run_id, "dagster/partition/model", model) for run_id, model in zip(run_ids, MODELS_UNDER_TEST, strict=True)
    }
    assert {v for _, k, v in tags if k == SWEEP_ID_TAG} == {"pg-test"}

    materialised = db.query(
        "select asset_key, partition, count(*) from event_logs where dagster_event_type = 'ASSET_MATERIALIZATION' "
        "group by asset_key, partition"
    )
    assert {(str(key), str(part), count) for key, part, count in materialised} == {
        (f'["{asset}"]', f"{model}|{SCENARIO_KEY}", 1)
        for asset in ("eval_run", "rollouts", "verification")
        for model in MODELS_UNDER_TEST
    }
    (events_per_run,) = db.query("select count(distinct run_id) from event_logs where run_id = any(%s)", run_ids)
    assert events_per_run == (2,)

    # Pools live there too: each pool the sweep's steps used got its row at the instance's default limit.
    pool_rows = set(db.query('select concurrency_key, "limit" from concurrency_limits'))
    assert sweep_pools() and {(pool, 4) for pool in sweep_pools()} <= pool_rows

    partitions = db.query("select partitions_def_name, partition from dynamic_partitions")
    assert set(partitions) == {("models", m) for m in MODELS_UNDER_TEST} | {("scenarios", SCENARIO_KEY)}

    # Nothing fell back to the embedded SQLite storage.
    assert not list(postgres_home.path.rglob("*.db"))
