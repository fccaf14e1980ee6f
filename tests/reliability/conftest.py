"""Fixtures of the reliability suites: fault-injecting servers on loopback, a fresh embedded backend, a copy of
the built-in scenarios that a test may break, and an isolated Dagster home and data directory for CLI runs."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.sim.npc import SIM_NPC, sim_npc_persona
from eval_pipelines.toolservers.app import create_app
from eval_pipelines.toolservers.email import EmailServer
from tests.reliability.support_faults import (
    FaultyModel,
    FaultyToolServer,
    ModelFactory,
    ModelFaultRule,
    ToolFaultRule,
    ToolServerFactory,
)
from tests.reliability.support_runs import BUILTIN_SCENARIOS, make_dagster_home

#: One catalog (and so one shared local runtime: tool servers and simulated models) for the whole suite.
CATALOG = ScenarioCatalog(BUILTIN_SCENARIOS)


@pytest.fixture(scope="session")
def catalog() -> ScenarioCatalog:
    return CATALOG


@pytest.fixture
def faulty_tool_server() -> Iterator[ToolServerFactory]:
    """faulty_tool_server(rule) -> (wrapper, server): a real email tool server behind a fault rule."""
    started: list[tuple[FaultyToolServer, BackgroundServer]] = []

    def start(rule: ToolFaultRule) -> tuple[FaultyToolServer, BackgroundServer]:
        wrapper = FaultyToolServer(create_app(EmailServer()), rule)
        server = BackgroundServer(wrapper).start()
        wrapper.control.server = server
        started.append((wrapper, server))
        return wrapper, server

    yield start
    for wrapper, server in started:
        wrapper.control.release.set()
        server.stop()


@pytest.fixture
def faulty_model(catalog: ScenarioCatalog) -> Iterator[ModelFactory]:
    """faulty_model(rule) -> (wrapper, server): the simulated models (agents and `sim-npc`) behind a fault rule;
    with rule None it only records requests. Base URL for a ModelConfig: `server.url + "/v1"`."""
    started: list[tuple[FaultyModel, BackgroundServer]] = []
    book = ReferenceBook.from_catalog(catalog)

    def start(rule: ModelFaultRule | None) -> tuple[FaultyModel, BackgroundServer]:
        wrapper = FaultyModel(create_sim_app(book, personas={SIM_NPC: sim_npc_persona}), rule)
        server = BackgroundServer(wrapper).start()
        wrapper.control.server = server
        started.append((wrapper, server))
        return wrapper, server

    yield start
    for wrapper, server in started:
        wrapper.control.release.set()
        server.stop()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def backend(
    data_dir: Path, catalog: ScenarioCatalog, local_backend: Callable[..., EvaluationBackend]
) -> EvaluationBackend:
    """The embedded default on a fresh data directory: the local service (store and artifacts under
    data_dir/service) through its client."""
    return local_backend(data_dir, catalog)


@pytest.fixture
def scenarios_copy(tmp_path: Path) -> Path:
    """A writable copy of the built-in scenarios, for tests that break a file."""
    target = tmp_path / "scenarios"
    shutil.copytree(BUILTIN_SCENARIOS, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture(scope="module")
def shared_dagster_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Dagster home per test module: its SQLite schema is created once, not once per CLI call."""
    return make_dagster_home(tmp_path_factory.mktemp("dagster_home"))


@pytest.fixture
def cli_env(tmp_path: Path, shared_dagster_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """DAGSTER_HOME and EVAL_PIPELINES_DATA_DIR in tmp, so a CLI sweep touches nothing of the repository."""
    monkeypatch.setenv("DAGSTER_HOME", str(shared_dagster_home))
    monkeypatch.setenv("EVAL_PIPELINES_DATA_DIR", str(tmp_path / "cli_data"))
    return tmp_path
