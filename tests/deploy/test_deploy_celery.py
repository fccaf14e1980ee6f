"""A sweep of 4 partitions executed by dagster-celery: 2 worker processes, the local Redis broker, the Postgres
instance of deploy/postgres/dagster.yaml. Both workers must execute steps, and the results (every rollout's
outcome, the verifiers' pass counts) must equal an in-process run of the same sweep."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest
import redis
from celery import Celery

from eval_pipelines.definitions import build_assets
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.executors import BACKEND_URL_ENV, BROKER_URL_ENV
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from tests.deploy.conftest import REPO, SCENARIO_KEY, PostgresHome, set_pool_limits, tiny_sweep

pytestmark = [pytest.mark.services, pytest.mark.slow]

REDIS_HOST = os.environ.get("EVAL_PIPELINES_TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("EVAL_PIPELINES_TEST_REDIS_PORT", "6379"))
CELERY = REPO / ".venv" / "bin" / "celery"
WORKERS = ("worker-a", "worker-b")
# sim-noisy is left out on purpose: its deviations are seeded by the rollout id, which differs between two runs.
SWEEP_MODELS = [
    ("sim-oracle", "sim-oracle"),
    ("sim-noop", "sim-noop"),
    ("sim-oracle-b", "sim-oracle"),
    ("sim-noop-b", "sim-noop"),
]
SWEEP_NAME = "celery"
SWEEP_ID = "celery-test"
READY_TIMEOUT_SECONDS = 90
STOP_TIMEOUT_SECONDS = 30
RUN_TIMEOUT_SECONDS = 300
POOL_LIMIT = 2  # below the 4 concurrent runs: steps queue for the pool across workers


@pytest.fixture
def broker_url() -> Iterator[str]:
    """An empty Redis database of its own (another session's workers on the same Redis must not take our
    tasks), emptied again afterwards."""
    try:
        redis.Redis(host=REDIS_HOST, port=REDIS_PORT, socket_timeout=5).ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is not reachable at {REDIS_HOST}:{REDIS_PORT} (run scripts/ci_services.sh): {exc}")
    for db in random.sample(range(1, 16), 15):
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db, socket_timeout=5)
        if client.dbsize() == 0:
            break
    else:
        pytest.fail(f"no empty Redis database left on {REDIS_HOST}:{REDIS_PORT}")
    yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"
    client.flushdb()


@dataclass
class Worker:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        # The worker leads its own process group (start_new_session): TERM is Celery's warm shutdown.
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(STOP_TIMEOUT_SECONDS)


def _start_worker(name: str, env: dict[str, str], log_dir: Path) -> Worker:
    log = log_dir / f"{name}.log"
    command = [
        str(CELERY),
        "-A",
        "dagster_celery.app",
        "worker",
        "-Q",
        "dagster",
        "-n",
        f"{name}@%h",
        "--concurrency",
        "1",
        "--prefetch-multiplier",
        "1",
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        "INFO",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Worker(name, process, log)


def _await_workers(broker: str, workers: list[Worker]) -> set[str]:
    app = Celery(broker=broker)
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    try:
        while time.monotonic() < deadline:
            for worker in workers:
                if worker.process.poll() is not None:
                    pytest.fail(f"celery worker {worker.name} exited: {worker.log.read_text()[-2000:]}")
            replies = app.control.ping(timeout=1.0) or []
            names = {name for reply in replies for name in reply}
            if {n.split("@")[0] for n in names} >= {w.name for w in workers}:
                return names
        pytest.fail(f"celery workers not ready after {READY_TIMEOUT_SECONDS}s")
    finally:
        app.close()


@dataclass(frozen=True)
class CeleryCluster:
    workers: set[str]  # the workers' node names, e.g. worker-a@host
    env: dict[str, str]  # what the workers and the run processes share: instance, data, broker


@pytest.fixture
def celery_cluster(postgres_home: PostgresHome, broker_url: str, tmp_path: Path) -> Iterator[CeleryCluster]:
    env = {
        **os.environ,
        **postgres_home.env,
        BROKER_URL_ENV: broker_url,
        BACKEND_URL_ENV: broker_url,
        # The repository (for tests.deploy.celery_location) and the worker settings module.
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "deploy" / "celery")]),
    }
    with dg.DagsterInstance.get():
        pass  # create the Postgres tables once, before several processes race to
    workers = [_start_worker(name, env, tmp_path) for name in WORKERS]
    try:
        yield CeleryCluster(_await_workers(broker_url, workers), env)
    finally:
        for worker in workers:
            worker.stop()


def _run_partitions_on_celery(models: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    """One process per run, all at once, as the run queue would launch them; their steps queue on the broker."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.deploy.celery_location", model, SWEEP_NAME, SWEEP_ID],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for model in models
    ]
    outcomes = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=RUN_TIMEOUT_SECONDS)
            assert process.returncode == 0, err.decode()[-3000:]
            outcomes.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return outcomes


def _steps_by_worker(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    """step key -> the Celery worker that executed it, from the engine event each worker reports on starting
    a step (dagster-celery puts the worker's node name in its metadata)."""
    steps: dict[str, str] = {}
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        if event is None or event.step_key is None:
            continue
        worker = event.engine_event_data.metadata.get("Celery worker")
        if worker is not None:
            steps[event.step_key] = str(worker.value)
    return steps


def _engine_events(run_id: str) -> str:
    with dg.DagsterInstance.get() as instance:
        records = instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
        return "\n".join(f"{r.step_key}: {r.user_message!r} {r.dagster_event}" for r in records)


def _failures(run_ids: list[str]) -> str:
    """What went wrong, from the failed runs' event logs (for the assertion message)."""
    lines = []
    with dg.DagsterInstance.get() as instance:
        for run_id in run_ids:
            for record in instance.all_logs(run_id):
                event = record.dagster_event
                if event is not None and event.event_type_value in ("STEP_FAILURE", "PIPELINE_FAILURE", "ENGINE_EVENT"):
                    error = getattr(event.event_specific_data, "error", None)
                    lines.append(f"{run_id[:8]} {event.event_type_value} {event.step_key}: {record.user_message}")
                    if error is not None:
                        lines.append(error.to_string()[-1500:])
    return "\n".join(lines)


def _results(data_dir: Path) -> dict[str, list[tuple[Any, ...]]]:
    """What a sweep decided, read straight from the warehouse's Parquet (Hive partitions): every rollout's
    outcome per model and task, and the verifiers' pass counts per model."""
    warehouse = data_dir / "warehouse"
    con = duckdb.connect()
    try:
        rollouts = con.execute(
            "select model, task_id, status, success from read_parquet(?, hive_partitioning = true) order by all",
            [str(warehouse / "rollouts" / "**" / "*.parquet")],
        ).fetchall()
        verified = con.execute(
            "select model, count(*), count(*) filter (where success) from read_parquet(?, hive_partitioning = true) "
            "group by model order by model",
            [str(warehouse / "verifications" / "**" / "*.parquet")],
        ).fetchall()
    finally:
        con.close()
    return {"rollouts": rollouts, "verifications": verified}


def _in_process_sweep(data_dir: Path, sweeps_dir: Path) -> None:
    resources = {
        "paths": EvalPaths(data_dir=str(data_dir), sweeps_dir=str(sweeps_dir)),
        "eval_service": EvalService(data_dir=str(data_dir)),
        "assessment_platform": AssessmentPlatform(data_dir=str(data_dir)),
    }
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS.name or "", [m for m, _ in SWEEP_MODELS])
        instance.add_dynamic_partitions(SCENARIOS.name or "", [SCENARIO_KEY])
        for model, _ in SWEEP_MODELS:
            assert dg.materialize(
                build_assets()[:3],
                partition_key=partition_of(model, SCENARIO_KEY),
                instance=instance,
                resources=resources,
                tags={SWEEP_TAG: SWEEP_NAME, SWEEP_ID_TAG: SWEEP_ID},
            ).success


def test_a_sweep_runs_across_two_celery_workers(
    postgres_home: PostgresHome, celery_cluster: CeleryCluster, tmp_path: Path
) -> None:
    (postgres_home.sweeps_dir / "celery.yaml").write_text(tiny_sweep(SWEEP_NAME, SWEEP_MODELS))
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(MODELS.name or "", [m for m, _ in SWEEP_MODELS])
        instance.add_dynamic_partitions(SCENARIOS.name or "", [SCENARIO_KEY])
        pools = set_pool_limits(instance, POOL_LIMIT)

    outcomes = _run_partitions_on_celery([m for m, _ in SWEEP_MODELS], celery_cluster.env)
    assert all(o["success"] for o in outcomes), _failures([o["run_id"] for o in outcomes if not o["success"]])

    with dg.DagsterInstance.get() as instance:
        executed = {o["run_id"]: _steps_by_worker(instance, o["run_id"]) for o in outcomes}
    for run_id, steps in executed.items():
        assert set(steps) == {"eval_run", "rollouts", "verification"}, _engine_events(run_id)
    used = {worker for steps in executed.values() for worker in steps.values()}
    assert used == celery_cluster.workers and len(used) == len(WORKERS), executed
    # The pools were enforced by the shared instance, whichever worker ran the step; every slot came back.
    limits = postgres_home.database.query('select concurrency_key, "limit" from concurrency_limits')
    assert {(pool, POOL_LIMIT) for pool in pools} <= set(limits)
    assert postgres_home.database.query("select count(*) from concurrency_slots where run_id is not null") == [(0,)]

    on_celery = _results(postgres_home.data_dir)
    in_process_dir = tmp_path / "in_process"
    _in_process_sweep(in_process_dir, postgres_home.sweeps_dir)
    assert on_celery == _results(in_process_dir)
    passes: dict[str, list[bool]] = {}
    for model, _, status, success in on_celery["rollouts"]:
        assert status == "completed"
        passes.setdefault(model, []).append(bool(success))
    assert passes == {
        "sim-noop": [False, False],
        "sim-noop-b": [False, False],
        "sim-oracle": [True, True],
        "sim-oracle-b": [True, True],
    }
