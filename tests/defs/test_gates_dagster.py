"""Acceptance: a test sweep where one pair's coverage is below the threshold. `eval_catalog`'s blocking
`gate_coverage` check fails in Dagster and the report is not refreshed in that run; the report's automation
condition waits for the gate; the CLI (the sweep's exit code and `eval-pipelines report`) exits 3 naming the gate.
Once the pair is run, the same run passes every gate and writes the report."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines.cli import EXIT_ERRORS, main, sweep_exit_code
from eval_pipelines.definitions import build_assets
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG, eval_catalog, eval_report, eval_run, rollouts
from eval_pipelines.defs.evals.gates import build_gate_checks, gate_check_name
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.sweeps import load_sweep
from eval_pipelines.pipeline.gates import GATES, Thresholds, planned_rollouts

pytestmark = pytest.mark.slow

SCENARIO = "email_ops:1.0.0"
SWEEP_ID = "tiny-20260101"  # `tiny`'s id of a day, as default_sweep_id makes it
SWEEP = f"""
name: tiny
scenarios: ["{SCENARIO}"]
task_ids: [email_ops_001, email_ops_002]
models:
  - {{name: sim-oracle, model: sim-oracle, base_url: "sim://local"}}
  - {{name: sim-noop, model: sim-noop, base_url: "sim://local"}}
rollout_count: 2
min_coverage: 0.9
"""
PUBLISH_JOB = "publish"


def _publish_job(resources: dict[str, object], assets: list[dg.AssetsDefinition] | None = None) -> dg.JobDefinition:
    """A job of `assets` (default: the catalog and the report) with their gate checks."""
    defs = dg.Definitions(
        assets=assets or [eval_catalog, eval_report],
        asset_checks=build_gate_checks(),
        jobs=[
            dg.define_asset_job(PUBLISH_JOB, selection=dg.AssetSelection.all() | dg.AssetSelection.all_asset_checks())
        ],
        resources=resources,
    )
    return defs.resolve_job_def(PUBLISH_JOB)


def _run_pair(instance: dg.DagsterInstance, resources: dict[str, object], model: str) -> None:
    verification = build_assets()[2]
    assert dg.materialize(
        [eval_run, rollouts, verification],
        partition_key=partition_of(model, SCENARIO),
        instance=instance,
        resources=resources,
        tags={SWEEP_TAG: "tiny", SWEEP_ID_TAG: SWEEP_ID},
    ).success


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_a_pair_below_coverage_holds_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVAL_PIPELINES_PROJECT_DIR", str(tmp_path))
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "tiny.yaml").write_text(SWEEP)
    data = tmp_path / "data"
    paths = EvalPaths(data_dir=str(data), sweeps_dir=str(sweeps))
    resources: dict[str, object] = {
        "paths": paths,
        "eval_service": EvalService(data_dir=str(data)),
        "assessment_platform": AssessmentPlatform(data_dir=str(data)),
    }
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(MODELS.name or "", ["sim-oracle", "sim-noop"])
    instance.add_dynamic_partitions(SCENARIOS.name or "", [SCENARIO])
    tags = {SWEEP_TAG: "tiny", SWEEP_ID_TAG: SWEEP_ID}

    # Only sim-oracle's pair runs: sim-noop x email_ops has 0 of its 4 planned rollouts scored.
    _run_pair(instance, resources, "sim-oracle")

    # The automation conditions' tick once the pair's verdicts are in: the report as defined, and with plain eager().
    gated = _AutomationTicks(instance, resources, eval_report)
    [eager_report] = dg.map_asset_specs(
        lambda spec: spec.replace_attributes(automation_condition=dg.AutomationCondition.eager()), [eval_report]
    )
    plain = _AutomationTicks(instance, resources, eager_report)

    # The catalog alone, with its gates, as the CLI's sweep builds it: the report's automation condition waits
    # for the failed gate instead of refreshing the report, where a plain eager condition would refresh it now.
    catalog_only = _publish_job(resources, [eval_catalog]).execute_in_process(
        instance=instance, tags=tags, raise_on_error=False
    )
    assert not _checks(catalog_only)[gate_check_name("coverage")].passed
    assert not gated.report_requested()
    assert plain.report_requested()

    # The catalog and the report in one run, as the automation sensor requests them: the report is skipped.
    held = _publish_job(resources).execute_in_process(instance=instance, tags=tags, raise_on_error=False)
    checks = _checks(held)
    assert set(checks) == {gate_check_name(g) for g in GATES}
    coverage = checks[gate_check_name("coverage")]
    assert not coverage.passed and coverage.blocking
    assert "sim-noop" in (coverage.description or "") and "0/4 planned rollouts scored" in (coverage.description or "")
    assert all(checks[gate_check_name(g)].passed for g in GATES if g != "coverage")
    # The catalog is built (the views are what the gate read); the report is not refreshed.
    assert [e.asset_key for e in held.get_asset_materialization_events()] == [dg.AssetKey("eval_catalog")]
    assert not paths.report_html.exists()
    assert instance.get_latest_materialization_event(dg.AssetKey("eval_report")) is None

    # The CLI: the sweep's exit code and `eval-pipelines report` say the same, naming the gate.
    sweep = load_sweep(sweeps / "tiny.yaml")
    planned = planned_rollouts(sweep, ScenarioCatalog())
    assert planned == {("sim-oracle", "email_ops_1.0.0"): 4, ("sim-noop", "email_ops_1.0.0"): 4}
    assert sweep_exit_code(paths.duckdb, SWEEP_ID, Thresholds.of(sweep), [], planned) == EXIT_ERRORS
    sweep_err = capsys.readouterr().err
    assert f"gate coverage failed for sweep {SWEEP_ID}: sim-noop" in sweep_err, sweep_err
    assert main(["report", "--db", str(paths.duckdb), "--out", str(paths.report_html)]) == EXIT_ERRORS
    report_err = capsys.readouterr().err
    assert _gate_lines(report_err) == _gate_lines(sweep_err) and len(_gate_lines(sweep_err)) == 2
    assert not paths.report_html.exists()

    # Once the pair has run, every gate passes and the same run writes the report.
    _run_pair(instance, resources, "sim-noop")
    published = _publish_job(resources).execute_in_process(instance=instance, tags=tags, raise_on_error=False)
    assert all(e.passed for e in published.get_asset_check_evaluations())
    assert {e.asset_key for e in published.get_asset_materialization_events()} == {
        dg.AssetKey("eval_catalog"),
        dg.AssetKey("eval_report"),
    }
    assert paths.report_html.is_file()
    assert sweep_exit_code(paths.duckdb, SWEEP_ID, Thresholds.of(sweep), [], planned) == 0


def _gate_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("eval-pipelines: ") and "gate" in ln]


class _AutomationTicks:
    """Ticks of the automation conditions of `eval_catalog` and `report` (as `eval_report`), each tick after the
    last one's cursor, as the automation sensor evaluates them."""

    def __init__(self, instance: dg.DagsterInstance, resources: dict[str, object], report: dg.AssetsDefinition):
        self.instance = instance
        self.defs = dg.Definitions(assets=[eval_catalog, report], asset_checks=build_gate_checks(), resources=resources)
        self.cursor = dg.evaluate_automation_conditions(defs=self.defs, instance=instance).cursor

    def report_requested(self) -> bool:
        result = dg.evaluate_automation_conditions(defs=self.defs, instance=self.instance, cursor=self.cursor)
        self.cursor = result.cursor
        return any(r.key == dg.AssetKey("eval_report") and r.true_subset.size > 0 for r in result.results)
