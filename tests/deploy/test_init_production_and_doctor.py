"""`eval-pipelines init --postgres` / `--celery` write the production configuration the package ships, and
`eval-pipelines doctor` says what is installed, what is running, where the data is and whether the sandbox is on."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from eval_pipelines.cli import main
from eval_pipelines.inputs.scaffold import CELERY_CONFIG, CELERY_WORKER_COMMAND, POSTGRES_DAGSTER_YAML
from eval_pipelines.local import doctor

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("EVAL_PIPELINES_", "DAGSTER_")):
            monkeypatch.delenv(key)


def test_the_repository_links_to_the_files_the_package_ships() -> None:
    assert (REPO / "deploy/postgres/dagster.yaml").resolve() == POSTGRES_DAGSTER_YAML.resolve()
    assert (REPO / "deploy/celery/dagster_celery_config.py").resolve() == CELERY_CONFIG.resolve()
    storage = yaml.safe_load(POSTGRES_DAGSTER_YAML.read_text())["storage"]
    assert set(storage) == {"postgres"}


def test_init_postgres_writes_a_new_project_with_the_postgres_instance(
    tmp_path: Path, clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "evals"
    assert main(["init", str(project), "--postgres"]) == 0
    assert (project / "dagster.yaml").read_bytes() == POSTGRES_DAGSTER_YAML.read_bytes()
    assert (project / "sweeps" / "default.yaml").is_file() and (project / "scenarios" / "my_email_ops").is_dir()
    assert not (project / "celery").exists()
    out = capsys.readouterr().out
    assert "DAGSTER_PG_HOST" in out and "eval-pipelines doctor" in out


def test_init_celery_in_an_existing_project_adds_only_the_production_files(
    tmp_path: Path, clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "evals"
    assert main(["init", str(project)]) == 0
    sweep = project / "sweeps" / "default.yaml"
    sweep.write_text(sweep.read_text() + "# my edit\n")
    capsys.readouterr()

    assert main(["init", str(project), "--celery"]) == 0
    written = capsys.readouterr().out
    assert "wrote sweeps/default.yaml" not in written and sweep.read_text().endswith("# my edit\n")
    assert (project / "dagster.yaml").read_bytes() == POSTGRES_DAGSTER_YAML.read_bytes()  # --celery implies it
    assert (project / "celery" / "dagster_celery_config.py").read_bytes() == CELERY_CONFIG.read_bytes()
    script = project / "celery" / "worker.sh"
    assert os.access(script, os.X_OK) and CELERY_WORKER_COMMAND in script.read_text()
    assert CELERY_WORKER_COMMAND in written
    syntax = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True, check=False)
    assert syntax.returncode == 0, syntax.stderr

    # a dagster.yaml the user changed is not replaced without --force, and the refusal names it
    (project / "dagster.yaml").write_text("telemetry: {enabled: false}\n")
    assert main(["init", str(project), "--postgres"]) == 2
    assert "dagster.yaml" in capsys.readouterr().err
    assert main(["init", str(project), "--postgres", "--force"]) == 0
    assert (project / "dagster.yaml").read_bytes() == POSTGRES_DAGSTER_YAML.read_bytes()


def test_doctor_reports_installs_data_services_and_sandbox(
    tmp_path: Path, clean_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "evals"
    assert main(["init", str(project)]) == 0
    capsys.readouterr()
    monkeypatch.chdir(project)
    code = main(["doctor"])
    out = capsys.readouterr().out
    for section in ("installed:", "data:", "running:", "sandbox:"):
        assert section in out
    assert "extra celery" in out and "extra k8s" in out and "core" in out
    assert "data dir" in out and str(project / "data") in out
    assert "storage sqlite" in out and "not configured" in out
    assert "run_command" in out
    # exit 1 exactly when a line is marked: here only an unsandboxed host could mark one
    assert code == (0 if "\n  ! " not in out else 1)


def test_doctor_checks_what_is_configured_without_printing_secrets(tmp_path: Path, clean_env: None) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    open_port = listener.getsockname()[1]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_bytes(POSTGRES_DAGSTER_YAML.read_bytes())
    environ = {
        "DAGSTER_HOME": str(home),
        "DAGSTER_PG_HOST": "127.0.0.1",
        "DAGSTER_PG_PORT": str(open_port),
        "DAGSTER_CELERY_BROKER_URL": f"redis://user:s3cret@127.0.0.1:{closed_port}/0",
        "DAGSTER_CELERY_BACKEND_URL": f"amqp://guest:guest@127.0.0.1:{open_port}//",
    }
    try:
        section = doctor.running_section(environ, answers=lambda host, port, path: False)
    finally:
        listener.close()
    lines = {line.label: line for line in section.lines}
    assert lines["postgres"].ok and "reachable" in lines["postgres"].value
    assert not lines["celery broker"].ok and "NOT reachable" in lines["celery broker"].value
    assert lines["celery results"].ok and lines["celery results"].value.startswith("rabbitmq amqp://127.0.0.1:")
    rendered = doctor.render([section])
    assert "s3cret" not in rendered and "guest" not in rendered
    assert "postgres" in doctor.instance_storage(home / "dagster.yaml")

    missing_host = doctor.running_section({"DAGSTER_HOME": str(home)}, answers=lambda host, port, path: False)
    assert not missing_host.lines[0].ok and "DAGSTER_PG_HOST is not set" in missing_host.lines[0].value
