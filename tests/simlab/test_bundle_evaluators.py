"""SimLab runs a task's `verifiers`, else its `evaluators` (`task_data.get("verifiers") or
task_data.get("evaluators")` in `simlab tasks run`): a bundle that lists its verifiers under `evaluators` imports
with them, graded, and nothing about the key is reported as left out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.simlab_bundle import NOTHING_GRADES, import_bundle

CODING_BUNDLE = Path(__file__).resolve().parent / "bundles" / "coding_files"
TASK = "workspace_summary"


def _bundle_with(tmp_path: Path, **keys: object) -> Path:
    bundle = Path(shutil.copytree(CODING_BUNDLE, tmp_path / "bundle"))
    path = bundle / "tasks" / f"{TASK}.json"
    task = json.loads(path.read_text())
    entries = task.pop("verifiers")
    task.update({key: entries if value is None else value for key, value in keys.items()})
    path.write_text(json.dumps(task))
    return bundle


def test_evaluators_are_the_tasks_verifiers_when_it_lists_no_verifiers(tmp_path: Path) -> None:
    report = import_bundle(_bundle_with(tmp_path, evaluators=None), tmp_path / "scenarios", "coding_files:1.0.0")
    assert report.unrunnable == {} and report.notes == {}
    task = ScenarioCatalog(tmp_path / "scenarios").get("coding_files").task(TASK)
    assert task.verifiers == ["summary_file", "summary_listed"] and task.unrunnable_reason is None


def test_verifiers_win_over_evaluators_and_a_missing_evaluator_is_named(tmp_path: Path) -> None:
    missing = [{"func": "python_module", "module": "collinear.scenarios.coding.verifiers.nowhere"}]
    bundle = _bundle_with(tmp_path, verifiers=None, evaluators=missing)
    import_bundle(bundle, tmp_path / "scenarios", "coding_files:1.0.0")
    assert ScenarioCatalog(tmp_path / "scenarios").get("coding_files").task(TASK).verifiers == [
        "summary_file",
        "summary_listed",
    ]

    only_missing = _bundle_with(tmp_path / "second", evaluators=missing)
    report = import_bundle(only_missing, tmp_path / "second" / "scenarios", "coding_files:1.0.0")
    assert "evaluators[0]" in report.unrunnable[TASK] and NOTHING_GRADES not in report.unrunnable[TASK]
