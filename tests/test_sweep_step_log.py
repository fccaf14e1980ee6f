"""`eval-pipelines sweep` keeps Dagster's log lines out of its progress display: a sweep whose endpoint is down
makes Dagster log a warning (the rollouts that ended in errors); it lands in data/logs/sweep-<id>.log, and the
terminal shows the bar, the summary and where the log is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipelines.lib.serving import free_port
from tests.reliability.support_runs import make_dagster_home

pytestmark = pytest.mark.slow

SWEEP_ID = "steplog-1"


def test_dagster_warnings_go_to_the_sweep_log_not_over_the_progress_bar(tmp_path: Path) -> None:
    config = tmp_path / "sweeps" / "steplog.yaml"
    config.parent.mkdir()
    config.write_text(
        "name: steplog\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        "task_ids: [email_ops_001]\n"
        "rollout_count: 1\n"
        "models:\n"
        "  - {name: sim-oracle, model: sim-oracle, base_url: 'sim://local'}\n"
        f"  - {{name: down, model: down, base_url: 'http://127.0.0.1:{free_port()}/v1', api_key_env: DOWN_KEY}}\n",
        encoding="utf-8",
    )
    data = tmp_path / "data"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(make_dagster_home(tmp_path / "dagster_home")),
        "EVAL_PIPELINES_DATA_DIR": str(data),
        "DOWN_KEY": "k",
    }
    command = [sys.executable, "-m", "eval_pipelines.cli", "sweep", "--config", str(config), "--skip-assessment"]
    result = subprocess.run(
        [*command, "--sweep-id", SWEEP_ID], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    log = data / "logs" / f"sweep-{SWEEP_ID}.log"
    assert log.is_file(), result.stderr
    text = log.read_text()
    assert "dagster - WARNING" in text and "1 of 1 rollouts ended in errors" in text
    assert "dagster - " not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert f"Dagster's log of the sweep's steps (warnings, errors): {log}" in result.stderr
    assert "2/2" in result.stderr  # the progress bar, finished
