"""The real `dagster-daemon`, started as the README says (DAGSTER_HOME at a folder holding the repository's
dagster.yaml, run from that folder), keeps a scheduled sweep fresh with no manual step: the schedule's tick runs
every pair of a 2 models x 2 scenarios sweep, automation rebuilds the catalog and the report from the new
verdicts, and a verifier edit re-verifies only its own scenario's partitions, without asking the judges again."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG
from eval_pipelines.defs.evals.automation import REVERIFY_TAG, SENSOR_INTERVAL_ENV
from eval_pipelines.inputs.paths import DATA_DIR_ENV, SCENARIOS_DIR_ENV, SWEEPS_DIR_ENV
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from tests.support.scenarios import copy_builtin_scenarios

REPO = Path(__file__).resolve().parents[2]
MODELS = ("sim-oracle", "sim-noop")
SCENARIO_IDS = ("email_ops:1.0.0", "team_chat:1.0.0")
SWEEP = f"""
name: nightly
scenarios: {list(SCENARIO_IDS)}
task_ids: [email_ops_001, team_chat_001]
rollout_count: 1
cron: "* * * * *"
models:
{"".join(f"  - {{name: {m}, model: {m}, base_url: 'sim://local'}}{chr(10)}" for m in MODELS)}
"""
#: Long enough for a cron minute to pass, the four partition runs, and the automation runs after them.
DEADLINE_SECONDS = 360.0


def _script(name: str) -> str:
    """A console script of this venv (dagster, dagster-daemon)."""
    return str(Path(sys.executable).with_name(name))


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    home = tmp_path / "project"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")  # its storage paths are relative to the folder
    scenarios = copy_builtin_scenarios(tmp_path / "scenarios", SCENARIO_IDS)
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "nightly.yaml").write_text(SWEEP)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        DATA_DIR_ENV: str(tmp_path / "data"),
        SCENARIOS_DIR_ENV: str(scenarios),
        SWEEPS_DIR_ENV: str(sweeps),
        SENSOR_INTERVAL_ENV: "5",
    }
    yield home, env


def _wait_for(what: str, check: Callable[[], bool], daemon: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if check():
            return
        if daemon.poll() is not None:
            pytest.fail(f"dagster-daemon exited ({daemon.returncode}) waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(2)
    pytest.fail(f"no {what} after {DEADLINE_SECONDS:.0f} s; daemon log:\n{log.read_text()[-4000:]}")


def _runs(instance: dg.DagsterInstance, job: str) -> list[dg.RunRecord]:
    return list(instance.get_run_records(filters=dg.RunsFilter(job_name=job)))


def _materialisations(instance: dg.DagsterInstance, asset: str) -> list[dg.EventLogRecord]:
    return list(instance.fetch_materializations(dg.AssetKey(asset), limit=1000).records)


@pytest.mark.slow
def test_the_daemon_runs_the_schedule_and_keeps_the_catalog_fresh(project: tuple[Path, dict[str, str]]) -> None:
    home, env = project
    _schedule("start", home, env)
    log = home / "daemon.log"
    with open(log, "wb") as out:
        daemon = subprocess.Popen(
            [_script("dagster-daemon"), "run", "-w", str(REPO / "workspace.yaml")],
            cwd=home,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its code server and run workers are stopped with it
        )
    old_home = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    os.chdir(home)
    try:
        with dg.DagsterInstance.get() as instance:
            _the_scheduled_sweep_runs_and_the_catalog_follows(instance, daemon, log, home, env)
            _a_verifier_edit_reverifies_only_its_scenario(
                instance, daemon, log, Path(env[DATA_DIR_ENV]), Path(env[SCENARIOS_DIR_ENV])
            )
    finally:
        os.chdir(REPO)
        if old_home is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old_home
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait(timeout=30)


def _succeeded(runs: list[dg.RunRecord]) -> list[dg.RunRecord]:
    failed = [r.dagster_run for r in runs if r.dagster_run.status == dg.DagsterRunStatus.FAILURE]
    assert not failed, f"runs failed: {[(r.job_name, r.tags.get('dagster/partition')) for r in failed]}"
    return [r for r in runs if r.dagster_run.status == dg.DagsterRunStatus.SUCCESS]


def _schedule(action: str, home: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        [_script("dagster"), "schedule", action, "sweep_nightly", "-w", str(REPO / "workspace.yaml")],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _the_scheduled_sweep_runs_and_the_catalog_follows(
    instance: dg.DagsterInstance, daemon: subprocess.Popen[bytes], log: Path, home: Path, env: dict[str, str]
) -> None:
    pairs = {f"{m}|{s}" for m in MODELS for s in SCENARIO_IDS}
    # The cron fires every minute (each tick a sweep of its own): one tick is what this test is about.
    _wait_for("the schedule's first tick", lambda: len(_runs(instance, "sweep_partition")) >= len(pairs), daemon, log)
    _schedule("stop", home, env)

    def partitions_ran() -> bool:
        runs = _succeeded(_runs(instance, "sweep_partition"))
        return {r.dagster_run.tags.get("dagster/partition") for r in runs} >= pairs

    _wait_for("scheduled partition runs", partitions_ran, daemon, log)
    runs = _runs(instance, "sweep_partition")
    assert all(r.dagster_run.tags.get("dagster/schedule_name") == "sweep_nightly" for r in runs)
    assert len({r.dagster_run.tags.get(SWEEP_ID_TAG) for r in runs}) == 1
    last_partition_run = max(r.end_time or 0.0 for r in _succeeded(runs))

    def catalog_rebuilt() -> bool:
        return any(m.timestamp > last_partition_run for m in _materialisations(instance, "eval_catalog")) and bool(
            _materialisations(instance, "eval_report")
        )

    _wait_for("an eval_catalog built after the partitions", catalog_rebuilt, daemon, log)
    catalog_run = instance.get_run_by_id(_materialisations(instance, "eval_catalog")[0].run_id)
    assert catalog_run is not None
    assert catalog_run.tags.get("dagster/sensor_name") == "eval_automation"  # automation, not a manual step
    data = Path(env[DATA_DIR_ENV])
    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    rows = con.execute("select scenario_id, model_name, n from pass_rates order by all").fetchall()
    con.close()
    assert {(s, m) for s, m, _ in rows} == {(s, m) for m in MODELS for s in SCENARIO_IDS}
    assert all(n == 1 for *_, n in rows)
    assert (data / "reports" / "report.html").is_file()


def _a_verifier_edit_reverifies_only_its_scenario(
    instance: dg.DagsterInstance, daemon: subprocess.Popen[bytes], log: Path, data: Path, scenarios: Path
) -> None:
    # The sweep's own judging first (the automation sensor may start it after the catalog was rebuilt): judges
    # asked after the edit must be re-judging, not the first judging arriving late.
    _wait_for(
        "the sweep's judgements",
        lambda: len(_materialisations(instance, "judgements")) >= len(MODELS) * len(SCENARIO_IDS),
        daemon,
        log,
    )
    # The schedule keeps ticking each minute, but its run keys are per day: it launches nothing more today.
    judged = len(_materialisations(instance, "judgements"))
    (module,) = ScenarioCatalog(scenarios).get("email_ops:1.0.0").task("email_ops_001").verifiers
    verifier = scenarios / "email_ops" / "verifiers" / f"{module}.py"
    verifier.write_text(verifier.read_text() + "\n\ndef verify(run_artifacts):  # tightened\n    return False, 'no'\n")
    edited_at = time.time()

    def reverified() -> bool:
        runs = _succeeded(_runs(instance, "reverify_partition"))
        return len(runs) >= len(MODELS) and any(
            m.timestamp > max(r.end_time or 0.0 for r in runs) for m in _materialisations(instance, "eval_catalog")
        )

    _wait_for("re-verification and a catalog rebuilt after it", reverified, daemon, log)
    runs = _runs(instance, "reverify_partition")
    assert {r.dagster_run.tags.get("dagster/partition") for r in runs} == {f"{m}|email_ops:1.0.0" for m in MODELS}
    assert all(REVERIFY_TAG in r.dagster_run.tags for r in runs)
    new_judgements = [m for m in _materialisations(instance, "judgements") if m.timestamp > edited_at]
    assert new_judgements == [], "the judges were asked again, though what they read did not change"
    assert len(_materialisations(instance, "judgements")) == judged
    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    versions = dict(
        con.execute("select task_id, count(distinct verifier_version) from verifications group by all").fetchall()
    )
    con.close()
    assert versions == {"email_ops_001": 2, "team_chat_001": 1}  # the edited verifier's two versions
