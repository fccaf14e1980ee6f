"""The CLI's Dagster instance: `$DAGSTER_HOME`'s, else the project directory's. Its own module, light to import
(Dagster and the project's paths only), so a command that records in Dagster can open it without loading the
asset definitions."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import dagster as dg

from eval_pipelines.inputs.paths import dagster_config_dir, project_dir

#: Beside dagster.yaml: held while an instance is opened (see `open_instance`).
INSTANCE_LOCK_FILE = ".eval_pipelines_instance.lock"


def open_instance() -> dg.DagsterInstance:
    """`$DAGSTER_HOME`'s instance, else the project directory's `dagster.yaml` (or, in a project without one, the
    package's template of it), with its storage under the project's `data/dagster`.

    Opening is serialised across processes: the first open of a fresh instance creates its storage schema, and
    two sweeps starting at once on one home would otherwise race to create it."""
    home = Path(os.environ["DAGSTER_HOME"]) if os.environ.get("DAGSTER_HOME") else project_dir()
    if not os.environ.get("DAGSTER_HOME"):
        # Relative paths in a project's dagster.yaml are relative to the project directory.
        os.chdir(project_dir())
    with open(home / INSTANCE_LOCK_FILE, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            try:
                if os.environ.get("DAGSTER_HOME"):
                    instance = dg.DagsterInstance.get()
                else:
                    instance = dg.DagsterInstance.from_config(str(dagster_config_dir()))
            except Exception as exc:
                _raise_for_missing_extra(exc, home if os.environ.get("DAGSTER_HOME") else dagster_config_dir())
                raise
            instance.get_runs(limit=1)  # touches every storage, so each finishes its schema under the lock
            return instance
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


#: Dagster libraries an instance's dagster.yaml may name that are extras of this package, and the extra.
_INSTANCE_EXTRAS = {"dagster_postgres": "postgres", "dagster_celery": "celery", "dagster_k8s": "k8s"}


def _raise_for_missing_extra(exc: BaseException, config_dir: Path) -> None:
    """A ConfigError naming the extra to install when opening the instance failed on a library that is one."""
    from eval_pipelines.inputs.sweeps import ConfigError  # the sweep schemas: not imported unless needed

    cause: BaseException | None = exc
    while cause is not None:
        name = getattr(cause, "name", None) if isinstance(cause, ImportError) else None
        extra = _INSTANCE_EXTRAS.get((name or "").split(".")[0])
        if extra is not None:
            raise ConfigError(
                f"{config_dir / 'dagster.yaml'} names {name}, which is not installed: "
                f"pip install 'eval_pipelines[{extra}]'"
            ) from exc
        cause = cause.__cause__ or cause.__context__
