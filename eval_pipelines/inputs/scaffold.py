"""`eval-pipelines init`: a project directory to work in, made from the package's templates.

A project directory holds the inputs (`sweeps/`, `scenarios/`) and receives every output (`data/`); the Dagster
instance's `dagster.yaml` and the code location's `workspace.yaml` sit at its top. The example scenario is one
built-in task copied under a name of its own, with its verifier: a starting point that is known to work.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from eval_pipelines.inputs.paths import PROJECT_TEMPLATE_DIR, builtin_scenarios_dir

#: The example scenario a new project starts with.
EXAMPLE_FAMILY = "my_email_ops"
EXAMPLE_SCENARIO_ID = f"{EXAMPLE_FAMILY}:0.1.0"
EXAMPLE_TASK_ID = f"{EXAMPLE_FAMILY}_001"
#: The built-in task it is copied from, and the verifier modules that task needs.
_SOURCE_FAMILY = "email_ops"
_SOURCE_TASK = "email_ops_002"
_SOURCE_VERIFIER_FILES = ("__init__.py", "_common.py", "delete_toner_promo.py")
#: Files copied from the package's project template, relative to the project directory.
TEMPLATE_FILES = ("dagster.yaml", "workspace.yaml", "sweeps/default.yaml")


class ScaffoldError(ValueError):
    """The directory already holds files a scaffold would overwrite (each is named)."""


@dataclass(frozen=True)
class Scaffold:
    root: Path
    written: tuple[Path, ...]


def _example_targets(root: Path) -> list[Path]:
    return [root / "scenarios" / EXAMPLE_FAMILY]


def scaffold_project(root: Path, *, force: bool = False) -> Scaffold:
    """Write a project directory at `root` (made if missing): the sweep config, the example scenario and its
    verifier, `dagster.yaml` and `workspace.yaml`. Refuses to overwrite anything unless `force`."""
    root = root.resolve()
    if root.exists() and not root.is_dir():
        raise ScaffoldError(f"{root}: not a directory")
    targets = [root / name for name in TEMPLATE_FILES] + _example_targets(root)
    existing = [str(p) for p in targets if p.exists()]
    if existing and not force:
        raise ScaffoldError(f"{root}: would overwrite {', '.join(existing)} (--force replaces them)")
    written: list[Path] = []
    for name in TEMPLATE_FILES:
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PROJECT_TEMPLATE_DIR / name, target)
        written.append(target)
    written.append(_write_example_scenario(root / "scenarios" / EXAMPLE_FAMILY))
    (root / "data").mkdir(exist_ok=True)
    return Scaffold(root, tuple(written))


def _write_example_scenario(target: Path) -> Path:
    source = builtin_scenarios_dir() / _SOURCE_FAMILY
    if target.exists():
        shutil.rmtree(target)
    (target / "tasks").mkdir(parents=True)
    (target / "verifiers").mkdir()
    shutil.copytree(source / "seed_data", target / "seed_data")
    shutil.copyfile(source / "npcs.json", target / "npcs.json")
    template = json.loads((source / "template.json").read_text(encoding="utf-8"))
    template.update(
        scenario_id=EXAMPLE_SCENARIO_ID,
        name="My email operations (example)",
        description="An example scenario of this project: one task copied from the built-in email_ops, with its "
        "verifier. Edit the task in tasks/, the check in verifiers/, the seed mailbox in seed_data/.",
    )
    (target / "template.json").write_text(json.dumps(template, indent=2) + "\n", encoding="utf-8")
    task = json.loads((source / "tasks" / f"{_SOURCE_TASK}.json").read_text(encoding="utf-8"))
    task["task_id"] = EXAMPLE_TASK_ID
    if isinstance(task.get("rubric"), dict):
        task["rubric"]["task_id"] = EXAMPLE_TASK_ID
    (target / "tasks" / f"{EXAMPLE_TASK_ID}.json").write_text(json.dumps(task, indent=2) + "\n", encoding="utf-8")
    for name in _SOURCE_VERIFIER_FILES:
        shutil.copyfile(source / "verifiers" / name, target / "verifiers" / name)
    return target
