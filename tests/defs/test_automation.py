"""Partition sync, the per-sweep schedules, and the automation conditions that pairs no sweep names never block."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines.definitions import build_definitions
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.automation import (
    SENSOR_INTERVAL_ENV,
    build_schedules,
    build_sync_sensor,
    sensor_interval_seconds,
)
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of

SWEEP = """
name: {name}
scenarios: [{scenarios}]
models:
{models}
{cron}
"""
MODEL = "  - {{name: {name}, model: sim-oracle, base_url: 'sim://local'}}"
NIGHTLY_CRON = 'cron: "0 2 * * *"'


def _write(
    sweeps: Path, *models: str, name: str = "nightly", scenarios: str = '"email_ops:1.0.0"', cron: str = ""
) -> None:
    text = SWEEP.format(
        name=name, scenarios=scenarios, models="\n".join(MODEL.format(name=m) for m in models), cron=cron
    )
    (sweeps / f"{name}.yaml").write_text(text)


@pytest.fixture
def sweeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "sweeps"
    folder.mkdir()
    monkeypatch.setenv("EVAL_PIPELINES_SWEEPS_DIR", str(folder))
    return folder


def _tick(instance: dg.DagsterInstance, cursor: str | None) -> tuple[list[dg.RunRequest], str | None]:
    """One evaluation of the sync sensor, its partition requests applied as the daemon would."""
    context = dg.build_sensor_context(instance=instance, cursor=cursor)
    result = build_sync_sensor()(context)
    if isinstance(result, dg.SkipReason):
        return [], cursor
    assert isinstance(result, dg.SensorResult)
    for request in result.dynamic_partitions_requests or []:
        assert isinstance(request, dg.AddDynamicPartitionsRequest)
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return list(result.run_requests or []), result.cursor


def test_the_sync_sensor_adds_partitions_and_runs_exactly_the_pairs_added_later(sweeps: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    _write(sweeps, "model-a")
    requests, cursor = _tick(instance, None)
    assert requests == []  # the pairs that were there before are the CLI's or a schedule's to run
    assert instance.get_dynamic_partitions(MODELS.name or "") == ["model-a"]
    # One spelling: the scenario partition is the scenario id users write and read everywhere else.
    assert instance.get_dynamic_partitions(SCENARIOS.name or "") == ["email_ops:1.0.0"]
    assert _tick(instance, cursor) == ([], cursor)

    _write(sweeps, "model-a", "model-b")
    requests, cursor = _tick(instance, cursor)
    assert [str(r.partition_key) for r in requests] == [str(partition_of("model-b", "email_ops:1.0.0"))]
    assert requests[0].tags[SWEEP_TAG] == "nightly"
    assert requests[0].tags[SWEEP_ID_TAG].startswith("nightly-")
    assert "model-b" in instance.get_dynamic_partitions(MODELS.name or "")
    assert _tick(instance, cursor)[0] == []  # requested once


def test_the_sync_sensor_leaves_a_cron_sweep_to_its_schedule_and_never_crosses_sweeps(sweeps: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    _write(sweeps, "model-a", cron=NIGHTLY_CRON)
    _write(sweeps, "model-c", name="adhoc", scenarios='"team_chat:1.0.0"')
    _, cursor = _tick(instance, None)
    _write(sweeps, "model-a", "model-b", cron=NIGHTLY_CRON)
    _write(sweeps, "model-c", "model-d", name="adhoc", scenarios='"team_chat:1.0.0"')
    requests, _ = _tick(instance, cursor)
    # model-b joined the cron sweep: its schedule runs it. model-d joined adhoc: only adhoc's scenario, never
    # the other sweep's (the model x scenario grid also holds model-d x email_ops, which no sweep asks for).
    assert [str(r.partition_key) for r in requests] == [str(partition_of("model-d", "team_chat:1.0.0"))]


def test_a_model_added_just_before_a_tick_runs_in_that_tick(sweeps: Path) -> None:
    _write(sweeps, "model-a", cron=NIGHTLY_CRON)
    defs = build_definitions()  # the code location was loaded with model-a only
    (built,) = build_schedules()
    assert built.name == "sweep_nightly"
    schedule = defs.resolve_schedule_def("sweep_nightly")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED

    _write(sweeps, "model-a", "model-b", cron=NIGHTLY_CRON)  # a second before the tick; no sensor ran since
    with dg.instance_for_test() as instance:  # the daemon's instance: one the schedule can write partitions to
        when = dt.datetime(2026, 11, 23, 2, 0, tzinfo=dt.UTC)
        # As a context manager, so the instance the context opens is closed with it.
        with dg.build_schedule_context(instance=instance, scheduled_execution_time=when) as context:
            requests = list(schedule(context))  # type: ignore[call-overload]
        _assert_valid_tick(requests, instance)


def _assert_valid_tick(requests: list[dg.RunRequest], instance: dg.DagsterInstance) -> None:
    expected = {str(partition_of(m, "email_ops:1.0.0")) for m in ("model-a", "model-b")}
    assert {str(r.partition_key) for r in requests} == expected
    assert {r.tags[SWEEP_ID_TAG] for r in requests} == {"nightly-20261123"}
    assert len({r.run_key for r in requests}) == 2  # one run per pair per scheduled day
    # Every requested partition exists when the tick ends, so the daemon can launch each run (without this the
    # tick failed on the new model's partition, and the day's sweep was lost).
    for request in requests:
        key = request.partition_key
        assert isinstance(key, dg.MultiPartitionKey)
        dims = key.keys_by_dimension
        assert instance.has_dynamic_partition(MODELS.name or "", dims["model"]), key
        assert instance.has_dynamic_partition(SCENARIOS.name or "", dims["scenario"]), key


def _evaluate(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: object) -> tuple[dict[str, set[str]], object]:
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    requested = {
        key.to_user_string(): {str(p) for p in result.get_requested_partitions(key)}
        for key in (dg.AssetKey(k) for k in ("eval_run", "rollouts", "verification", "eval_catalog", "eval_report"))
        if result.get_requested_partitions(key)
    }
    return requested, result.cursor


def test_pairs_no_sweep_names_are_never_run_and_never_hold_the_catalog_back(sweeps: Path) -> None:
    _write(sweeps, "model-a", scenarios='"email_ops:1.0.0"')
    _write(sweeps, "model-b", name="other", scenarios='"team_chat:1.0.0"')
    with dg.instance_for_test() as instance:
        _tick(instance, None)
        defs = build_definitions()
        requested, cursor = _evaluate(defs, instance, None)
        assert requested == {}

        swept = [partition_of("model-a", "email_ops:1.0.0"), partition_of("model-b", "team_chat:1.0.0")]
        for key in swept:
            for asset in ("eval_run", "rollouts", "verification"):
                instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=asset, partition=str(key)))
        requested, cursor = _evaluate(defs, instance, cursor)
        # model-a x team_chat and model-b x email_ops stay missing: nothing runs them, and the catalog and the
        # report rebuild anyway (unpartitioned: requested as the partition None).
        assert requested == {"eval_catalog": {"None"}, "eval_report": {"None"}}
        for asset in ("eval_catalog", "eval_report"):
            instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=asset))
        assert _evaluate(defs, instance, cursor)[0] == {}  # once


def test_the_sensor_interval_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "5")
    assert sensor_interval_seconds() == 5
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "soon")
    with pytest.raises(ValueError, match=SENSOR_INTERVAL_ENV):
        sensor_interval_seconds()


def test_a_broken_scenario_skips_the_sync_tick_naming_the_file(
    sweeps: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "scenarios" / "broken"
    broken.mkdir(parents=True)
    (broken / "template.json").write_text('{"scenario_id": "not a valid id!"}')
    monkeypatch.setenv("EVAL_PIPELINES_SCENARIOS_DIR", str(tmp_path / "scenarios"))
    _write(sweeps, "model-a", scenarios='"*"')
    result = build_sync_sensor()(dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral()))
    assert isinstance(result, dg.SkipReason)
    assert "template.json" in (result.skip_message or "")
