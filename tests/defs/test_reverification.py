"""A verifier edit re-verifies every existing partition exactly once, from stored artifacts only."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_pipelines.definitions import build_assets, build_definitions
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from eval_pipelines.inputs.paths import scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from tests.support.scripted_llm import Script, create_scripted_app

PARTITIONS = [partition_of(m, "email_ops_1.0.0") for m in ("sim-oracle", "sim-noop")]


def _sweep(models_base_url: str) -> str:
    return (
        "name: rv\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        "task_ids: [email_ops_001, email_ops_002]\n"
        "rollout_count: 1\n"
        "models:\n"
        f"  - {{name: sim-oracle, model: sim-oracle, base_url: '{models_base_url}'}}\n"
        f"  - {{name: sim-noop, model: sim-noop, base_url: '{models_base_url}'}}\n"
    )


def _requested(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: object) -> tuple[set[str], object]:
    result = dg.evaluate_automation_conditions(
        defs=defs, instance=instance, asset_selection=dg.AssetSelection.assets("verification"), cursor=cursor
    )
    keys = {str(k) for k in result.get_requested_partitions(dg.AssetKey("verification"))}
    return keys, result.cursor


def test_verifier_edit_triggers_one_backfill_without_model_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: object
) -> None:
    scenarios = tmp_path / "scenarios"
    shutil.copytree(scenarios_dir() / "email_ops", scenarios / "email_ops")
    monkeypatch.setenv("EVAL_PIPELINES_SCENARIOS_DIR", str(scenarios))
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "rv.yaml").write_text(_sweep("sim://local"))
    data = tmp_path / "data"
    resources = {
        "paths": EvalPaths(data_dir=str(data), sweeps_dir=str(sweeps), scenarios_dir=str(scenarios)),
        "eval_service": EvalService(data_dir=str(data), scenarios_dir=str(scenarios)),
        "assessment_platform": AssessmentPlatform(data_dir=str(data)),
    }
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(MODELS.name or "", ["sim-oracle", "sim-noop"])
    instance.add_dynamic_partitions(SCENARIOS.name or "", ["email_ops_1.0.0"])

    defs = build_definitions()
    assets = build_assets()[:3]
    for key in PARTITIONS:
        result = dg.materialize(
            assets,
            partition_key=key,
            instance=instance,
            resources=resources,
            tags={SWEEP_TAG: "rv", SWEEP_ID_TAG: "rv-1"},
        )
        assert result.success
    requested, cursor = _requested(defs, instance, None)
    assert requested == set()  # everything is verified at the current version

    # Edit a verifier: the oracle now "fails" email_ops_001. From here on, any model call would fail loudly.
    failing = Script([{"status": 500}])
    model = serve(create_scripted_app(failing))  # type: ignore[operator]
    (sweeps / "rv.yaml").write_text(_sweep(f"{model.url}/v1"))
    (module,) = ScenarioCatalog(scenarios).get("email_ops:1.0.0").task("email_ops_001").verifiers
    verifier = scenarios / "email_ops" / "verifiers" / f"{module}.py"
    verifier.write_text(
        verifier.read_text() + "\n\ndef verify(run_artifacts):  # tightened\n    return False, 'tightened'\n"
    )

    reloaded = build_definitions()
    old_version = defs.resolve_assets_def("verification").code_versions_by_key[dg.AssetKey("verification")]
    new_version = reloaded.resolve_assets_def("verification").code_versions_by_key[dg.AssetKey("verification")]
    assert old_version != new_version

    requested, cursor = _requested(reloaded, instance, cursor)
    assert requested == {str(k) for k in PARTITIONS}
    verification = build_assets()[2]
    for key in PARTITIONS:
        assert dg.materialize([verification], partition_key=key, instance=instance, resources=resources).success
    requested, _ = _requested(reloaded, instance, cursor)
    assert requested == set()  # exactly once
    assert failing.requests == []  # re-verification made no model call

    catalog = build_assets()[3]
    assert dg.materialize([catalog], instance=instance, resources=resources).success
    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    versions = con.execute(
        "select count(distinct verifier_version) from verifications where task_id = 'email_ops_001' "
        "and model_name = 'sim-oracle'"
    ).fetchone()
    latest = con.execute(
        "select success from verifications_latest where task_id = 'email_ops_001' and model_name = 'sim-oracle'"
    ).fetchall()
    rate = con.execute("select pass_rate from pass_rates where model_name = 'sim-oracle'").fetchone()
    con.close()
    assert versions == (2,)
    assert latest == [(False,)]
    assert rate == (0.5,)  # email_ops_001 now fails, email_ops_002 still passes
