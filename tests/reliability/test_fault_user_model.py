"""A sweep whose user model is down: every rollout of a multi-turn task is a user_simulator error, left out of the
pass rate, and the CLI exits with EXIT_ERRORS, as a user runs it (subprocess, project and data directory in tmp).

The scenario is a small project scenario written here: one task whose user is simulated, played by the sweep's
`user_model`; the agent is sim-oracle, so nothing but the user's model can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from eval_pipelines.cli import EXIT_ERRORS
from tests.reliability.support_faults import closed_port
from tests.reliability.support_runs import make_dagster_home

SCENARIO = "user_outage:1.0.0"
TASK = {
    "task_id": "ask_inbox",
    "name": "ask about the inbox",
    "description": "Answer the customer's question about their inbox (user outage test).",
    "tool_servers": [{"name": "email"}],
    "verifiers": ["always"],
    "user": {
        "kind": "simulated",
        "system_prompt": "You are a customer asking about your inbox (user outage test persona).",
        "stop_tokens": ["###STOP###"],
        "opening": "How many emails are in my inbox?",
    },
    "reference_answer": "You have some emails.",
}


def _project(root: Path) -> None:
    scenario = root / "scenarios" / "user_outage"
    (scenario / "tasks").mkdir(parents=True)
    (scenario / "verifiers").mkdir()
    template = {"scenario_id": SCENARIO, "name": "user outage", "tool_servers": [{"name": "email"}]}
    (scenario / "template.json").write_text(json.dumps(template), encoding="utf-8")
    (scenario / "tasks" / "ask_inbox.json").write_text(json.dumps(TASK), encoding="utf-8")
    (scenario / "verifiers" / "__init__.py").write_text("", encoding="utf-8")
    (scenario / "verifiers" / "always.py").write_text("def verify(run_artifacts):\n    return True, 'ok'\n")


@pytest.mark.slow
def test_a_sweep_whose_user_model_is_down_exits_with_user_simulator_errors(tmp_path: Path) -> None:
    project = tmp_path / "project"
    _project(project)
    port = closed_port()
    config = project / "sweeps" / "users.yaml"
    config.parent.mkdir()
    config.write_text(
        "name: user-outage\n"
        f'scenarios: ["{SCENARIO}"]\n'
        "rollout_count: 1\n"
        "error_retries: 0\n"
        "models:\n"
        "  - {name: oracle, model: sim-oracle, base_url: 'sim://local'}\n"
        "user_model:\n"
        f"  {{name: dead-user, model: qwen, base_url: 'http://127.0.0.1:{port}/v1', api_key_env: DEAD_KEY}}\n",
        encoding="utf-8",
    )
    data = tmp_path / "data"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(make_dagster_home(tmp_path / "dagster_home")),
        "EVAL_PIPELINES_DATA_DIR": str(data),
        "EVAL_PIPELINES_PROJECT_DIR": str(project),
        "DEAD_KEY": "not-a-real-key",
    }
    done = subprocess.run(
        [sys.executable, "-m", "eval_pipelines.cli", "sweep", "--config", str(config), "--skip-assessment"],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == EXIT_ERRORS, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    # Coverage fails too (no rollout was scored); the error-share gate's line says why.
    line = next(ln for ln in done.stderr.splitlines() if f"oracle \u00d7 {SCENARIO}: 1/1 errors" in ln)
    assert "gate error_share failed" in line, line
    assert f"oracle \u00d7 {SCENARIO}: 1/1 errors (user_simulator: the model playing the user failed" in line, line

    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "select model_name, n, n_errors, pass_rate from pass_rates where model_name = 'oracle'"
        ).fetchall()
        [error_class] = con.execute(
            "select error_class from rollout_scores where model_name = 'oracle'"
        ).fetchone() or [None]
    finally:
        con.close()
    assert rows == [("oracle", 0, 1, None)]
    assert error_class == "user_simulator"
