"""SimLab's verifiers run here as SimLab runs them (`simlab.verifiers.runner`): called `verify(run_artifacts=...)`,
their return value read as SimLab reads it, handed every attribute of SimLab's adapter, able to import the
`collinear.core` modules SimLab provides, and given the non-secret `SIMLAB_VERIFIER_*` settings. The project's own
verifiers (`def verify(artifacts)`, strict verdicts) keep working beside them."""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.simlab_bundle import import_bundle
from eval_pipelines.schemas.artifacts import META_SIMLAB_SERVERS, META_SIMLAB_TASK, META_TOOL_SERVERS, RunArtifacts
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.schemas.verifiers import VerifierOutcome
from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, VerifyJob, simlab_verifier_settings
from eval_pipelines.verifiers.protocol import run_verifier
from eval_pipelines.verifiers.simlab_view import SimLabRunArtifacts, simlab_task
from tests.support.task_runs import run_one_task
from tests.verifiers.conftest import PackageFactory

CODING_BUNDLE = Path(__file__).resolve().parents[1] / "simlab" / "bundles" / "coding_files"

#: Reads every attribute SimLab's adapter has that a verifier may read, and reports them as JSON.
READS_THE_ADAPTER = """
import json, os

def verify(*, run_artifacts):
    with open(run_artifacts.task_file, encoding="utf-8") as file:
        task = json.load(file)
    seen = {
        "task_file": run_artifacts.task_file,
        "task": task,
        "agent_strategy": run_artifacts.agent_strategy,
        "verifier_input": run_artifacts.verifier_input,
        "rollback_input": run_artifacts.rollback_input,
        "rollout_trace_path": run_artifacts.rollout_trace_path,
        "log_probs": run_artifacts.log_probs,
        "reference_folder_id": run_artifacts.reference_folder_id,
        "model": run_artifacts.model,
        "provider": run_artifacts.provider,
        "max_steps": run_artifacts.max_steps,
        "server_url": run_artifacts.server_url(),
        "tool_server_name": run_artifacts.tool_server_name,
    }
    return True, json.dumps(seen)
"""
IMPORTS_COLLINEAR_CORE = """
from collinear.core.run_artifacts import RunArtifacts
from collinear.core.verifier import VerifierResult

def verify(run_artifacts):
    return VerifierResult(isinstance(run_artifacts, RunArtifacts), "shims in place", output="done")
"""
CALLING_CONVENTIONS = {
    "keyword_only": "def verify(*, run_artifacts):\n    return True, 'keyword ' + run_artifacts.task_id\n",
    "positional": "def verify(artifacts):\n    return True, 'positional ' + artifacts.task_id\n",
    "any_keywords": "def verify(**kwargs):\n    return True, 'keywords ' + ','.join(sorted(kwargs))\n",
    "named_run_artifacts": "def verify(run_artifacts):\n    return True, 'named ' + run_artifacts.task_id\n",
}
READS_SETTINGS = """
import json, os

def verify(run_artifacts):
    return True, json.dumps({k: v for k, v in os.environ.items() if k.startswith("SIMLAB_VERIFIER_")})
"""


def _simlab_artifacts(**metadata: Any) -> RunArtifacts:
    """Artifacts of a task imported from a SimLab bundle (its verifiers get SimLab's view)."""
    return RunArtifacts(
        task_id="t1",
        task="do it",
        final_observation="all done",
        metadata={
            META_SIMLAB_SERVERS: {"files": "coding-env"},
            META_TOOL_SERVERS: {"files": "http://127.0.0.1:9/workspaces/w1"},
            **metadata,
        },
    )


def _own_artifacts() -> RunArtifacts:
    return RunArtifacts(task_id="t1", task="do it", final_observation="all done")


def _verdicts(verifiers: Path, artifacts: RunArtifacts, *modules: str) -> dict[str, VerifierOutcome]:
    with IsolatedVerifierRunner(verifiers, timeout_seconds=60) as runner:
        [outcomes] = runner.run([VerifyJob(artifacts, modules)])
    return {outcome.module: outcome for outcome in outcomes}


@pytest.mark.parametrize("artifacts", [_simlab_artifacts(), _own_artifacts()], ids=["simlab", "own"])
def test_verify_is_called_by_keyword_when_it_takes_one_and_positionally_otherwise(
    make_package: PackageFactory, artifacts: RunArtifacts
) -> None:
    outcomes = _verdicts(make_package(CALLING_CONVENTIONS), artifacts, *CALLING_CONVENTIONS)
    assert {m: (o.success, o.is_error, o.message) for m, o in outcomes.items()} == {
        "keyword_only": (True, False, "keyword t1"),
        "positional": (True, False, "positional t1"),
        "any_keywords": (True, False, "keywords run_artifacts"),
        "named_run_artifacts": (True, False, "named t1"),
    }


class _Result:
    def __init__(self, success: Any, message: Any) -> None:
        self.success, self.message = success, message


#: returned value -> (success, is_error, message) for a SimLab task's verifier, then for one of the project's own
COERCIONS: list[tuple[Any, tuple[bool, bool, str], tuple[bool, bool, str] | None]] = [
    (1, (True, False, "1"), None),
    (0, (False, False, "0"), None),
    (None, (False, False, "None"), None),
    ("looks good", (True, False, "looks good"), None),
    ((1, "ok"), (True, False, "ok"), None),
    ((0, "nope"), (False, False, "nope"), None),
    (_Result("yes", None), (True, False, ""), None),
    ((True, "fine"), (True, False, "fine"), (True, False, "fine")),
    ({"success": False, "message": "explicit"}, (False, False, "explicit"), (False, False, "explicit")),
    ((False, "no", "detail"), (False, False, "no"), (False, False, "no")),
]


@pytest.mark.parametrize(("returned", "simlab", "own"), COERCIONS, ids=[repr(c[0])[:20] for c in COERCIONS])
def test_a_simlab_verifiers_return_value_is_read_as_simlab_reads_it_and_ours_strictly(
    returned: Any, simlab: tuple[bool, bool, str], own: tuple[bool, bool, str] | None
) -> None:
    def verify(run_artifacts: Any) -> Any:
        return returned

    got = run_verifier("m", "v1", verify, _simlab_artifacts())
    assert (got.success, got.is_error, got.message) == simlab
    mine = run_verifier("m", "v1", verify, _own_artifacts())
    if own is None:  # not a verdict: our own grader is broken, which says nothing of the agent
        assert mine.is_error and not mine.success and "unsupported value" in mine.message, mine
    else:
        assert (mine.success, mine.is_error, mine.message) == own


def test_a_simlab_verifier_that_raises_is_a_verifier_error_not_a_failure() -> None:
    def verify(run_artifacts: Any) -> Any:
        raise KeyError("resource")

    got = run_verifier("m", "v1", verify, _simlab_artifacts())
    assert got.is_error and "KeyError" in got.message


def test_the_view_carries_simlab_adapter_attributes_and_its_task_file_is_gone_after_the_verdict(
    make_package: PackageFactory,
) -> None:
    task = {"meta": {"task_id": "t1"}, "task": "do it", "verifiers": [{"func": "python_module", "module": "x"}]}
    artifacts = _simlab_artifacts(**{META_SIMLAB_TASK: task, "page_id": "PAGE-7"})
    [outcome] = _verdicts(make_package({"reads": READS_THE_ADAPTER}), artifacts, "reads").values()
    assert (outcome.success, outcome.is_error) == (True, False), outcome.message
    seen = json.loads(outcome.message)
    assert seen["task"] == task
    assert {k: v for k, v in seen.items() if k not in {"task", "task_file"}} == {
        "agent_strategy": "tool-calling",
        "verifier_input": "PAGE-7",
        "rollback_input": "PAGE-7",
        "rollout_trace_path": None,
        "log_probs": None,
        "reference_folder_id": None,
        "model": "",
        "provider": "",
        "max_steps": 0,
        "server_url": "http://127.0.0.1:9/workspaces/w1/hosted",
        "tool_server_name": "coding-env",
    }

    # In this process too, and the file is deleted once the verdict is in.
    seen_paths: list[str] = []

    def verify(run_artifacts: Any) -> Any:
        seen_paths.append(run_artifacts.task_file)
        return json.loads(Path(run_artifacts.task_file).read_text()) == task

    assert run_verifier("m", "v1", verify, artifacts).success
    assert seen_paths and not Path(seen_paths[0]).exists()


def test_verifier_input_is_the_final_observation_without_a_named_resource_and_artifacts_keep_theirs() -> None:
    view = SimLabRunArtifacts(_simlab_artifacts().model_copy(update={"model": "m", "max_steps": 7}))
    assert (view.verifier_input, view.model, view.provider, view.max_steps) == ("all done", "m", "", 7)
    task_file = Path(view.task_file)
    assert json.loads(task_file.read_text())["meta"] == {"task_id": "t1"}  # recorded before the task was
    view.close()
    assert not task_file.exists()
    nothing = SimLabRunArtifacts(RunArtifacts(task_id="t", task="x", metadata={META_SIMLAB_TASK: {"task": "x"}}))
    assert (nothing.server_url(), nothing.tool_server_url, nothing.tool_server_name, nothing.verifier_input) == (
        None,
        "",
        "",
        "",
    )


def test_collinear_core_modules_import_inside_the_worker(make_package: PackageFactory) -> None:
    [outcome] = _verdicts(make_package({"shimmed": IMPORTS_COLLINEAR_CORE}), _simlab_artifacts(), "shimmed").values()
    assert (outcome.success, outcome.is_error, outcome.message, outcome.output) == (
        True,
        False,
        "shims in place",
        "done",
    )


def test_the_worker_gets_simlabs_verifier_settings_but_never_its_key(
    make_package: PackageFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIMLAB_VERIFIER_MODEL", " gpt-4o-mini ")
    monkeypatch.setenv("SIMLAB_VERIFIER_PROVIDER", "openai")
    monkeypatch.setenv("SIMLAB_VERIFIER_BASE_URL", "https://llm.example/v1")
    monkeypatch.setenv("SIMLAB_VERIFIER_API_KEY", "sk-secret-verifier-key")
    package = make_package({"settings": READS_SETTINGS})
    [outcome] = _verdicts(package, _simlab_artifacts(), "settings").values()
    assert json.loads(outcome.message) == {
        "SIMLAB_VERIFIER_MODEL": "gpt-4o-mini",
        "SIMLAB_VERIFIER_PROVIDER": "openai",
        "SIMLAB_VERIFIER_BASE_URL": "https://llm.example/v1",
    }
    monkeypatch.setenv("SIMLAB_VERIFIER_BASE_URL", "https://user:pw@llm.example/v1")
    [outcome] = _verdicts(package, _simlab_artifacts(), "settings").values()
    assert "SIMLAB_VERIFIER_BASE_URL" not in json.loads(outcome.message) and "pw" not in outcome.message


@pytest.mark.parametrize(
    ("base_url", "passed"),
    [("http://127.0.0.1:4000", True), ("https://h/v1?key=abc", False), ("https://h/#t", False), ("", False)],
)
def test_a_base_url_reaches_verifiers_only_without_credentials(base_url: str, passed: bool) -> None:
    settings = simlab_verifier_settings({"SIMLAB_VERIFIER_BASE_URL": base_url, "SIMLAB_VERIFIER_MODEL": ""})
    assert settings == ({"SIMLAB_VERIFIER_BASE_URL": base_url} if passed else {})


def test_an_imported_tasks_simlab_task_dict_is_what_its_bundle_said() -> None:
    task = Task(
        task_id="t1",
        name="Summarise",
        description="Inspect the workspace.",
        verifiers=["summary_file"],
        simlab_servers={"files": "coding-env"},
        simlab_origin={
            "meta": {"task_id": "t1", "display_name": "Summarise"},
            "apps": ["coding"],
            "tool_servers": [{"name": "coding-env", "tool_server_url": "http://u:secret@localhost:8020/?k=1"}],
            "text_key": "instruction",
            "category": "task",
        },
    )
    assert simlab_task(task, "9lives:1.0.0") == {
        "meta": {"task_id": "t1", "display_name": "Summarise", "difficulty": "medium", "category": "general"},
        "instruction": "Inspect the workspace.",
        "apps": ["coding"],
        "tool_servers": [{"name": "coding-env", "tool_server_url": "http://localhost:8020/"}],
        "npcs": [],
        "verifiers": [{"func": "python_module", "module": "collinear.scenarios._9lives.verifiers.summary_file"}],
        "category": "task",
    }


#: Added to the coding bundle: reads the task file SimLab hands its verifiers, called by keyword.
READS_TASK_FILE = """
import functools
import json

def verify(*, run_artifacts):
    with open(run_artifacts.task_file, encoding="utf-8") as file:
        task = json.load(file)
    return True, json.dumps({"meta": task["meta"]["task_id"], "verifiers": task["verifiers"], "apps": task["apps"]})
"""


@pytest.fixture
def bundle_reading_its_task(tmp_path: Path) -> Iterator[Path]:
    bundle = Path(shutil.copytree(CODING_BUNDLE, tmp_path / "bundle"))
    (bundle / "verifiers" / "reads_task.py").write_text(READS_TASK_FILE)
    task_path = bundle / "tasks" / "workspace_summary.json"
    task = json.loads(task_path.read_text())
    task["verifiers"].append({"func": "python_module", "module": "collinear.scenarios.coding.verifiers.reads_task"})
    task_path.write_text(json.dumps(task))
    yield bundle


@pytest.mark.slow
def test_post_runs_hands_an_imported_tasks_verifier_its_simlab_task_file(
    tmp_path: Path, local_backend: Callable[..., EvaluationBackend], bundle_reading_its_task: Path
) -> None:
    import_bundle(bundle_reading_its_task, tmp_path / "scenarios", "coding_files:1.0.0")
    catalog = ScenarioCatalog(tmp_path / "scenarios")
    backend = local_backend(tmp_path / "data", catalog)
    rollout = run_one_task(
        backend, "coding_files:1.0.0", "workspace_summary", run_label="task-file", timeout_seconds=120
    )
    assert rollout.result is not None
    outcome = next(o for o in rollout.result.verifiers if o.module == "reads_task")
    assert (outcome.success, outcome.is_error) == (True, False), outcome.message
    module = "collinear.scenarios.coding_files.verifiers"
    assert json.loads(outcome.message) == {
        "meta": "workspace_summary",
        "verifiers": [
            {"func": "python_module", "module": f"{module}.{name}"}
            for name in ("summary_file", "summary_listed", "reads_task")
        ],
        "apps": ["coding"],
    }


def test_a_wrapper_is_called_by_its_own_signature_not_the_one_it_wraps() -> None:
    def simlab_style(run_artifacts: Any) -> Any:
        return True, "inner"

    @functools.wraps(simlab_style)
    def positional_wrapper(artifacts: Any) -> Any:
        return simlab_style(artifacts)

    got = run_verifier("m", "v1", positional_wrapper, _simlab_artifacts())
    assert (got.success, got.is_error, got.message) == (True, False, "inner")
