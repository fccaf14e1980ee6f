"""The Dagster code location: `dagster dev -w workspace.yaml` loads `defs` from here."""

from __future__ import annotations

import dagster as dg

from eval_pipelines.defs.assessment.assets import ASSESSMENT_ASSETS
from eval_pipelines.defs.evals.assets import (
    build_error_check,
    build_scores_check,
    build_verification_asset,
    eval_catalog,
    eval_run,
    rollouts,
    rubric_verification,
    verifiers_code_version,
)
from eval_pipelines.defs.evals.automation import abandoned_cli_runs, build_schedules, sweep_job, sync_sweep_partitions
from eval_pipelines.defs.evals.executors import celery_sweep_job, sweep_job_for_deployment
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from eval_pipelines.defs.taskgen.assets import generated_tasks
from eval_pipelines.scenarios.catalog import ScenarioCatalog


def build_assets() -> list[dg.AssetsDefinition]:
    """The assets, unbound, in a stable order: eval_run, rollouts, verification, eval_catalog, then the
    assessment assets. `verification`'s code version is read from the verifier sources each time
    this runs (each code-location load), which is what lets a verifier edit trigger re-verification."""
    verification = build_verification_asset(verifiers_code_version(ScenarioCatalog()))
    return [eval_run, rollouts, verification, eval_catalog, *ASSESSMENT_ASSETS, generated_tasks, rubric_verification]


def assets_by_name() -> dict[str, dg.AssetsDefinition]:
    return {a.key.to_user_string(): a for a in build_assets()}


def build_definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=build_assets(),
        asset_checks=[build_scores_check(), build_error_check()],
        jobs=[sweep_job, celery_sweep_job],
        schedules=build_schedules(sweep_job_for_deployment()),
        sensors=[sync_sweep_partitions, abandoned_cli_runs],
        resources={"paths": EvalPaths(), "eval_service": EvalService(), "assessment_platform": AssessmentPlatform()},
    )


defs = build_definitions()
