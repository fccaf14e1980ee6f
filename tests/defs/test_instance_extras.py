"""dagster-postgres is an extra (`pip install 'eval_pipelines[postgres]'`): an instance whose dagster.yaml names it
opens only where it is installed, and where it is not the error says which extra to install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from eval_pipelines.inputs.paths import builtin_scenarios_dir

OPEN = (
    "import sys; sys.modules['dagster_postgres'] = None\n"
    "from eval_pipelines.defs.runner import open_instance\n"
    "from eval_pipelines.inputs.sweeps import ConfigError\n"
    "try:\n"
    "    open_instance()\n"
    "except ConfigError as exc:\n"
    "    print('ConfigError:', exc)\n"
)


def test_a_postgres_instance_without_the_extra_names_it(tmp_path: Path) -> None:
    shutil.copy(builtin_scenarios_dir().parent / "deploy" / "postgres" / "dagster.yaml", tmp_path / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": "1"}
    env.update(DAGSTER_PG_USERNAME="u", DAGSTER_PG_PASSWORD="", DAGSTER_PG_DB="d")
    done = subprocess.run([sys.executable, "-c", OPEN], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith(f"ConfigError: {tmp_path / 'dagster.yaml'} names dagster_postgres"), done.stdout
    assert line.endswith("pip install 'eval_pipelines[postgres]'")
