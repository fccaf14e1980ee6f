"""Fixtures for the deployment tests: a fresh PostgreSQL database per test, a DAGSTER_HOME holding
deploy/postgres/dagster.yaml, and a tiny sweep of simulated models.

PostgreSQL is reached through the same variables deploy/postgres/dagster.yaml reads (defaults: this machine's
trust-auth server on 127.0.0.1:5432 as `postgres`). A missing service fails the test and names it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import psycopg2
import pytest
from psycopg2 import sql

from eval_pipelines.inputs.paths import DATA_DIR_ENV, PROJECT_TEMPLATE_DIR, SWEEPS_DIR_ENV

REPO = Path(__file__).resolve().parents[2]
POSTGRES_DAGSTER_YAML = REPO / "deploy" / "postgres" / "dagster.yaml"
ROOT_DAGSTER_YAML = PROJECT_TEMPLATE_DIR / "dagster.yaml"
SCENARIO_KEY = "email_ops:1.0.0"

PG_DEFAULTS = {
    "DAGSTER_PG_HOST": "127.0.0.1",
    "DAGSTER_PG_PORT": "5432",
    "DAGSTER_PG_USERNAME": "postgres",
    "DAGSTER_PG_PASSWORD": "",
}


def pg_settings() -> dict[str, str]:
    return {name: os.environ.get(name, default) for name, default in PG_DEFAULTS.items()}


def _admin_connection() -> psycopg2.extensions.connection:
    s = pg_settings()
    try:
        connection = psycopg2.connect(
            host=s["DAGSTER_PG_HOST"],
            port=int(s["DAGSTER_PG_PORT"]),
            user=s["DAGSTER_PG_USERNAME"],
            password=s["DAGSTER_PG_PASSWORD"] or None,
            dbname="postgres",
            connect_timeout=5,
        )
    except psycopg2.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {s['DAGSTER_PG_HOST']}:{s['DAGSTER_PG_PORT']} "
            f"(run scripts/ci_services.sh): {exc}"
        )
    connection.autocommit = True  # CREATE/DROP DATABASE cannot run inside a transaction
    return connection


@dataclass(frozen=True)
class PgDatabase:
    name: str
    env: dict[str, str]

    def connect(self) -> psycopg2.extensions.connection:
        return psycopg2.connect(
            host=self.env["DAGSTER_PG_HOST"],
            port=int(self.env["DAGSTER_PG_PORT"]),
            user=self.env["DAGSTER_PG_USERNAME"],
            password=self.env["DAGSTER_PG_PASSWORD"] or None,
            dbname=self.name,
            connect_timeout=5,
        )

    def query(self, statement: str, *params: object) -> list[tuple[object, ...]]:
        connection = self.connect()
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement, params)
                return list(cursor.fetchall())
        finally:
            connection.close()


@pytest.fixture
def pg_database() -> Iterator[PgDatabase]:
    """A database of its own, dropped afterwards (FORCE: workers may still hold connections)."""
    name = f"eval_pipelines_test_{uuid.uuid4().hex[:12]}"
    admin = _admin_connection()
    try:
        with admin.cursor() as cursor:
            cursor.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        yield PgDatabase(name, {**pg_settings(), "DAGSTER_PG_DB": name})
    finally:
        with admin.cursor() as cursor:
            cursor.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.close()


@dataclass(frozen=True)
class PostgresHome:
    """A DAGSTER_HOME holding deploy/postgres/dagster.yaml, and the environment that fills it in."""

    path: Path
    database: PgDatabase
    data_dir: Path
    sweeps_dir: Path

    @property
    def env(self) -> dict[str, str]:
        return {
            **self.database.env,
            "DAGSTER_HOME": str(self.path),
            DATA_DIR_ENV: str(self.data_dir),
            SWEEPS_DIR_ENV: str(self.sweeps_dir),
        }


def sweep_pools() -> set[str]:
    """The Dagster pools of the sweep's partition assets (eval_run, rollouts, verification)."""
    from eval_pipelines.definitions import build_assets

    return {a.op.pool for a in build_assets()[:3] if a.op.pool}


def set_pool_limits(instance: dg.DagsterInstance, limit: int) -> set[str]:
    """The deployment step the READMEs document (`dagster instance concurrency set <pool> <limit>`). With only
    `pools.default_limit`, two runs that first use a pool at the same moment race to create its row and one
    fails on Postgres (dagster issue #33552); an explicit limit creates the row up front."""
    pools = sweep_pools()
    for pool in pools:
        instance.event_log_storage.set_concurrency_slots(pool, limit)
    return pools


def tiny_sweep(name: str, models: list[tuple[str, str]]) -> str:
    """A sweep config over the built-in scenario: two tasks, one rollout each."""
    lines = [
        f"name: {name}",
        'scenarios: ["email_ops:1.0.0"]',
        "task_ids: [email_ops_001, email_ops_002]",
        "rollout_count: 1",
        "max_parallel: 2",
        "rollout_timeout_seconds: 60",
        "models:",
    ]
    lines += [f'  - {{name: {alias}, model: {model}, base_url: "sim://local"}}' for alias, model in models]
    return "\n".join(lines) + "\n"


@pytest.fixture
def postgres_home(tmp_path: Path, pg_database: PgDatabase, monkeypatch: pytest.MonkeyPatch) -> PostgresHome:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(POSTGRES_DAGSTER_YAML, home / "dagster.yaml")
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    result = PostgresHome(home, pg_database, tmp_path / "data", sweeps)
    for name, value in result.env.items():
        monkeypatch.setenv(name, value)
    return result
