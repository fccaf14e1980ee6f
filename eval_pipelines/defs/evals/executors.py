"""Executing sweep partitions across worker processes: the sweep job on dagster-celery.

Each step of a run (eval_run, rollouts, verification) becomes a Celery task that any worker listening on the
broker's `dagster` queue picks up. Workers need what the run needs: the same `DAGSTER_HOME` instance (Postgres,
deploy/postgres/dagster.yaml), the same data directory (`EVAL_PIPELINES_DATA_DIR`: a shared filesystem, or the
object-storage base URI once `EvalPaths` takes one) and this package importable. Start one with
`celery -A dagster_celery.app worker -Q dagster` and `deploy/celery/dagster_celery_config.py` on PYTHONPATH
(deploy/celery/README.md).

The broker and the result backend come from the environment at run time, so a URL with a password never
lands in the job's config, the UI or the event log.
"""

from __future__ import annotations

import os

import dagster as dg
from dagster_celery import celery_executor

from eval_pipelines.defs.evals.automation import sweep_job

CELERY_SWEEP_JOB = "sweep_partition_celery"
BROKER_URL_ENV = "DAGSTER_CELERY_BROKER_URL"
BACKEND_URL_ENV = "DAGSTER_CELERY_BACKEND_URL"
#: `celery` routes the sweep schedules to `celery_sweep_job`; anything else keeps the in-process `sweep_job`.
EXECUTOR_ENV = "EVAL_PIPELINES_EXECUTOR"

#: dagster-celery's executor with its broker and result backend bound to the environment, read when a run starts
#: (the same variables `deploy/celery/dagster_celery_config.py` gives the workers, so both sides meet on one
#: broker). Bound here rather than in the job's run config: a partitioned job's default run config is only
#: applied to runs launched for a partition from a schedule, sensor or the UI, and `execute_job` would
#: silently fall back to dagster-celery's default broker (RabbitMQ on localhost).
celery_executor_from_env = celery_executor.configured(
    {"broker": {"env": BROKER_URL_ENV}, "backend": {"env": BACKEND_URL_ENV}},
    name="celery_from_env",
)

celery_sweep_job = dg.define_asset_job(
    CELERY_SWEEP_JOB,
    selection=sweep_job.selection,
    executor_def=celery_executor_from_env,
    description="One scenario x model of a sweep, its steps executed by Celery workers "
    f"(broker from ${BROKER_URL_ENV}, results from ${BACKEND_URL_ENV}).",
)


def sweep_job_for_deployment() -> dg.UnresolvedAssetJobDefinition:
    """The job the sweep schedules launch: `celery_sweep_job` when `EVAL_PIPELINES_EXECUTOR=celery`."""
    return celery_sweep_job if os.environ.get(EXECUTOR_ENV, "").strip().lower() == "celery" else sweep_job


__all__ = [
    "BACKEND_URL_ENV",
    "BROKER_URL_ENV",
    "CELERY_SWEEP_JOB",
    "EXECUTOR_ENV",
    "celery_executor_from_env",
    "celery_sweep_job",
    "sweep_job_for_deployment",
]
