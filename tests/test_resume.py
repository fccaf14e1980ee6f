"""Kill -9 a sweep mid-partition and run it again: every task x rollout index ends with exactly one completed
rollout, rollouts that had completed are never executed again, and the warehouse has no duplicate rows."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.support.scripted_llm import Script, create_scripted_app

SWEEP = """
name: resumable
scenarios: ["email_ops:1.0.0"]
rollout_count: 3
max_parallel: 2
models:
  - {{name: slow-model, model: slow, base_url: "{url}/v1", api_key_env: EP_RESUME_KEY}}
"""


def _completed(store: Path) -> dict[str, str]:
    if not store.is_file():
        return {}
    try:
        with sqlite3.connect(store) as db:
            rows = db.execute("select rollout_id, completed_at from rollouts where status = 'completed'").fetchall()
    except sqlite3.OperationalError:  # the store exists but its tables are not created yet
        return {}
    return dict(rows)


@pytest.mark.slow
def test_kill_and_rerun_completes_only_the_missing_rollouts(tmp_path: Path, serve: Any) -> None:
    script = Script([{"sleep": 0.4, "then": {"role": "assistant", "content": "done"}}])
    model = serve(create_scripted_app(script))
    config = tmp_path / "resumable.yaml"
    config.write_text(SWEEP.format(url=model.url))
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(f"storage:\n  sqlite:\n    base_dir: {home / 'storage'}\n")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "EVAL_PIPELINES_DATA_DIR": str(tmp_path / "data"),
        "EP_RESUME_KEY": "k",
    }
    command = [
        sys.executable,
        "-m",
        "eval_pipelines.cli",
        "sweep",
        "--config",
        str(config),
        "--sweep-id",
        "r1",
        "--skip-assessment",
    ]
    store = tmp_path / "data" / "service" / "runs.sqlite3"

    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(_completed(store)) < 6 and time.monotonic() < deadline:
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = _completed(store)
    assert 6 <= len(before) < 36, "the kill must land mid-partition"
    requests_before = len(script.requests)

    assert subprocess.run(command, env=env, capture_output=True, timeout=240).returncode == 0
    after = _completed(store)
    assert len(after) == 36
    assert all(after[rollout_id] == completed_at for rollout_id, completed_at in before.items())
    rerun_users = {r.get("user") for r in script.requests[requests_before:]}
    assert not rerun_users & set(before)  # no completed rollout was executed again

    with sqlite3.connect(store) as db:
        slots = db.execute("select task_id, rollout_index, count(*) from rollouts group by 1, 2").fetchall()
    assert len(slots) == 12 * 3 and {n for *_, n in slots} == {1}
    part = tmp_path / "data" / "warehouse" / "rollouts" / "model=slow-model" / "scenario=email_ops_1.0.0"
    table = pq.read_table(part)
    ids = table.column("rollout_id").to_pylist()
    assert len(ids) == len(set(ids)) == 36
    # The killed sweep's Dagster run was failed (and its pool slots freed) by the re-run; none is left STARTED.
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(home))
    try:
        stuck = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
        failed = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
    finally:
        instance.dispose()
    assert stuck == [] and len(failed) >= 1
