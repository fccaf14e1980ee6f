"""The code a Celery worker loads to execute a step of the sweep job (through `build_reconstructable_job`).

It assembles what `eval_pipelines.definitions` assembles, plus the Celery job; resources take their paths from
the environment (EVAL_PIPELINES_DATA_DIR, EVAL_PIPELINES_SWEEPS_DIR), which the workers inherit from the test.
Once the job is registered in `eval_pipelines.definitions`, production workers reconstruct it from there.

`python -m tests.deploy.celery_location MODEL SWEEP SWEEP_ID` runs one partition of the built-in scenario on
the instance in DAGSTER_HOME and prints `{"run_id", "success"}`: one process per run, as a run launcher would.
"""

from __future__ import annotations

import json
import sys

import dagster as dg

from eval_pipelines.definitions import build_assets
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.executors import CELERY_SWEEP_JOB, celery_sweep_job
from eval_pipelines.defs.evals.partitions import SCENARIO_MODEL, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService

SCENARIO_KEY = "email_ops:1.0.0"


def sweep_job_on_celery() -> dg.JobDefinition:
    defs = dg.Definitions(
        assets=build_assets(),
        jobs=[celery_sweep_job],
        resources={"paths": EvalPaths(), "eval_service": EvalService(), "assessment_platform": AssessmentPlatform()},
    )
    return defs.resolve_job_def(CELERY_SWEEP_JOB)


def run_partition(model: str, sweep: str, sweep_id: str) -> dict[str, object]:
    tags = {
        **SCENARIO_MODEL.get_tags_for_partition_key(partition_of(model, SCENARIO_KEY)),
        SWEEP_TAG: sweep,
        SWEEP_ID_TAG: sweep_id,
    }
    # By its import name: run as `python -m`, this module is `__main__`, which the workers cannot import.
    job = dg.build_reconstructable_job("tests.deploy.celery_location", sweep_job_on_celery.__name__)
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(job, instance=instance, tags=tags)
        return {"run_id": result.run_id, "success": result.success}


if __name__ == "__main__":
    print(json.dumps(run_partition(*sys.argv[1:4])))
