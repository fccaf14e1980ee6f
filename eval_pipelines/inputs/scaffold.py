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

from eval_pipelines.inputs.paths import BUILTIN_DIR, PROJECT_TEMPLATE_DIR, builtin_scenarios_dir

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
#: The production configuration the package ships (`init --postgres`, `init --celery`).
DEPLOY_DIR = BUILTIN_DIR / "deploy"
POSTGRES_DAGSTER_YAML = DEPLOY_DIR / "postgres" / "dagster.yaml"
CELERY_CONFIG = DEPLOY_DIR / "celery" / "dagster_celery_config.py"
#: Where `init --celery` puts the workers' settings and start command, relative to the project directory.
CELERY_DIR = "celery"
CELERY_WORKER_SCRIPT = f"{CELERY_DIR}/worker.sh"
#: One worker, one step at a time; the broker and the instance come from the environment (never from a file).
CELERY_WORKER_COMMAND = (
    f"PYTHONPATH={CELERY_DIR} celery -A dagster_celery.app worker -Q dagster -n worker-1@%h --concurrency 1"
)
_WORKER_SCRIPT = f"""#!/bin/sh
# A dagster-celery worker for this project (written by `eval-pipelines init --celery`). Run it from the project
# directory on every worker machine, with the same environment as the code location:
#   DAGSTER_HOME (the folder holding this project's dagster.yaml, Postgres), DAGSTER_PG_HOST, DAGSTER_PG_PORT,
#   DAGSTER_PG_USERNAME, DAGSTER_PG_PASSWORD, DAGSTER_PG_DB,
#   DAGSTER_CELERY_BROKER_URL and DAGSTER_CELERY_BACKEND_URL (redis://... or amqp://... with rpc://),
#   EVAL_PIPELINES_DATA_DIR on a filesystem every worker shares.
# Then start Dagster with EVAL_PIPELINES_EXECUTOR=celery so the sweep schedules use the Celery job.
set -e
cd "$(dirname "$0")/.."
exec env {CELERY_WORKER_COMMAND} "$@"
"""


class ScaffoldError(ValueError):
    """The directory already holds files a scaffold would overwrite (each is named)."""


@dataclass(frozen=True)
class Scaffold:
    root: Path
    written: tuple[Path, ...]


def _example_targets(root: Path) -> list[Path]:
    return [root / "scenarios" / EXAMPLE_FAMILY]


def scaffold_project(
    root: Path, *, force: bool = False, postgres: bool = False, celery: bool = False, production_only: bool = False
) -> Scaffold:
    """Write a project directory at `root` (made if missing): the sweep config, the example scenario and its
    verifier, `dagster.yaml` and `workspace.yaml`. Refuses to overwrite anything unless `force`.

    `postgres` writes the production instance (Postgres storage, every setting from `DAGSTER_PG_*`) as
    `dagster.yaml`; `celery` implies it (workers on several machines cannot share SQLite) and adds the workers'
    settings and start command under `celery/`. `production_only` writes just those files into an existing project;
    its `dagster.yaml` is replaced without `force` only while it is still the template `init` wrote."""
    root = root.resolve()
    if root.exists() and not root.is_dir():
        raise ScaffoldError(f"{root}: not a directory")
    postgres = postgres or celery
    sources = {} if production_only else {name: PROJECT_TEMPLATE_DIR / name for name in TEMPLATE_FILES}
    if postgres:
        sources["dagster.yaml"] = POSTGRES_DAGSTER_YAML
    if celery:
        sources[f"{CELERY_DIR}/dagster_celery_config.py"] = CELERY_CONFIG
    targets = [root / name for name in sources] + ([] if production_only else _example_targets(root))
    existing = [str(p) for p in targets if p.exists() and not (production_only and _is_template(p))]
    if existing and not force:
        raise ScaffoldError(f"{root}: would overwrite {', '.join(existing)} (--force replaces them)")
    written: list[Path] = []
    for name, source in sources.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(target)
    if celery:
        script = root / CELERY_WORKER_SCRIPT
        script.write_text(_WORKER_SCRIPT, encoding="utf-8")
        script.chmod(0o755)
        written.append(script)
    if not production_only:
        written.append(_write_example_scenario(root / "scenarios" / EXAMPLE_FAMILY))
    (root / "data").mkdir(parents=True, exist_ok=True)
    return Scaffold(root, tuple(written))


def _is_template(path: Path) -> bool:
    """`path` is the project's `dagster.yaml` exactly as `init` wrote it (nothing of the user's to lose)."""
    template = PROJECT_TEMPLATE_DIR / "dagster.yaml"
    return path.name == "dagster.yaml" and path.read_bytes() == template.read_bytes()


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
