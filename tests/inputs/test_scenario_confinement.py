"""What a scenario names stays inside the scenario: seed files, links, nesting and ids are refused at load, naming
the file and the field, and nothing outside the scenario folder is ever opened.

Each test breaks one file of a copy of the built-in `email_ops` scenario. A canary file outside the scenario holds
valid seed JSON with a unique marker; an audit hook records every file this process opens while a test watches, so
"never read" is checked directly rather than inferred from an error message.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.cli import EXIT_USER_ERROR, main
from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError, ScenarioFiles
from eval_pipelines.inputs.simlab_bundle import BundleImportError, import_bundle
from eval_pipelines.schemas.limits import MAX_JSON_DEPTH

SCENARIO_ID = "email_ops:1.0.0"
TASK_ID = "email_ops_001"
#: Deep enough to exhaust the json module's recursion many times over.
HOSTILE_DEPTH = 100_000

_watching: list[str] | None = None


def _record_opens(event: str, args: tuple[Any, ...]) -> None:
    if _watching is not None and event == "open" and isinstance(args[0], str | bytes | os.PathLike):
        _watching.append(os.fsdecode(args[0]))


sys.addaudithook(_record_opens)  # a hook cannot be removed: it records only inside `opened_files()`


@contextmanager
def opened_files() -> Iterator[list[str]]:
    """The paths this process opens inside the block (builtin open, io.open and os.open all raise `open`)."""
    global _watching
    _watching = []
    try:
        yield _watching
    finally:
        _watching = None


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """Valid seed JSON outside the scenario folder, which a confined loader never opens."""
    path = tmp_path / "outside" / "canary.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"emails": [], "note": f"CANARY-{uuid.uuid4().hex}"}), encoding="utf-8")
    return path


@pytest.fixture
def scenarios(tmp_path: Path) -> Path:
    root = tmp_path / "scenarios"
    shutil.copytree(
        builtin_scenarios_dir() / "email_ops", root / "email_ops", ignore=shutil.ignore_patterns("__pycache__")
    )
    return root


def _task_path(scenarios: Path) -> Path:
    return scenarios / "email_ops" / "tasks" / f"{TASK_ID}.json"


def _edit_task(scenarios: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    path = _task_path(scenarios)
    task = json.loads(path.read_text(encoding="utf-8"))
    change(task)
    path.write_text(json.dumps(task), encoding="utf-8")
    return path


def _load(scenarios: Path) -> ScenarioFiles:
    """Everything a sweep start reads: every template, then the tasks, NPCs and seeds of the scenario."""
    scenario = ScenarioCatalog(scenarios).get(SCENARIO_ID)
    scenario.tasks()
    return scenario


def _refused(scenarios: Path, canary: Path) -> str:
    """The load's error message, after checking that the canary was never opened."""
    with opened_files() as opened, pytest.raises(ScenarioError) as refused:
        _load(scenarios)
    assert str(canary) not in opened
    assert canary.read_text() not in str(refused.value)
    return str(refused.value)


def _deep_json() -> str:
    return "[" * HOSTILE_DEPTH + "]" * HOSTILE_DEPTH


# -- seed files ----------------------------------------------------------------------------------------------


def test_an_absolute_seed_path_is_refused_at_load(scenarios: Path, canary: Path) -> None:
    task = _edit_task(scenarios, lambda t: t["seed_data"].update(email=["mailbox.json", str(canary)]))
    message = _refused(scenarios, canary)
    seed_dir = scenarios / "email_ops" / "seed_data"
    assert message == f"{task}: seed_data.email[1]: {str(canary)!r} is not inside {seed_dir}"


@pytest.mark.parametrize("name", ["../../outside/canary.json", "sub/../../../outside/canary.json", "a/../mailbox.json"])
def test_a_seed_path_with_dotdot_is_refused_at_load(scenarios: Path, canary: Path, name: str) -> None:
    task = _edit_task(scenarios, lambda t: t["seed_data"].update(email=[name]))
    message = _refused(scenarios, canary)
    assert message.startswith(f"{task}: seed_data.email[0]: {name!r} is not inside ")


def test_a_seed_file_linked_out_of_the_scenario_is_refused_at_load(scenarios: Path, canary: Path) -> None:
    (scenarios / "email_ops" / "seed_data" / "linked.json").symlink_to(canary)
    task = _edit_task(scenarios, lambda t: t["seed_data"].update(email=["linked.json"]))
    message = _refused(scenarios, canary)
    assert message.startswith(f"{task}: seed_data.email[0]: 'linked.json' is not inside ")


def test_a_seed_folder_linked_out_of_the_scenario_is_refused_at_load(scenarios: Path, canary: Path) -> None:
    seed_dir = scenarios / "email_ops" / "seed_data"
    for name in ("mailbox.json", "contacts.json"):
        shutil.copy(canary, canary.parent / name)
    shutil.rmtree(seed_dir)
    seed_dir.symlink_to(canary.parent, target_is_directory=True)
    with (
        opened_files() as opened,
        pytest.raises(ScenarioError, match=re.escape("seed_data.email[0]: 'mailbox.json' is not")),
    ):
        _load(scenarios)
    assert not [path for path in opened if path.startswith(str(canary.parent))]


def test_a_link_inside_the_seed_folder_is_followed(scenarios: Path, canary: Path) -> None:
    seed_dir = scenarios / "email_ops" / "seed_data"
    (seed_dir / "mailbox_again.json").symlink_to(seed_dir / "mailbox.json")
    _edit_task(scenarios, lambda t: t["seed_data"].update(email=["mailbox_again.json"]))
    scenario = _load(scenarios)
    [payload] = scenario.seed_payload(scenario.task(TASK_ID), "email")
    assert payload == json.loads((seed_dir / "mailbox.json").read_text(encoding="utf-8"))


def test_provisioning_reads_no_seed_outside_the_scenario_whatever_the_task_says(scenarios: Path, canary: Path) -> None:
    """Defence in depth: a task that never went through the loader (a run's task override) names a file outside."""
    scenario = _load(scenarios)
    hostile = scenario.task(TASK_ID).model_copy(update={"seed_data": {"email": [str(canary)]}})
    with opened_files() as opened:
        with pytest.raises(ScenarioError, match="is not inside"):
            scenario.seed_payload(hostile, "email")
        with pytest.raises(ScenarioError, match="is not inside"):
            scenario.public_task(hostile)
    assert str(canary) not in opened


def test_the_seed_data_endpoint_serves_no_link_out_of_the_scenario(scenarios: Path, canary: Path) -> None:
    (scenarios / "email_ops" / "seed_data" / "linked.json").symlink_to(canary)
    scenario = _load(scenarios)
    assert "linked.json" not in scenario.seed_files() and "mailbox.json" in scenario.seed_files()
    with opened_files() as opened, pytest.raises(FileNotFoundError):
        scenario.seed_file("linked.json")
    assert str(canary) not in opened


# -- the scenario's own files ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tasks/email_ops_099.json", "npcs.json"])
def test_a_scenario_file_linked_out_of_the_scenario_is_not_read(scenarios: Path, canary: Path, name: str) -> None:
    path = scenarios / "email_ops" / name
    path.unlink(missing_ok=True)
    path.symlink_to(canary)
    outside = f"{path}: is a link to a file outside {scenarios / 'email_ops'}; it is not read"
    assert _refused(scenarios, canary) == outside


def test_a_tasks_folder_linked_out_of_the_scenario_is_not_read(scenarios: Path, tmp_path: Path) -> None:
    # The task files are no links themselves: only their folder's resolution, done once per load, finds them out.
    tasks = scenarios / "email_ops" / "tasks"
    outside = tmp_path / "outside_tasks"
    shutil.move(tasks, outside)
    tasks.symlink_to(outside, target_is_directory=True)
    with opened_files() as opened, pytest.raises(ScenarioError) as refused:
        _load(scenarios)
    assert "is a link to a file outside" in str(refused.value)
    assert not [name for name in opened if name.startswith(str(outside))]


def test_a_template_linked_out_of_the_scenario_is_not_read(scenarios: Path, canary: Path) -> None:
    template = scenarios / "email_ops" / "template.json"
    template.unlink()
    template.symlink_to(canary)
    with (
        opened_files() as opened,
        pytest.raises(ScenarioError, match=re.escape("template.json: is a link to a file outside")),
    ):
        ScenarioCatalog(scenarios)
    assert str(canary) not in opened


def test_a_verifier_module_linked_out_of_the_scenario_is_refused(scenarios: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside_module.py"
    outside.write_text("def verify(run_artifacts):\n    return True\n", encoding="utf-8")
    module = scenarios / "email_ops" / "verifiers" / "linked_check.py"
    module.symlink_to(outside)
    with pytest.raises(ScenarioError, match=re.escape(f"{module}: is a link to a file outside")):
        _load(scenarios)


# -- nesting -------------------------------------------------------------------------------------------------


def test_a_task_file_nested_100000_deep_is_refused_without_recursion(scenarios: Path, canary: Path) -> None:
    task = _task_path(scenarios)
    task.write_text(_deep_json(), encoding="utf-8")
    assert _refused(scenarios, canary) == f"{task}: JSON nests deeper than {MAX_JSON_DEPTH} levels"


def test_a_seed_file_nested_100000_deep_is_refused_without_recursion(scenarios: Path, canary: Path) -> None:
    seed = scenarios / "email_ops" / "seed_data" / "mailbox.json"
    seed.write_text('{"emails": ' + _deep_json() + "}", encoding="utf-8")
    assert _refused(scenarios, canary) == f"{seed}: JSON nests deeper than {MAX_JSON_DEPTH} levels"


def test_nesting_up_to_the_limit_loads_and_brackets_inside_strings_do_not_count(scenarios: Path) -> None:
    deepest = "[" * (MAX_JSON_DEPTH - 2) + "]" * (MAX_JSON_DEPTH - 2)
    noise = "[" * HOSTILE_DEPTH
    _edit_task(scenarios, lambda t: t.update(npc_secrets={"aisha_okafor": json.loads(deepest)}, notes=noise))
    assert _load(scenarios).task(TASK_ID).npc_secrets["aisha_okafor"] == json.loads(deepest)


# -- ids -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", ["email\x00ops", "email/../ops", "../email_ops", ".hidden", "x" * 129, "ops\n"])
def test_a_task_id_that_is_not_a_plain_name_is_refused(scenarios: Path, canary: Path, task_id: str) -> None:
    task = _edit_task(scenarios, lambda t: t.update(task_id=task_id))
    message = _refused(scenarios, canary)
    assert message.startswith(f"{task}: task_id: task_id {task_id[:80]!r} must be letters, digits")


def test_verifier_and_npc_ids_that_are_not_plain_names_are_refused(scenarios: Path, canary: Path) -> None:
    task = _edit_task(scenarios, lambda t: t.update(verifiers=["../../outside/canary"]))
    assert _refused(scenarios, canary).startswith(f"{task}: verifiers: verifiers[0] '../../outside/canary' must be")

    npcs = scenarios / "email_ops" / "npcs.json"
    profiles = json.loads(npcs.read_text(encoding="utf-8"))
    profiles[0]["profile_id"] = "../aisha"
    npcs.write_text(json.dumps(profiles), encoding="utf-8")
    _edit_task(scenarios, lambda t: t.update(verifiers=["projector_request"]))
    assert _refused(scenarios, canary).startswith(f"{npcs}: [0].profile_id: profile_id '../aisha' must be")


@pytest.mark.parametrize("scenario_id", ["..", "..:1.0.0", "email_ops:..", "a/b:1.0.0", "email_ops:1\n"])
def test_a_scenario_id_that_could_name_another_folder_is_refused(scenarios: Path, scenario_id: str) -> None:
    template = scenarios / "email_ops" / "template.json"
    raw = json.loads(template.read_text(encoding="utf-8"))
    template.write_text(json.dumps({**raw, "scenario_id": scenario_id}), encoding="utf-8")
    with pytest.raises(ScenarioError, match="scenario_id: scenario_id must look like"):
        ScenarioCatalog(scenarios)


def test_the_builtin_scenarios_still_load() -> None:
    catalog = ScenarioCatalog(builtin_scenarios_dir())
    assert all(scenario.tasks() for scenario in catalog.all())


# -- SimLab bundles ------------------------------------------------------------------------------------------


def _bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle"
    (bundle / "tasks").mkdir(parents=True)
    task = {"meta": {"task_id": "ask_it"}, "task": "Ask IT for a projector.", "tool_servers": [{"name": "email-env"}]}
    (bundle / "tasks" / "ask_it.json").write_text(json.dumps(task), encoding="utf-8")
    return bundle


def test_a_bundle_rubric_linked_out_of_the_bundle_is_not_read(tmp_path: Path, canary: Path) -> None:
    bundle = _bundle(tmp_path)
    (bundle / "rubrics").mkdir()
    (bundle / "rubrics" / "ask_it.md").symlink_to(canary)
    with (
        opened_files() as opened,
        pytest.raises(BundleImportError, match=re.escape("ask_it.md: is a link to a file outside")),
    ):
        import_bundle(bundle, tmp_path / "scenarios")
    assert str(canary) not in opened


def test_a_bundle_task_nested_100000_deep_is_refused(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    deep = bundle / "tasks" / "deep.json"
    deep.write_text(_deep_json(), encoding="utf-8")
    with pytest.raises(BundleImportError, match=re.escape(f"{deep}: JSON nests deeper than {MAX_JSON_DEPTH} levels")):
        import_bundle(bundle, tmp_path / "scenarios")


def test_a_bundle_cannot_be_imported_as_the_parent_folder(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    (scenarios / "kept").mkdir(parents=True)
    with pytest.raises(BundleImportError, match=re.escape("--scenario-id '..'")):
        import_bundle(_bundle(tmp_path), scenarios, "..", overwrite=True)
    assert (scenarios / "kept").is_dir()


# -- the CLI -------------------------------------------------------------------------------------------------


def _cli_env(tmp_path: Path, scenarios: Path) -> tuple[Path, dict[str, str]]:
    """A sweep config of one task of the broken scenario, and the environment that points the CLI at them."""
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    config = sweeps / "confined.yaml"
    config.write_text(
        f'name: confined\nscenarios: ["{SCENARIO_ID}"]\ntask_ids: [{TASK_ID}]\nrollout_count: 1\n'
        "models:\n  - {name: sim-oracle, model: sim-oracle, base_url: 'sim://local'}\n",
        encoding="utf-8",
    )
    env = {
        "EVAL_PIPELINES_SCENARIOS_DIR": str(scenarios),
        "EVAL_PIPELINES_DATA_DIR": str(tmp_path / "data"),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
    }
    return config, env


def _assert_user_error(code: int, out: str, err: str, canary: Path, *names: str) -> None:
    assert code == EXIT_USER_ERROR, err
    assert "Traceback" not in err and err.count("eval-pipelines: error:") == 1, err
    for name in names:
        assert name in err, f"{name!r} not named in: {err}"
    assert canary.read_text() not in out + err


def test_the_cli_refuses_an_absolute_seed_path_with_exit_2(
    tmp_path: Path, scenarios: Path, canary: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    task = _edit_task(scenarios, lambda t: t["seed_data"].update(email=[str(canary)]))
    config, env = _cli_env(tmp_path, scenarios)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with opened_files() as opened:
        code = main(["sweep", "--config", str(config), "--skip-assessment", "--sweep-id", "confined-test"])
    captured = capfd.readouterr()
    _assert_user_error(code, captured.out, captured.err, canary, f"{task}: seed_data.email[0]:", "is not inside")
    assert str(canary) not in opened
    assert not (tmp_path / "data" / "service").exists(), "a run was started for a hostile scenario"


def test_the_installed_cli_refuses_a_task_file_nested_100000_deep_with_exit_2(
    tmp_path: Path, scenarios: Path, canary: Path
) -> None:
    """The console script in its own process: a RecursionError would print a traceback and exit 1."""
    _task_path(scenarios).write_text(_deep_json(), encoding="utf-8")
    config, env = _cli_env(tmp_path, scenarios)
    executable = Path(sys.executable).parent / "eval-pipelines"
    done = subprocess.run(
        [str(executable), "sweep", "--config", str(config), "--skip-assessment"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env, "PYTHONWARNINGS": "ignore"},
    )
    _assert_user_error(
        done.returncode, done.stdout, done.stderr, canary, str(_task_path(scenarios)), "nests deeper than"
    )
    assert done.stdout == ""
