"""Shared fixtures of the verifier tests: the email_ops scenario, its tasks replayed on the real email server,
and small verifier packages written on the fly."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.reverify import NOOP, PERTURBED, REFERENCE, replay_variants
from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.schemas.artifacts import RunArtifacts

SCENARIOS_ROOT = builtin_scenarios_dir()
EMAIL_OPS = "email_ops:1.0.0"
VARIANTS = (REFERENCE, NOOP, PERTURBED)

Replays = dict[tuple[str, str], RunArtifacts]


@pytest.fixture(scope="session")
def email_ops_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A catalog holding only a copy of email_ops, so scenarios being written next door cannot interfere."""
    root = tmp_path_factory.mktemp("scenarios")
    shutil.copytree(SCENARIOS_ROOT / "email_ops", root / "email_ops")
    return root


@pytest.fixture(scope="session")
def email_ops(email_ops_root: Path) -> ScenarioFiles:
    return ScenarioCatalog(email_ops_root).get(EMAIL_OPS)


@pytest.fixture(scope="session")
def replays(email_ops: ScenarioFiles) -> Replays:
    """(task_id, variant) -> the artifacts of replaying the variant's actions on the real email server."""
    traces = replay_variants([email_ops])
    return {(task_id, variant): artifacts for (_, task_id, variant), artifacts in traces.items()}


PackageFactory = Callable[[dict[str, str]], Path]


@pytest.fixture
def make_package(tmp_path: Path) -> PackageFactory:
    """make_package({"module": "source", ...}) -> a verifiers/ folder with an __init__.py (sources dedented)."""
    counter = iter(range(1000))

    def make(modules: dict[str, str]) -> Path:
        folder = tmp_path / f"pkg{next(counter)}" / "verifiers"
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        for name, source in modules.items():
            (folder / f"{name}.py").write_text(textwrap.dedent(source))
        return folder

    return make
