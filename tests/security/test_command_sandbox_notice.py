"""Where the namespace sandbox is refused, a sweep says so: a warning line in its output and `command_sandbox` in
the `eval_run` materialisation's metadata; a sweep whose scenarios never run commands says nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.pipeline.command_sandbox import sandbox_for, sandbox_warning
from eval_pipelines.toolservers.files import (
    COMMAND_WRAPPER_ENV,
    SANDBOX_LANDLOCK_ONLY,
    SANDBOX_NAMESPACES,
    CommandSandbox,
)
from tests.reliability.support_runs import make_dagster_home
from tests.security.support_sandbox import refusing_wrapper

COMMANDS_SCENARIO = "office_ops:1.0.0"
COMMANDS_TASK = "office_ops_003"


def test_only_scenarios_that_run_commands_are_concerned() -> None:
    catalog = ScenarioCatalog()
    assert sandbox_for([catalog.get("email_ops:1.0.0")]) is None
    assert sandbox_for([catalog.get(COMMANDS_SCENARIO)]) is not None
    assert sandbox_warning(None) is None and sandbox_warning(CommandSandbox(SANDBOX_NAMESPACES)) is None
    warning = sandbox_warning(CommandSandbox(SANDBOX_LANDLOCK_ONLY, "unshare: Operation not permitted"))
    assert warning is not None and "NOT sandboxed" in warning and "unshare: Operation not permitted" in warning


@pytest.mark.slow
def test_a_sweep_without_namespaces_warns_and_records_it(tmp_path: Path) -> None:
    config = tmp_path / "sweeps" / "commands.yaml"
    config.parent.mkdir()
    config.write_text(
        "name: commands\n"
        f'scenarios: ["{COMMANDS_SCENARIO}"]\n'
        f"task_ids: [{COMMANDS_TASK}]\n"
        "rollout_count: 1\n"
        "models:\n"
        "  - {name: sim-oracle, model: sim-oracle, base_url: 'sim://local'}\n",
        encoding="utf-8",
    )
    home = make_dagster_home(tmp_path / "dagster_home")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "EVAL_PIPELINES_DATA_DIR": str(tmp_path / "data"),
        COMMAND_WRAPPER_ENV: str(refusing_wrapper(tmp_path)),
    }
    command = [sys.executable, "-m", "eval_pipelines.cli", "sweep", "--config", str(config), "--skip-assessment"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "warning: run_command is NOT sandboxed in namespaces on this host (landlock-only" in done.stderr
    with dg.DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("eval_run"))
    assert event is not None and event.asset_materialization is not None
    assert event.asset_materialization.metadata["command_sandbox"].value == SANDBOX_LANDLOCK_ONLY
