"""The project directory: where inputs are read and outputs written, the built-in scenarios beside a project's
own, and the scaffold of `eval-pipelines init`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eval_pipelines.cli import main
from eval_pipelines.inputs.paths import (
    DATA_DIR_ENV,
    PROJECT_DIR_ENV,
    PROJECT_TEMPLATE_DIR,
    SCENARIOS_DIR_ENV,
    SWEEPS_DIR_ENV,
    builtin_scenarios_dir,
    dagster_config_dir,
    data_dir,
    scenarios_dir,
    sweeps_dir,
)
from eval_pipelines.inputs.scaffold import EXAMPLE_SCENARIO_ID, EXAMPLE_TASK_ID, ScaffoldError, scaffold_project
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.sweeps import load_all_sweeps, sweep_scenarios

BUILTIN_IDS = ["email_ops:1.0.0", "office_ops:1.0.0", "team_chat:1.0.0"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (DATA_DIR_ENV, SCENARIOS_DIR_ENV, SWEEPS_DIR_ENV, PROJECT_DIR_ENV):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def test_an_empty_folder_reads_the_builtin_inputs_and_writes_under_its_own_data(project: Path) -> None:
    assert data_dir() == project / "data"
    assert scenarios_dir() == project / "scenarios"
    assert ScenarioCatalog().ids() == BUILTIN_IDS
    assert set(load_all_sweeps()) == {"default"}  # the built-in default sweep, as the repository has it
    assert sweeps_dir() != project / "sweeps"
    assert dagster_config_dir() == PROJECT_TEMPLATE_DIR
    assert not any(project.iterdir())  # reading wrote nothing


def test_init_writes_a_project_whose_own_sweep_and_example_scenario_are_read(project: Path) -> None:
    made = scaffold_project(project)
    assert {p.relative_to(project).as_posix() for p in made.written} == {
        "dagster.yaml",
        "workspace.yaml",
        "sweeps/default.yaml",
        "scenarios/my_email_ops",
    }
    catalog = ScenarioCatalog()
    assert catalog.ids() == sorted([*BUILTIN_IDS, EXAMPLE_SCENARIO_ID])
    example = catalog.get(EXAMPLE_SCENARIO_ID)
    assert list(example.tasks()) == [EXAMPLE_TASK_ID]
    (task,) = example.tasks().values()
    assert all((example.verifiers_dir / f"{module}.py").is_file() for module in task.verifiers)
    sweeps = load_all_sweeps()
    assert [s.scenario_id for s in sweep_scenarios(sweeps["default"], catalog)] == [EXAMPLE_SCENARIO_ID]
    assert dagster_config_dir() == project
    assert (project / "dagster.yaml").read_text() == (PROJECT_TEMPLATE_DIR / "dagster.yaml").read_text()

    with pytest.raises(ScaffoldError, match="--force"):
        scaffold_project(project)
    (project / "sweeps" / "default.yaml").write_text("edited")
    scaffold_project(project, force=True)
    assert (project / "sweeps" / "default.yaml").read_text() != "edited"


def test_a_project_scenario_with_a_builtin_id_replaces_it(project: Path) -> None:
    copy = project / "scenarios" / "email_ops"
    shutil.copytree(builtin_scenarios_dir() / "email_ops", copy)
    template = json.loads((copy / "template.json").read_text())
    template["name"] = "Our email operations"
    (copy / "template.json").write_text(json.dumps(template))
    catalog = ScenarioCatalog()
    assert catalog.ids() == BUILTIN_IDS
    assert catalog.get("email_ops:1.0.0").root == copy


def test_a_named_scenarios_folder_is_read_alone(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = project.parent / "elsewhere"
    shutil.copytree(builtin_scenarios_dir() / "team_chat", elsewhere / "team_chat")
    monkeypatch.setenv(SCENARIOS_DIR_ENV, str(elsewhere))
    assert ScenarioCatalog().ids() == ["team_chat:1.0.0"]
    assert ScenarioCatalog(elsewhere).ids() == ["team_chat:1.0.0"]


def test_the_cli_init_names_its_conflicts_and_project_dir_is_checked(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(project / "new")]) == 0
    out = capsys.readouterr().out
    assert "wrote sweeps/default.yaml" in out and f"cd {project / 'new'}" in out
    assert main(["init", str(project / "new")]) == 2
    assert "would overwrite" in capsys.readouterr().err
    assert main(["--project-dir", str(project / "missing"), "init"]) == 2
    assert "--project-dir" in capsys.readouterr().err
