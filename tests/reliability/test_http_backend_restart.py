"""`sweep --backend http` outlives its service: the served evaluation service is killed (SIGKILL) mid-sweep and
started again on the same port and data directory; the sweep waits for it, resumes the interrupted rollouts and
ends with every rollout once.

The sweep runs as a user runs it (`python -m eval_pipelines.cli sweep`, Dagster home and data directory in tmp),
against a scripted model that answers slowly without a tool call, so rollouts are in flight at the kill and each
one completes (and fails its verifiers): the counts are exact and the sweep exits 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from eval_pipelines.clients.backend import SERVICE_OUTAGE_SECONDS
from eval_pipelines.lib.serving import free_port
from eval_pipelines.service.store import RunStore
from tests.reliability.support_runs import make_dagster_home
from tests.service.eval_service_support import WRITE_KEY
from tests.service.test_api_restart import ServerProcess
from tests.support.scripted_llm import slow_text_model
from tests.test_sweep_control import _wait_for_rollouts

TASKS = ["email_ops_001", "email_ops_002", "email_ops_003", "email_ops_004"]
ROLLOUT_COUNT = 2
EXPECTED = len(TASKS) * ROLLOUT_COUNT
#: Seconds per model reply: long enough that rollouts are in flight when the service is killed.
REPLY_SECONDS = 1.5
#: How long the service stays down: the sweep's calls fail for this long before it is back.
DOWN_SECONDS = 4.0
SWEEP_ID = "outlives"

pytestmark = pytest.mark.slow


@pytest.fixture
def slow_model() -> Iterator[str]:
    with slow_text_model(REPLY_SECONDS) as url:
        yield url


@pytest.fixture
def services() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for service in started:
        service.stop()


def _rollout_rows(data: Path) -> list[tuple[str, str]]:
    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    try:
        return con.execute("select rollout_id, status from rollouts where sweep_id = ?", [SWEEP_ID]).fetchall()
    finally:
        con.close()


def test_a_sweep_waits_for_a_killed_service_and_ends_with_every_rollout_once(
    tmp_path: Path, slow_model: str, services: list[ServerProcess]
) -> None:
    service_data, port = tmp_path / "service_data", free_port()
    services.append(ServerProcess(service_data, port))
    url = services[0].url
    config = tmp_path / "sweeps" / "outlives.yaml"
    config.parent.mkdir()
    config.write_text(
        "name: outlives\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        f"task_ids: {TASKS}\n"
        f"rollout_count: {ROLLOUT_COUNT}\n"
        "max_parallel: 2\n"
        "models:\n"
        f"  - {{name: slow, model: slow, base_url: '{slow_model}', api_key_env: SLOW_KEY}}\n",
        encoding="utf-8",
    )
    data = tmp_path / "cli_data"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(make_dagster_home(tmp_path / "dagster_home")),
        "EVAL_PIPELINES_DATA_DIR": str(data),
        "SLOW_KEY": "k",
        "EVAL_SERVICE_API_KEY": WRITE_KEY,
    }
    command = [sys.executable, "-m", "eval_pipelines.cli", "sweep", "--config", str(config), "--skip-assessment"]
    sweep = subprocess.Popen(
        [*command, "--sweep-id", SWEEP_ID, "--backend", "http", "--base-url", url],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_rollouts(service_data, 1)
        services[0].kill()
        left = [
            r for r in RunStore(service_data / "service" / "runs.sqlite3").list_rollouts() if not r.status.is_terminal
        ]
        assert left, "the sweep's rollouts were all done before the kill: nothing to resume"
        time.sleep(DOWN_SECONDS)
        assert sweep.poll() is None, "the sweep ended while its service was down"
        services.append(ServerProcess(service_data, port))
        _, err = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.communicate()

    assert sweep.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    # The steps' warnings go to the sweep's log while the progress bar is drawn; the CLI names the file.
    log_path = re.search(r"log of the sweep's steps \(warnings, errors\): (\S+)", err)
    assert log_path, err[-3000:]
    log = Path(log_path.group(1)).read_text(encoding="utf-8")
    assert f"waiting up to {SERVICE_OUTAGE_SECONDS:.0f}s for the evaluation service at {url}" in log, log[-3000:]
    assert f"the evaluation service at {url} answers again" in log, log[-3000:]
    rows = _rollout_rows(data)
    assert len(rows) == EXPECTED, rows  # no rollout twice
    assert len({rollout_id for rollout_id, _ in rows}) == EXPECTED
    assert {status for _, status in rows} == {"completed"}, rows
