"""A SimLab coding bundle whose verifiers read the files server after the run, over HTTP `/step` with `urllib`,
the way SimLab's `examples/custom-cli-tools` verifiers do (`tests/simlab/bundles/coding_files/`, written for this
project in that format: `tool_servers: [{name: coding-env, ...}]`, one verifier reading `workspace_summary.md`,
one reading the workspace's listing).

The same rollouts get the same verdicts in the three places verifiers run: during POST /runs (the live
workspace), in a sweep's verification step and in `eval-pipelines reverify` (the workspace restored from the
rollout's final state). The agent that writes the summary (`sim-oracle` following the task's reference action)
passes everywhere; the one that writes nothing (`sim-noop`) fails everywhere, and neither is ever an error.
Before the files server rebuilt its own state from a snapshot, the sweep failed the first with "Tool read_file
failed: a files-server state must come from FilesServer.new_state()"."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import httpx
import pytest

from eval_pipelines.cli import EXIT_ERRORS, main
from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.paths import DATA_DIR_ENV, SCENARIOS_DIR_ENV, SWEEPS_DIR_ENV
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.simlab_bundle import import_bundle
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.pipeline.restored_servers import USER_SERVER_NOT_RESTORABLE, RestoredServers
from eval_pipelines.toolservers import create_app
from eval_pipelines.toolservers.files import FilesServer
from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, VerifyJob
from tests.reliability.support_runs import make_dagster_home
from tests.support.task_runs import run_one_task

BUNDLE = Path(__file__).resolve().parent / "bundles" / "coding_files"
SCENARIO_ID = "coding_files:1.0.0"
TASK_ID = "workspace_summary"
VERIFIERS = ("summary_file", "summary_listed")
PASSED = {
    "summary_file": "workspace_summary.md describes the available tools.",
    "summary_listed": "workspace_summary.md is in the workspace.",
}
FAILED = {
    "summary_file": "workspace_summary.md missing: Parameter 'path': 'workspace_summary.md' does not exist",
    "summary_listed": "workspace_summary.md is not in the workspace: '.' is empty.",
}
SWEEP = (
    "name: coding-files\n"
    f'scenarios: ["{SCENARIO_ID}"]\n'
    f"task_ids: [{TASK_ID}]\n"
    "rollout_count: 1\n"
    "models:\n"
    "  - {name: sim-oracle, model: sim-oracle, base_url: 'sim://local'}\n"
    "  - {name: sim-noop, model: sim-noop, base_url: 'sim://local'}\n"
)
#: verifier -> (success, is_error, message)
Verdicts = dict[str, tuple[bool, bool, str]]


def _expected(passed: bool) -> Verdicts:
    messages = PASSED if passed else FAILED
    return {verifier: (passed, False, messages[verifier]) for verifier in VERIFIERS}


def test_the_bundle_imports_onto_the_files_server(tmp_path: Path) -> None:
    report = import_bundle(BUNDLE, tmp_path / "scenarios", SCENARIO_ID)
    assert report.tasks == [TASK_ID] and report.notes == {}
    task = ScenarioCatalog(tmp_path / "scenarios").get(SCENARIO_ID).task(TASK_ID)
    assert [s.name for s in task.tool_servers] == ["files"] and task.simlab_servers == {"files": "coding-env"}
    assert task.verifiers == list(VERIFIERS)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "passed"), [("sim-oracle", True), ("sim-noop", False)])
def test_post_runs_and_a_later_verification_read_the_files_the_agent_left(
    tmp_path: Path, local_backend: Callable[..., EvaluationBackend], model: str, passed: bool
) -> None:
    import_bundle(BUNDLE, tmp_path / "scenarios", SCENARIO_ID)
    catalog = ScenarioCatalog(tmp_path / "scenarios")
    backend = local_backend(tmp_path / "data", catalog)
    rollout = run_one_task(backend, SCENARIO_ID, TASK_ID, model=model, run_label="coding", timeout_seconds=120)
    run_id = rollout.run_id
    assert rollout.result is not None
    during = {o.module: (o.success, o.is_error, o.message) for o in rollout.result.verifiers}
    assert during == _expected(passed)

    # Later, the workspace is gone: the verifiers read the one restored from the rollout's final state.
    artifacts = backend.artifacts_file(run_id, rollout.rollout_id)
    assert artifacts is not None
    with RestoredServers() as restored, IsolatedVerifierRunner(catalog.get(SCENARIO_ID).verifiers_dir) as runner:
        [outcomes] = runner.run([restored.prepare(VerifyJob(artifacts, VERIFIERS))])
    assert {o.module: (o.success, o.is_error, o.message) for o in outcomes} == _expected(passed)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in ("scenarios", "sweeps"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv(SCENARIOS_DIR_ENV, str(tmp_path / "scenarios"))
    monkeypatch.setenv(SWEEPS_DIR_ENV, str(tmp_path / "sweeps"))
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_HOME", str(make_dagster_home(tmp_path / "dagster_home")))
    yield tmp_path


def _cli(capfd: pytest.CaptureFixture[str], *argv: str, exit_code: int = 0) -> str:
    code = main(list(argv))
    captured = capfd.readouterr()
    assert code == exit_code, captured.err[-3000:]
    return captured.out + captured.err


def _latest_verdicts(project: Path) -> dict[str, tuple[str, Verdicts]]:
    """model -> (the rollout's outcome, its latest verdicts), from the catalog the CLI rebuilt."""
    with duckdb.connect(str(project / "data" / "eval.duckdb"), read_only=True) as con:
        outcomes = dict(con.execute("select model_name, outcome from rollout_scores").fetchall())
        rows = con.execute(
            "select model_name, verifier, success, coalesce(is_error, false), message from verifications_latest"
        ).fetchall()
    verdicts: dict[str, Verdicts] = {}
    for model, verifier, success, is_error, message in rows:
        verdicts.setdefault(model, {})[verifier] = (success, is_error, message)
    return {model: (outcomes[model], verdicts.get(model, {})) for model in outcomes}


@pytest.mark.slow
def test_a_sweep_and_reverify_read_the_files_the_agent_left(project: Path, capfd: pytest.CaptureFixture[str]) -> None:
    _cli(capfd, "import", str(BUNDLE), "--scenario-id", SCENARIO_ID, "--scenarios-dir", str(project / "scenarios"))
    config = project / "sweeps" / "coding-files.yaml"
    config.write_text(SWEEP, encoding="utf-8")
    _cli(capfd, "sweep", "--config", str(config), "--skip-assessment", "--sweep-id", "coding-files")
    expected = {"sim-oracle": ("passed", _expected(True)), "sim-noop": ("failed", _expected(False))}
    assert _latest_verdicts(project) == expected

    # An edited verifier is re-verified long after the run, against the restored workspace.
    verifier = ScenarioCatalog(project / "scenarios").get(SCENARIO_ID).verifiers_dir / "summary_file.py"
    verifier.write_text(verifier.read_text() + "\n# reworded nothing, but a new version\n")
    out = _cli(capfd, "reverify")
    assert "coding_files" in out
    assert _latest_verdicts(project) == expected
    with duckdb.connect(str(project / "data" / "eval.duckdb"), read_only=True) as con:
        [(versions,)] = con.execute(
            "select count(distinct verifier_version) from verifications where verifier = 'summary_file'"
        ).fetchall()
    assert versions == 2


SUMMARY = "The workspace offers read_file and write_file, list_dir and run_command for the agent's work.\n"


def _on_a_server_of_the_users_own(scenarios: Path, url: str) -> None:
    """The imported task, with coding-env played by the user's own HTTP server at `url` instead of a built-in one."""
    path = ScenarioCatalog(scenarios).get(SCENARIO_ID).root / "tasks" / f"{TASK_ID}.json"
    task = json.loads(path.read_text())
    task.update(tool_servers=[], simlab_servers={}, reference_actions=[], http_servers={"coding-env": url})
    path.write_text(json.dumps(task))


@pytest.fixture
def users_server() -> Iterator[str]:
    """A coding server of the user's own (our files server, answering in the hosted shape as SimLab's do) whose
    workspace already holds the summary."""
    with BackgroundServer(create_app(FilesServer())) as served:
        created = httpx.post(
            f"{served.url}/workspaces",
            json={"seed": [{"files": [{"path": "workspace_summary.md", "content": SUMMARY}]}]},
            timeout=30,
        )
        yield f"{served.url}{created.json()['path']}/hosted"


@pytest.mark.slow
def test_a_server_of_the_users_own_is_read_live_by_post_runs_and_is_a_verifier_error_in_a_sweep(
    project: Path, capfd: pytest.CaptureFixture[str], users_server: str, local_backend: Callable[..., EvaluationBackend]
) -> None:
    scenarios = project / "scenarios"
    _cli(capfd, "import", str(BUNDLE), "--scenario-id", SCENARIO_ID, "--scenarios-dir", str(scenarios))
    _on_a_server_of_the_users_own(scenarios, users_server)

    backend = local_backend(project / "service-data", ScenarioCatalog(scenarios))
    rollout = run_one_task(backend, SCENARIO_ID, TASK_ID, model="sim-noop", run_label="coding", timeout_seconds=120)
    assert rollout.result is not None
    assert {o.module: (o.success, o.is_error, o.message) for o in rollout.result.verifiers} == _expected(True)

    config = project / "sweeps" / "coding-files.yaml"
    config.write_text(SWEEP.replace("  - {name: sim-oracle, model: sim-oracle, base_url: 'sim://local'}\n", ""))
    # Errors above the sweep's threshold: it says so, and exits 3.
    said = _cli(
        capfd,
        "sweep",
        "--config",
        str(config),
        "--skip-assessment",
        "--sweep-id",
        "users-server",
        exit_code=EXIT_ERRORS,
    )
    assert "1/1 errors (verifier: summary_file: Verifier error: the state of tool server 'coding-env'" in said
    [(outcome, verdicts)] = _latest_verdicts(project).values()
    assert outcome == "error" and set(verdicts) == set(VERIFIERS)
    for success, is_error, message in verdicts.values():
        assert is_error and not success
        assert "tool server 'coding-env' at the end of the rollout cannot be queried" in message
        assert USER_SERVER_NOT_RESTORABLE in message
    with duckdb.connect(str(project / "data" / "eval.duckdb"), read_only=True) as con:
        assert con.execute("select error_class from rollout_scores").fetchall() == [("verifier",)]
