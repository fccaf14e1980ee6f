"""An outage through the real CLI: a sweep whose only model endpoint is down must not read as a model at 0%.

The sweep runs as a user runs it (`python -m eval_pipelines.cli sweep`, in a subprocess, Dagster home and data
directory in tmp). Every rollout errors after its retries; the process says which pair broke and why, exits
with EXIT_ERRORS, and every metric view shows the errors beside n, with a NULL pass rate.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipelines.cli import EXIT_ERRORS
from tests.reliability.support_faults import closed_port
from tests.reliability.support_runs import make_dagster_home

TASKS = ["email_ops_001", "email_ops_002", "email_ops_003", "email_ops_004"]
#: The acceptance bound: a dead endpoint is reported within a minute, not after hours of retries.
DEADLINE_SECONDS = 60
SWEEP_ID = ("--sweep-id", "dead-1")


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@pytest.mark.slow
def test_dead_endpoint_exits_non_zero_names_the_cause_and_scores_no_pass_rate(tmp_path: Path) -> None:
    port = closed_port()
    config = tmp_path / "sweeps" / "dead.yaml"
    config.parent.mkdir()
    config.write_text(
        "name: dead\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        f"task_ids: {TASKS}\n"
        "rollout_count: 1\n"
        "error_retries: 2\n"
        "error_retry_backoff_seconds: 0.2\n"
        "models:\n"
        f"  - {{name: dead-model, model: qwen, base_url: 'http://127.0.0.1:{port}/v1', api_key_env: DEAD_KEY}}\n",
        encoding="utf-8",
    )
    data = tmp_path / "data"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(make_dagster_home(tmp_path / "dagster_home")),
        "EVAL_PIPELINES_DATA_DIR": str(data),
        "DEAD_KEY": "not-a-real-key",
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "eval_pipelines.cli", "sweep", "--config", str(config), "--skip-assessment", *SWEEP_ID],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS * 3,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == EXIT_ERRORS, done.stderr[-3000:]
    assert elapsed < DEADLINE_SECONDS, f"the outage took {elapsed:.0f}s to report"
    assert "Traceback" not in done.stderr
    line = next(ln for ln in done.stderr.splitlines() if "dead-model" in ln and "errors (" in ln)
    assert f"dead-model \u00d7 email_ops:1.0.0: {len(TASKS)}/{len(TASKS)} errors (model_endpoint: " in line, line
    assert f"could not reach http://127.0.0.1:{port}/v1" in line, line

    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    try:
        [rates] = _rows(con, "select * from pass_rates")
        assert (rates["n"], rates["passes"], rates["n_errors"], rates["pass_rate"]) == (0, 0, len(TASKS), None)
        assert rates["error_share"] == 1.0
        for view in ("scenario_model_metrics", "model_metrics"):
            [row] = _rows(con, f"select * from {view}")
            assert (row["n"], row["passes"], row["n_errors"], row["pass_rate"]) == (0, 0, len(TASKS), None), view
        task_rows = _rows(con, "select * from task_metrics")
        assert len(task_rows) == len(TASKS)
        assert all((r["n"], r["n_errors"], r["pass_rate"]) == (0, 1, None) for r in task_rows)
        for view in ("pass_at_k", "model_pass_at_k"):
            [row] = _rows(con, f"select * from {view}")
            assert (row["k"], row["pass_at_k"], row["n_errors"], row["error_share"]) == (None, None, len(TASKS), 1.0)
        attempts = _rows(con, "select attempt, error_class from rollout_attempts order by rollout_id, attempt")
        assert len(attempts) == 3 * len(TASKS) and {a["error_class"] for a in attempts} == {"model_endpoint"}
    finally:
        con.close()
