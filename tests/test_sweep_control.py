"""A sweep as a process among others: one writer per sweep id, several sweep ids side by side, and a clean stop.

Each test runs the real CLI (`python -m eval_pipelines.cli sweep`) in subprocesses on one temp data dir and
Dagster home, against a scripted model endpoint that answers slowly, so there is something in flight when the
second process or the signal arrives. The scripted model answers without a tool call: every rollout completes
(and fails its verifiers), so the counts are exact and the sweeps exit 0 unless something goes wrong.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from eval_pipelines.cli import EXIT_USER_ERROR
from eval_pipelines.service.store import RunStore
from tests.reliability.support_runs import make_dagster_home
from tests.support.scripted_llm import slow_text_model

TASKS = ["email_ops_001", "email_ops_002", "email_ops_003", "email_ops_004"]
ROLLOUT_COUNT = 2
EXPECTED = len(TASKS) * ROLLOUT_COUNT
#: Seconds per model reply: with two rollouts at once, a sweep lasts a few seconds.
REPLY_SECONDS = 0.6

pytestmark = pytest.mark.slow


@pytest.fixture
def slow_model() -> Iterator[str]:
    with slow_text_model(REPLY_SECONDS) as url:
        yield url


@pytest.fixture
def project(tmp_path: Path, slow_model: str) -> tuple[Path, dict[str, str]]:
    config = tmp_path / "sweeps" / "ctl.yaml"
    config.parent.mkdir()
    config.write_text(
        "name: ctl\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        f"task_ids: {TASKS}\n"
        f"rollout_count: {ROLLOUT_COUNT}\n"
        "max_parallel: 2\n"
        "models:\n"
        f"  - {{name: slow, model: slow, base_url: '{slow_model}', api_key_env: SLOW_KEY}}\n",
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "DAGSTER_HOME": str(make_dagster_home(tmp_path / "dagster_home")),
        "EVAL_PIPELINES_DATA_DIR": str(tmp_path / "data"),
        "SLOW_KEY": "k",
    }
    return config, env


def _sweep(config: Path, env: dict[str, str], sweep_id: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "eval_pipelines.cli", "sweep", "--config", str(config), "--skip-assessment"]
    # A session of its own, as a terminal gives a command: Ctrl-C reaches its whole process group.
    return subprocess.Popen(
        [*command, "--sweep-id", sweep_id],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _finish(process: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str]:
    _, err = process.communicate(timeout=timeout)
    return process.returncode, err


def _wait_for_rollouts(data: Path, at_least: int, timeout: float = 120) -> None:
    """Until the service store has `at_least` finished rollouts (the sweep is well under way)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        store = data / "service" / "runs.sqlite3"
        if store.is_file():
            finished = sum(1 for r in RunStore(store).list_rollouts() if r.status.is_terminal)
            if finished >= at_least:
                return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {at_least} rollouts finished within {timeout}s")


def _warehouse_counts(data: Path, sweep_id: str) -> dict[str, int]:
    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "select status, count(distinct rollout_id) from rollouts where sweep_id = ? group by status", [sweep_id]
        ).fetchall()
    finally:
        con.close()
    return {status: n for status, n in rows}


def _dagster_runs(env: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    code = (
        "import dagster as dg\n"
        "with dg.DagsterInstance.get() as i:\n"
        "    for r in i.get_runs():\n"
        "        print(r.status.value, dict(r.tags).get('eval_pipelines/interrupted', '-'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return [(line.split()[0], {"interrupted": line.split()[1]}) for line in out.splitlines() if line.strip()]


def test_a_second_process_with_the_same_sweep_id_exits_2_naming_the_first(
    project: tuple[Path, dict[str, str]],
) -> None:
    config, env = project
    first = _sweep(config, env, "same")
    _wait_for_rollouts(Path(env["EVAL_PIPELINES_DATA_DIR"]), 1)
    second = _sweep(config, env, "same")
    code, err = _finish(second, timeout=60)
    assert code == EXIT_USER_ERROR, err
    assert f"sweep 'same' is already running (pid {first.pid} on " in err, err
    assert "Traceback" not in err
    code, err = _finish(first)
    assert code == 0, err[-3000:]
    assert _warehouse_counts(Path(env["EVAL_PIPELINES_DATA_DIR"]), "same") == {"completed": EXPECTED}


def test_two_sweep_ids_at_once_on_one_data_dir_each_get_exact_counts(project: tuple[Path, dict[str, str]]) -> None:
    config, env = project
    processes = {sweep_id: _sweep(config, env, sweep_id) for sweep_id in ("left", "right")}
    for sweep_id, process in processes.items():
        code, err = _finish(process)
        assert code == 0, (sweep_id, err[-3000:])
    data = Path(env["EVAL_PIPELINES_DATA_DIR"])
    assert _warehouse_counts(data, "left") == {"completed": EXPECTED}
    assert _warehouse_counts(data, "right") == {"completed": EXPECTED}


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["sigterm", "sigint"])
def test_a_signal_stops_the_whole_sweep_cleanly_and_the_same_command_resumes(
    signum: int, code: int, project: tuple[Path, dict[str, str]]
) -> None:
    """SIGTERM as `kill` sends it, to the sweep's process; SIGINT as Ctrl-C does, to its whole process group
    (Dagster's helper processes and the tool-server host included)."""
    config, env = project
    data = Path(env["EVAL_PIPELINES_DATA_DIR"])
    process = _sweep(config, env, "stopped")
    _wait_for_rollouts(data, 2)
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    returncode, err = _finish(process, timeout=120)
    assert returncode == code, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    store = RunStore(data / "service" / "runs.sqlite3")
    rollouts = store.list_rollouts()
    statuses = {r.status.value for r in rollouts}
    assert not statuses & {"running", "pending"}, statuses
    cancelled = [r for r in rollouts if r.termination_reason == "cancelled"]
    assert cancelled, "the stop cancelled nothing: the signal came too late to test anything"
    completed = [r for r in rollouts if r.status.value == "completed"]
    # Counted after the stop: a rollout in flight at the signal that finished its step completed, not cancelled.
    counts = f"{len(completed)} rollouts completed, {len(cancelled)} cancelled"
    assert len(completed) + len(cancelled) == EXPECTED, statuses
    assert f"stopped by {signal.Signals(signum).name}: {counts}; run the same command" in " ".join(err.split())
    runs = _dagster_runs(env)
    assert runs and all(status != "STARTED" for status, _ in runs), runs
    assert any(tags["interrupted"] == signal.Signals(signum).name for _, tags in runs), runs

    returncode, err = _finish(_sweep(config, env, "stopped"))
    assert returncode == 0, err[-3000:]
    assert _warehouse_counts(data, "stopped") == {"completed": EXPECTED}


def test_a_killed_sweep_leaves_no_started_run_once_monitoring_passes(project: tuple[Path, dict[str, str]]) -> None:
    """kill -9: no handler runs. The daemon's `abandoned_cli_runs` sensor (evaluated here as the daemon would)
    fails the run the dead process left STARTED, and the same command then resumes to exact counts (the lock
    died with the process)."""
    config, env = project
    data = Path(env["EVAL_PIPELINES_DATA_DIR"])
    process = _sweep(config, env, "killed")
    _wait_for_rollouts(data, 1)
    process.kill()
    process.wait(30)
    assert any(status == "STARTED" for status, _ in _dagster_runs(env)), "the kill left nothing to clean up"
    sensor = (
        "import dagster as dg\n"
        "from eval_pipelines.defs.evals.automation import abandoned_cli_runs\n"
        "with dg.DagsterInstance.get() as i:\n"
        "    print(abandoned_cli_runs(dg.build_sensor_context(instance=i)))\n"
    )
    tick = subprocess.run([sys.executable, "-c", sensor], env=env, capture_output=True, text=True, check=True)
    assert "failed 1 abandoned CLI run" in tick.stdout, tick.stdout + tick.stderr
    assert all(status != "STARTED" for status, _ in _dagster_runs(env))

    returncode, err = _finish(_sweep(config, env, "killed"))
    assert returncode == 0, err[-3000:]
    assert _warehouse_counts(data, "killed") == {"completed": EXPECTED}
