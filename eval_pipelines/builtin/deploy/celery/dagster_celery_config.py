"""Celery settings for dagster-celery workers, read from the environment when a worker starts.

`dagster_celery.app` imports a module of this name when it is on PYTHONPATH, so start workers with
`PYTHONPATH=celery celery -A dagster_celery.app worker -Q dagster ...` from a project made by
`eval-pipelines init --celery` (it writes this file to celery/ and the command to celery/worker.sh), or with
`PYTHONPATH=deploy/celery` from the repository (deploy/celery/README.md). Unlike
`dagster-celery worker start -y <file>`, which writes the resolved broker URL into a file under DAGSTER_HOME,
nothing here is persisted: a broker password stays in the environment.
"""

import os

_BROKER_URL_ENV = "DAGSTER_CELERY_BROKER_URL"
_BACKEND_URL_ENV = "DAGSTER_CELERY_BACKEND_URL"

try:
    broker_url = os.environ[_BROKER_URL_ENV]
    result_backend = os.environ[_BACKEND_URL_ENV]
except KeyError as missing:
    raise RuntimeError(
        f"set {missing.args[0]} for the Celery worker (e.g. redis://127.0.0.1:6379/0 and redis://127.0.0.1:6379/1, "
        "or amqp://guest:guest@127.0.0.1:5672// with rpc://); the sweep job reads the same variables"
    ) from None

# One step at a time per worker process: a `rollouts` step is long and LLM-bound, and prefetching a second
# one would starve the other workers.
worker_prefetch_multiplier = 1
# Early acknowledgement (Celery's default) on purpose: with late acks the Redis broker re-delivers a step that
# runs longer than its visibility timeout (1 h) to a second worker while the first is still executing it, and a
# rollouts step can run that long. The price: a worker process killed mid-step fails the step (WorkerLostError),
# but a whole worker host lost mid-step loses it, and the run waits until it is cancelled or reaches its
# `dagster/max_runtime` tag; re-launching the partition then resumes only the missing rollouts.
task_acks_late = False
broker_connection_retry_on_startup = True
