"""A verifier edit re-verifies only its own scenario's partitions, from stored artifacts only; the judges are not
asked again (what they read did not change); both verifier versions stay queryable."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_pipelines.definitions import build_definitions
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.automation import REVERIFY_TAG, reverify_changed_verifiers
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from eval_pipelines.defs.registry import assets_by_name
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from tests.support.scenarios import copy_builtin_scenarios
from tests.support.scripted_llm import Script, create_scripted_app

MODELS_UNDER_TEST = ("sim-oracle", "sim-noop")
SCENARIO_IDS = ("email_ops:1.0.0", "team_chat:1.0.0")
EDITED = "email_ops:1.0.0"
SWEEP_STEPS = ("eval_run", "rollouts", "verification", "assessment_dataset", "judgements")


def _sweep(models_base_url: str) -> str:
    return (
        "name: rv\n"
        f"scenarios: {list(SCENARIO_IDS)}\n"
        "task_ids: [email_ops_001, email_ops_002, team_chat_001]\n"
        "rollout_count: 1\n"
        "models:\n"
        + "".join(f"  - {{name: {m}, model: {m}, base_url: '{models_base_url}'}}\n" for m in MODELS_UNDER_TEST)
    )


def _reverify_tick(instance: dg.DagsterInstance, cursor: str | None) -> tuple[list[dg.RunRequest], str | None]:
    result = reverify_changed_verifiers(dg.build_sensor_context(instance=instance, cursor=cursor))
    if isinstance(result, dg.SkipReason):
        return [], cursor
    assert isinstance(result, dg.SensorResult)
    return list(result.run_requests or []), result.cursor


def _requested(
    defs: dg.Definitions, instance: dg.DagsterInstance, cursor: object
) -> tuple[dict[str, set[str]], object]:
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    keys = ("verification", "assessment_dataset", "judgements", "eval_catalog", "rubric_verification")
    requested = {k: {str(p) for p in result.get_requested_partitions(dg.AssetKey(k))} for k in keys}
    return {k: v for k, v in requested.items() if v}, result.cursor


@pytest.mark.slow
def test_a_verifier_edit_reverifies_only_its_scenario_and_asks_no_judge_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: object
) -> None:
    scenarios = copy_builtin_scenarios(tmp_path / "scenarios", SCENARIO_IDS)
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "rv.yaml").write_text(_sweep("sim://local"))
    data = tmp_path / "data"
    for env, path in (("SCENARIOS", scenarios), ("SWEEPS", sweeps), ("DATA", data)):
        monkeypatch.setenv(f"EVAL_PIPELINES_{env}_DIR", str(path))
    resources = {
        "paths": EvalPaths(data_dir=str(data), sweeps_dir=str(sweeps), scenarios_dir=str(scenarios)),
        "eval_service": EvalService(data_dir=str(data), scenarios_dir=str(scenarios)),
        "assessment_platform": AssessmentPlatform(data_dir=str(data)),
    }
    assets = assets_by_name()
    partitions = [partition_of(m, s) for s in SCENARIO_IDS for m in MODELS_UNDER_TEST]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODELS.name or "", list(MODELS_UNDER_TEST))
        instance.add_dynamic_partitions(SCENARIOS.name or "", list(SCENARIO_IDS))
        for key in partitions:
            result = dg.materialize(
                [assets[k] for k in SWEEP_STEPS],
                partition_key=key,
                instance=instance,
                resources=resources,
                tags={SWEEP_TAG: "rv", SWEEP_ID_TAG: "rv-1"},
            )
            assert result.success
        judgements_before = sorted(p.stat().st_mtime_ns for p in (data / "warehouse" / "judgements").rglob("*.parquet"))
        assert len(judgements_before) == len(partitions)

        defs = build_definitions()
        requests, sensor_cursor = _reverify_tick(instance, None)
        assert requests == []  # every stored rollout has a verdict at its scenario's current version
        _, automation_cursor = _requested(defs, instance, None)

        # Tighten one of email_ops' verifiers. From here on any model call fails loudly.
        failing = Script([{"status": 500}])
        model = serve(create_scripted_app(failing))  # type: ignore[operator]
        (sweeps / "rv.yaml").write_text(_sweep(f"{model.url}/v1"))
        (module,) = ScenarioCatalog(scenarios).get(EDITED).task("email_ops_001").verifiers
        verifier = scenarios / "email_ops" / "verifiers" / f"{module}.py"
        verifier.write_text(
            verifier.read_text() + "\n\ndef verify(run_artifacts):  # tightened\n    return False, 'no'\n"
        )

        requests, sensor_cursor = _reverify_tick(instance, sensor_cursor)
        assert {str(r.partition_key) for r in requests} == {str(partition_of(m, EDITED)) for m in MODELS_UNDER_TEST}
        assert _reverify_tick(instance, sensor_cursor)[0] == []  # once per version
        for request in requests:
            assert request.partition_key is not None
            result = dg.materialize(
                [assets["verification"]],
                partition_key=request.partition_key,
                instance=instance,
                resources=resources,
                tags=request.tags,
            )
            assert result.success
            assert REVERIFY_TAG in request.tags

        # Automation: the edited scenario's datasets are rebuilt (their labels changed), the catalog too...
        requested, automation_cursor = _requested(defs, instance, automation_cursor)
        edited = {str(partition_of(m, EDITED)) for m in MODELS_UNDER_TEST}
        assert requested.get("assessment_dataset") == edited
        assert "eval_catalog" in requested
        assert "verification" not in requested and "rubric_verification" not in requested
        for key in edited:
            dataset = dg.materialize(
                [assets["assessment_dataset"]], partition_key=key, instance=instance, resources=resources
            )
            assert dataset.success
        # ...but the judges are not asked again: the conversations they read are the same.
        requested, automation_cursor = _requested(defs, instance, automation_cursor)
        assert "judgements" not in requested, requested
        assert failing.requests == []  # re-verification made no model call
        assert sorted(p.stat().st_mtime_ns for p in (data / "warehouse" / "judgements").rglob("*.parquet")) == (
            judgements_before
        )

        # The condition does respond to what the judges read: a changed dataset is judged again.
        changed = str(partition_of("sim-oracle", "team_chat:1.0.0"))
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                asset_key="assessment_dataset", partition=changed, tags={"dagster/data_version": "other-rows"}
            )
        )
        requested, _ = _requested(defs, instance, automation_cursor)
        assert requested.get("judgements") == {changed}

        assert dg.materialize([assets["eval_catalog"]], instance=instance, resources=resources).success
    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    versions = dict(
        con.execute(
            "select task_id, count(distinct verifier_version) from verifications "
            "where model_name = 'sim-oracle' group by task_id"
        ).fetchall()
    )
    latest = con.execute(
        "select success from verifications_latest where task_id = 'email_ops_001' and model_name = 'sim-oracle'"
    ).fetchall()
    con.close()
    # email_ops_001's verifier has its old and its new version; the others were not re-verified (one version).
    assert versions == {"email_ops_001": 2, "email_ops_002": 1, "team_chat_001": 1}
    assert latest == [(False,)]
