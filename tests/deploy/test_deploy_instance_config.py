"""The two instance files (root dagster.yaml: embedded SQLite; deploy/postgres/dagster.yaml: Postgres) and the
executor definitions, checked without any service: what they configure, that they agree, that the Postgres
file takes every connection setting from the environment, and that the deployment files parse."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from eval_pipelines.defs.evals.automation import sweep_job
from eval_pipelines.defs.evals.executors import (
    BACKEND_URL_ENV,
    BROKER_URL_ENV,
    EXECUTOR_ENV,
    celery_sweep_job,
    sweep_job_for_deployment,
)
from eval_pipelines.lib.serving import free_port
from eval_pipelines.llm import limiter
from tests.deploy.conftest import POSTGRES_DAGSTER_YAML, REPO, ROOT_DAGSTER_YAML

#: Blocks the two files must carry identically: one policy for limits, monitoring and retries.
SHARED_BLOCKS = ("telemetry", "concurrency", "run_monitoring", "run_retries", "python_logs")
PG_SETTINGS = ("hostname", "port", "username", "password", "db_name")


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def _instance_from(config: dict[str, Any], home: Path) -> dg.DagsterInstance:
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    return dg.DagsterInstance.from_config(str(home))


def _root_in(tmp_path: Path) -> dict[str, Any]:
    """The root file with its storage moved under tmp_path (its relative base_dir points into data/)."""
    config = _load(ROOT_DAGSTER_YAML)
    config["storage"]["sqlite"]["base_dir"] = str(tmp_path / "storage")
    config["local_artifact_storage"]["config"]["base_dir"] = str(tmp_path / "storage")
    return config


def test_both_files_share_the_limits_monitoring_and_retry_blocks() -> None:
    root, postgres = _load(ROOT_DAGSTER_YAML), _load(POSTGRES_DAGSTER_YAML)
    for block in SHARED_BLOCKS:
        assert block in root, block
        assert root[block] == postgres[block], block
    for config in (root, postgres):
        # The old run-coordinator limits next to `concurrency:` are refused by Dagster 1.13.
        assert "run_coordinator" not in config and "run_queue" not in config
    assert "sqlite" in root["storage"] and "postgres" in postgres["storage"]


def test_the_root_instance_limits_per_model_monitors_and_retries_only_crashed_runs(tmp_path: Path) -> None:
    with _instance_from(_root_in(tmp_path), tmp_path / "home") as instance:
        concurrency = instance.get_concurrency_config()
        assert concurrency.pool_config.default_pool_limit is not None
        queue = concurrency.run_queue_config
        assert queue is not None
        assert queue.tag_concurrency_limits == [
            {"key": "dagster/partition/model", "value": {"applyLimitPerUniqueValue": True}, "limit": 2}
        ]
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] > 0
        # Run retries only for run-level failures: step failures are the assets' RetryPolicy's job, so the two
        # never multiply.
        assert instance.run_retries_enabled and instance.run_retries_max_retries > 0
        assert instance.run_retries_retry_on_asset_or_op_failure is False
    assert limiter.logger.name in _load(ROOT_DAGSTER_YAML)["python_logs"]["managed_python_loggers"]


def test_mixing_the_old_run_queue_limits_in_is_refused(tmp_path: Path) -> None:
    config = _root_in(tmp_path)
    config["run_queue"] = {"tag_concurrency_limits": [{"key": "dagster/partition/model", "limit": 1}]}
    with pytest.raises(dg.DagsterInvalidConfigError):
        _instance_from(config, tmp_path / "home")


def test_postgres_settings_all_come_from_the_environment() -> None:
    db = _load(POSTGRES_DAGSTER_YAML)["storage"]["postgres"]["postgres_db"]
    assert db["scheme"] == "postgresql+psycopg2"  # SQLAlchemy 2.1 would pick psycopg 3 for plain postgresql://
    for setting in PG_SETTINGS:
        assert set(db[setting]) == {"env"}, setting
    assert set(db) == {*PG_SETTINGS, "scheme"}


def test_an_unset_postgres_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB"):
        monkeypatch.setenv(name, "x" if name != "DAGSTER_PG_PORT" else "5432")
    monkeypatch.delenv("DAGSTER_PG_HOST")
    with pytest.raises(Exception, match="DAGSTER_PG_HOST"):
        _instance_from(_load(POSTGRES_DAGSTER_YAML), tmp_path / "home")


def test_the_celery_job_runs_the_sweep_assets_on_a_broker_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert celery_sweep_job.selection == sweep_job.selection
    executor = celery_sweep_job.executor_def
    assert executor is not None and executor.name == "celery_from_env"
    # Resolved when a run starts, from the environment: an unset variable is named, a set one is used.
    monkeypatch.delenv(BROKER_URL_ENV, raising=False)
    monkeypatch.setenv(BACKEND_URL_ENV, "redis://127.0.0.1:6379/1")
    schema: Any = executor.config_schema  # the configured executor's schema resolves the bound config
    unset = schema.resolve_config({})
    assert not unset.success and BROKER_URL_ENV in str(unset.errors)
    monkeypatch.setenv(BROKER_URL_ENV, "redis://127.0.0.1:6379/0")
    resolved = schema.resolve_config({})
    assert resolved.success and resolved.value is not None
    assert resolved.value["config"]["broker"] == "redis://127.0.0.1:6379/0"
    assert resolved.value["config"]["backend"] == "redis://127.0.0.1:6379/1"

    monkeypatch.delenv(EXECUTOR_ENV, raising=False)
    assert sweep_job_for_deployment() is sweep_job
    monkeypatch.setenv(EXECUTOR_ENV, "celery")
    assert sweep_job_for_deployment() is celery_sweep_job


def test_the_worker_settings_module_needs_the_broker_variables(tmp_path: Path) -> None:
    script = "import dagster_celery_config as c; print(c.broker_url, c.result_backend, c.worker_prefetch_multiplier)"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "deploy" / "celery")}
    python = str(REPO / ".venv" / "bin" / "python")
    ok = subprocess.run(
        [python, "-c", script],
        env={**env, BROKER_URL_ENV: "redis://127.0.0.1:6379/0", BACKEND_URL_ENV: "redis://127.0.0.1:6379/1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0 and ok.stdout.split() == ["redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/1", "1"]
    missing = subprocess.run([python, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and BROKER_URL_ENV in missing.stderr


def test_the_helm_values_name_the_k8s_run_launcher_and_postgres_from_a_secret() -> None:
    values = _load(REPO / "deploy" / "k8s" / "values.yaml")
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    deployment = values["dagster-user-deployments"]["deployments"][0]
    assert deployment["dagsterApiGrpcArgs"][:2] == ["-m", "eval_pipelines.definitions"]
    assert values["postgresql"]["enabled"] is False
    assert values["global"]["postgresqlSecretName"]
    assert "K8sRunLauncher" in (REPO / "deploy" / "k8s" / "README.md").read_text()
    # The chart's spelling of the same instance policy.
    root = _load(ROOT_DAGSTER_YAML)
    assert values["concurrency"]["pools"]["defaultLimit"] == root["concurrency"]["pools"]["default_limit"]
    assert (
        values["concurrency"]["runs"]["tagConcurrencyLimits"] == root["concurrency"]["runs"]["tag_concurrency_limits"]
    )
    assert values["dagsterDaemon"]["runRetries"]["retryOnAssetOrOpFailure"] is False
    assert (
        values["dagsterDaemon"]["runMonitoring"]["freeSlotsAfterRunEndSeconds"]
        == root["run_monitoring"]["free_slots_after_run_end_seconds"]
    )
    assert values["pythonLogs"]["managedPythonLoggers"] == root["python_logs"]["managed_python_loggers"]


def test_ci_services_script_names_each_missing_service() -> None:
    env = {
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
        "CI_SERVICES_START": "0",
        "CI_SERVICES_WAIT_SECONDS": "1",
        "DAGSTER_PG_PORT": str(free_port()),
        "EVAL_PIPELINES_TEST_RABBITMQ_PORT": str(free_port()),
    }
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "ci_services.sh"), "postgres", "rabbitmq"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "missing service(s): PostgreSQL RabbitMQ" in result.stderr
    unknown = subprocess.run(
        ["bash", str(REPO / "scripts" / "ci_services.sh"), "mysql"], env=env, capture_output=True, text=True
    )
    assert unknown.returncode == 2 and "unknown service 'mysql'" in unknown.stderr


@pytest.mark.services
def test_ci_services_script_finds_the_running_services() -> None:
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "ci_services.sh")],
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "CI_SERVICES_START": "0", "CI_SERVICES_WAIT_SECONDS": "5"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    for label in ("PostgreSQL", "Redis", "RabbitMQ"):
        assert f"{label} is up" in result.stderr
