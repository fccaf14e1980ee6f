"""Acceptance through the real CLI: a sweep where one pair's coverage is below the sweep's `min_coverage` (its
model endpoint is down, so none of its rollouts is scored; the error gate is switched off to isolate coverage).
`eval-pipelines sweep` exits 3 naming the gate, and its catalog run recorded the failed blocking check in Dagster.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines.cli import EXIT_ERRORS
from tests.reliability.support_faults import closed_port
from tests.reliability.support_runs import make_dagster_home

pytestmark = pytest.mark.slow

TASKS = ["email_ops_001", "email_ops_002"]


def test_sweep_below_coverage_exits_3_naming_the_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = closed_port()
    config = tmp_path / "sweeps" / "gated.yaml"
    config.parent.mkdir()
    config.write_text(
        "name: gated\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        f"task_ids: {TASKS}\n"
        "rollout_count: 1\n"
        "error_retries: 0\n"
        "error_threshold: 1.0\n"
        "min_coverage: 0.9\n"
        "models:\n"
        "  - {name: sim-oracle, model: sim-oracle, base_url: 'sim://local'}\n"
        f"  - {{name: dead-model, model: qwen, base_url: 'http://127.0.0.1:{port}/v1', api_key_env: DEAD_KEY}}\n",
        encoding="utf-8",
    )
    home = make_dagster_home(tmp_path / "dagster_home")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "EVAL_PIPELINES_DATA_DIR": str(tmp_path / "data"),
        "DEAD_KEY": "not-a-real-key",
    }
    argv = ["sweep", "--config", str(config), "--skip-assessment", "--sweep-id", "gated-1"]
    done = subprocess.run(
        [sys.executable, "-m", "eval_pipelines.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == EXIT_ERRORS, done.stderr[-3000:]
    gate_lines = [ln for ln in done.stderr.splitlines() if ln.startswith("eval-pipelines: gate")]
    assert gate_lines == [
        "eval-pipelines: gate coverage failed for sweep gated-1: dead-model \u00d7 email_ops:1.0.0: 0/2 planned "
        "rollouts scored (0% < 90%)"
    ], done.stderr[-3000:]
    assert "not published: gate(s) coverage failed" in done.stderr
    assert "failed: eval_catalog" not in done.stderr  # the catalog was built; only its gate failed

    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        coverage = _latest_evaluation(instance, "gate_coverage")
        assert coverage.passed is False and coverage.blocking and "dead-model" in (coverage.description or "")
        assert _latest_evaluation(instance, "gate_error_share").passed is True


def _latest_evaluation(instance: dg.DagsterInstance, check: str) -> dg.AssetCheckEvaluation:
    key = dg.AssetCheckKey(dg.AssetKey("eval_catalog"), check)
    [record] = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    event = record.event.dagster_event if record.event is not None else None
    data = event.event_specific_data if event is not None else None
    assert isinstance(data, dg.AssetCheckEvaluation), record
    return data
