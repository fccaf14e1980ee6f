"""The package as a user installs it: the wheel, in a fresh venv, no checkout on the path. `eval-pipelines init`
makes a project in an empty folder, `eval-pipelines sweep` runs there and writes only there, and the scaffolded
project is a valid Dagster code location."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A venv with the wheel built from a copy of the tracked sources (nothing is built in the checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        origin = REPO / name
        if origin.is_symlink() or not origin.is_file():
            continue  # the repository's links to the package's templates; the wheel carries the templates
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(origin.read_bytes())
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("EVAL_PIPELINES_", "DAGSTER_", "PYTHON")) and key != "VIRTUAL_ENV"
    }
    env["HOME"] = str(root / "home")
    (root / "home").mkdir()
    wheels = root / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)], root, env)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("eval_pipelines-*.whl")
    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], root, env)
    assert made.returncode == 0, made.stderr
    pip = _run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)], root, env)
    assert pip.returncode == 0, pip.stderr
    yield venv, env


@pytest.mark.slow
def test_init_then_sweep_in_an_empty_folder_writes_only_there(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    venv, env = installed
    cli = str(venv / "bin" / "eval-pipelines")
    site = next((venv / "lib").glob("python3*/site-packages"))
    package_before = _files(site / "eval_pipelines")
    home_before = _files(Path(env["HOME"]))
    project = tmp_path / "my-evals"
    project.mkdir()

    init = _run([cli, "init"], project, env)
    assert init.returncode == 0, init.stderr
    for name in ("dagster.yaml", "workspace.yaml", "sweeps/default.yaml", "scenarios/my_email_ops/template.json"):
        assert (project / name).is_file(), name
    assert "eval-pipelines sweep" in init.stdout
    again = _run([cli, "init"], project, env)
    assert again.returncode == 2 and "--force" in again.stderr and "Traceback" not in again.stderr

    sweep = _run([cli, "sweep"], project, env)
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    assert "sim-oracle" in sweep.stdout and "my_email_ops:0.1.0" in sweep.stdout
    data = project / "data"
    assert any((data / "warehouse" / "rollouts").rglob("*.parquet"))
    assert (data / "eval.duckdb").is_file()
    assert any((data / "dagster").iterdir())  # the project's Dagster instance (its dagster.yaml)
    # Nothing beside the package, nothing in the user's home.
    assert _files(site / "eval_pipelines") == package_before
    assert _files(Path(env["HOME"])) - home_before == set()

    validate = _run([str(venv / "bin" / "dagster"), "definitions", "validate", "-w", "workspace.yaml"], project, env)
    assert validate.returncode == 0, validate.stdout + validate.stderr


@pytest.mark.slow
def test_a_project_dir_that_does_not_exist_is_named_and_nothing_is_made(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    venv, env = installed
    missing = _run(
        [str(venv / "bin" / "eval-pipelines"), "--project-dir", str(tmp_path / "nope"), "sweep"], tmp_path, env
    )
    assert missing.returncode == 2, missing.stderr
    assert "--project-dir" in missing.stderr and "Traceback" not in missing.stderr
    assert list(tmp_path.iterdir()) == []
