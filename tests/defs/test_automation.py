"""Partition sync, declarative automation of new pairs, and the per-sweep schedules."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines.definitions import build_definitions
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.automation import build_schedules, sync_sweep_partitions
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of

SWEEP = """
name: nightly
scenarios: ["email_ops:1.0.0"]
models:
{models}
cron: "0 2 * * *"
"""
MODEL = "  - {{name: {name}, model: sim-oracle, base_url: 'sim://local'}}"


def _write(sweeps: Path, *names: str) -> None:
    (sweeps / "nightly.yaml").write_text(SWEEP.format(models="\n".join(MODEL.format(name=n) for n in names)))


@pytest.fixture
def sweeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "sweeps"
    folder.mkdir()
    monkeypatch.setenv("EVAL_PIPELINES_SWEEPS_DIR", str(folder))
    return folder


def _sync(instance: dg.DagsterInstance) -> dg.SensorResult | dg.SkipReason:
    result = sync_sweep_partitions(dg.build_sensor_context(instance=instance))
    assert isinstance(result, (dg.SensorResult, dg.SkipReason))
    if isinstance(result, dg.SensorResult):
        for request in result.dynamic_partitions_requests or []:
            assert isinstance(request, dg.AddDynamicPartitionsRequest)
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


def test_adding_a_model_materialises_exactly_the_new_pairs(sweeps: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    _write(sweeps, "model-a")
    _sync(instance)
    assert instance.get_dynamic_partitions(MODELS.name or "") == ["model-a"]
    assert instance.get_dynamic_partitions(SCENARIOS.name or "") == ["email_ops_1.0.0"]
    assert isinstance(_sync(instance), dg.SkipReason)  # nothing new

    # The existing pair is already evaluated.
    existing = partition_of("model-a", "email_ops_1.0.0")
    for asset in ("eval_run", "rollouts", "verification"):
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=asset, partition=str(existing)))
    defs = build_definitions()
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert first.total_requested == 0 or all(
        not first.get_requested_partitions(dg.AssetKey(k)) for k in ("eval_run", "rollouts", "verification")
    )

    _write(sweeps, "model-a", "model-b")
    _sync(instance)
    second = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    new = str(partition_of("model-b", "email_ops_1.0.0"))
    assert {str(k) for k in second.get_requested_partitions(dg.AssetKey("eval_run"))} == {new}
    assert {str(k) for k in second.get_requested_partitions(dg.AssetKey("rollouts"))} <= {new}
    assert {str(k) for k in second.get_requested_partitions(dg.AssetKey("verification"))} <= {new}


def test_schedule_requests_every_pair_of_its_sweep(sweeps: Path) -> None:
    _write(sweeps, "model-a", "model-b")
    (built,) = build_schedules()
    assert built.name == "sweep_nightly"
    defs = build_definitions()
    schedule = defs.resolve_schedule_def("sweep_nightly")
    assert schedule.cron_schedule == "0 2 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    when = dt.datetime(2026, 11, 23, 2, 0, tzinfo=dt.UTC)
    context = dg.build_schedule_context(instance=dg.DagsterInstance.ephemeral(), scheduled_execution_time=when)
    requests = list(schedule(context))  # type: ignore[call-overload]
    assert {str(r.partition_key) for r in requests} == {
        str(partition_of("model-a", "email_ops_1.0.0")),
        str(partition_of("model-b", "email_ops_1.0.0")),
    }
    assert {r.tags[SWEEP_ID_TAG] for r in requests} == {"nightly-20261123"}
    assert {r.tags[SWEEP_TAG] for r in requests} == {"nightly"}
    assert len({r.run_key for r in requests}) == 2  # one run per pair per scheduled day
