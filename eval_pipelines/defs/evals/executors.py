"""Executing sweep partitions across worker processes: the sweep job on dagster-celery.

Each step of a run (eval_run, rollouts, verification) becomes a Celery task that any worker listening on the
broker's `dagster` queue picks up. Workers need what the run needs: the same `DAGSTER_HOME` instance (Postgres,
deploy/postgres/dagster.yaml), the same data directory (`EVAL_PIPELINES_DATA_DIR`: a shared filesystem, or the
object-storage base URI once `EvalPaths` takes one) and this package importable. Start one with
`celery -A dagster_celery.app worker -Q dagster` and `deploy/celery/dagster_celery_config.py` on PYTHONPATH
(deploy/celery/README.md).

dagster-celery comes with the `celery` extra (`pip install 'eval_pipelines[celery]'`). Without it the code
location still loads, with the in-process `sweep_job` only: most deployments (the embedded default, the
K8sRunLauncher of deploy/k8s) never start a Celery worker, so they need not install Celery, kombu and redis.

The broker and the result backend come from the environment at run time, so a URL with a password never
lands in the job's config, the UI or the event log.
"""

from __future__ import annotations

import os

import dagster as dg

from eval_pipelines.defs.evals.automation import sweep_job

CELERY_SWEEP_JOB = "sweep_partition_celery"
BROKER_URL_ENV = "DAGSTER_CELERY_BROKER_URL"
BACKEND_URL_ENV = "DAGSTER_CELERY_BACKEND_URL"
#: `celery` routes the sweep schedules to `celery_sweep_job`; anything else keeps the in-process `sweep_job`.
EXECUTOR_ENV = "EVAL_PIPELINES_EXECUTOR"
CELERY_EXTRA_HINT = "pip install 'eval_pipelines[celery]'"


def _celery_executor_from_env() -> dg.ExecutorDefinition | None:
    """dagster-celery's executor with its broker and result backend bound to the environment, read when a run
    starts (the same variables `deploy/celery/dagster_celery_config.py` gives the workers, so both sides meet on
    one broker); None without the `celery` extra. Bound here rather than in the job's run config: a partitioned
    job's default run config is only applied to runs launched for a partition from a schedule, sensor or the UI,
    and `execute_job` would silently fall back to dagster-celery's default broker (RabbitMQ on localhost)."""
    try:
        from dagster_celery import celery_executor
    except ImportError:
        return None
    return celery_executor.configured(
        {"broker": {"env": BROKER_URL_ENV}, "backend": {"env": BACKEND_URL_ENV}},
        name="celery_from_env",
    )


celery_executor_from_env = _celery_executor_from_env()

#: None when dagster-celery is not installed.
celery_sweep_job: dg.UnresolvedAssetJobDefinition | None = (
    None
    if celery_executor_from_env is None
    else dg.define_asset_job(
        CELERY_SWEEP_JOB,
        selection=sweep_job.selection,
        executor_def=celery_executor_from_env,
        description="One scenario x model of a sweep, its steps executed by Celery workers "
        f"(broker from ${BROKER_URL_ENV}, results from ${BACKEND_URL_ENV}).",
    )
)


def celery_jobs() -> list[dg.UnresolvedAssetJobDefinition]:
    """The jobs of the code location that run on Celery: `celery_sweep_job`, or none without the `celery` extra."""
    return [] if celery_sweep_job is None else [celery_sweep_job]


def sweep_job_for_deployment() -> dg.UnresolvedAssetJobDefinition:
    """The job the sweep schedules launch: `celery_sweep_job` when `EVAL_PIPELINES_EXECUTOR=celery`.

    Asking for Celery without dagster-celery installed is refused (the code location does not load) rather than
    falling back to the in-process job: the deployment expects its workers to run the steps."""
    if os.environ.get(EXECUTOR_ENV, "").strip().lower() != "celery":
        return sweep_job
    if celery_sweep_job is None:
        raise RuntimeError(f"{EXECUTOR_ENV}=celery, but dagster-celery is not installed ({CELERY_EXTRA_HINT})")
    return celery_sweep_job


__all__ = [
    "BACKEND_URL_ENV",
    "BROKER_URL_ENV",
    "CELERY_EXTRA_HINT",
    "CELERY_SWEEP_JOB",
    "EXECUTOR_ENV",
    "celery_executor_from_env",
    "celery_jobs",
    "celery_sweep_job",
    "sweep_job_for_deployment",
]
