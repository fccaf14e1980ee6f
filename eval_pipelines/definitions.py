"""The Dagster code location: `dagster dev -w workspace.yaml` loads `defs` from here.

`build_assets` and `assets_by_name` are re-exported for callers that load the code location's assets."""

from __future__ import annotations

import dagster as dg

from eval_pipelines.defs.evals.assets import build_error_check, build_scores_check
from eval_pipelines.defs.evals.automation import build_schedules, build_sensors, reverify_job, sweep_job
from eval_pipelines.defs.evals.executors import celery_jobs, sweep_job_for_deployment
from eval_pipelines.defs.evals.gates import build_gate_checks
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from eval_pipelines.defs.registry import assets_by_name, build_assets


def build_definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=build_assets(),
        asset_checks=[build_scores_check(), build_error_check(), *build_gate_checks()],
        jobs=[sweep_job, *celery_jobs(), reverify_job],
        schedules=build_schedules(sweep_job_for_deployment()),
        sensors=build_sensors(sweep_job_for_deployment()),
        resources={"paths": EvalPaths(), "eval_service": EvalService(), "assessment_platform": AssessmentPlatform()},
    )


defs = build_definitions()

__all__ = ["assets_by_name", "build_assets", "build_definitions", "defs"]
