"""Hostile or broken verifiers cost one verdict, never the run: a verifier that kills its interpreter, loops
forever, allocates 4 GB, writes outside its folder, forks past its process cap or leaves a detached child behind.

Each test breaks the target task's verifier in a copy of the built-in scenarios, runs three email_ops tasks
through the embedded backend and `run_and_collect` (verifiers run in the contained worker the service uses),
and checks that only the target's verdict is lost, as a `verifier` error with the reason, while the other two
rollouts pass; no process the verifier started is left, and nothing printed a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eval_pipelines.cli import EXIT_ERRORS
from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib.confine import abi_version
from eval_pipelines.schemas.runs import ErrorClass, RolloutStatus
from tests.reliability.support_runs import (
    SCENARIO_ID,
    TARGET_TASK,
    TASK_IDS,
    collect,
    launch_request,
    make_dagster_home,
    model_config,
)
from tests.reliability.test_fault_scenario_files import TARGET_VERIFIER, _break_verifier
from tests.verifiers.support_processes import (
    detached_child,
    fork_bomb,
    kill_marked,
    marked_processes,
    new_marker,
    task_cap_enforced,
)

#: Short, so the endless loop is cut off quickly; far above what a healthy verifier needs.
VERIFIER_TIMEOUT = 3.0


def _hostile(scenarios: Path, marker: str) -> dict[str, tuple[str, str]]:
    """name -> (verifier body, what the verdict's reason says). Processes a body starts carry `marker`."""
    outside = scenarios / "pwned.txt"
    return {
        "os_exit": ("import os; os._exit(3)", "Verifier process exited with code 3"),
        "endless_loop": ("while True: pass", f"Verifier timed out after {VERIFIER_TIMEOUT:g}s"),
        "memory_blow_up": ("blob = bytearray(4 << 30)", "MemoryError"),
        "writes_outside": (f"open({str(outside)!r}, 'w').write('pwned')", "PermissionError"),
        "fork_bomb": (fork_bomb(marker), "BlockingIOError"),
        "detached_child": (detached_child(marker), "left 1 process running after its verdict (killed)"),
    }


@pytest.fixture
def marker() -> Iterator[str]:
    marker = new_marker()
    yield marker
    kill_marked(marker)


@pytest.mark.parametrize(
    "attack", ["os_exit", "endless_loop", "memory_blow_up", "writes_outside", "fork_bomb", "detached_child"]
)
def test_hostile_verifier_costs_one_verdict(
    attack: str,
    marker: str,
    scenarios_copy: Path,
    data_dir: Path,
    local_backend: Callable[..., EvaluationBackend],
    capfd: pytest.CaptureFixture[str],
) -> None:
    if attack == "writes_outside" and abi_version() < 1:
        pytest.skip("this kernel has no Landlock, so writes cannot be confined (the project's machines have it)")
    if attack == "fork_bomb" and not task_cap_enforced():
        pytest.skip("no cgroup can be made here and RLIMIT_NPROC does not bind root: nothing caps the tasks")
    body, reason = _hostile(scenarios_copy, marker)[attack]
    _break_verifier(scenarios_copy, body)
    catalog = ScenarioCatalog(scenarios_copy)
    backend = local_backend(data_dir, catalog)
    request = launch_request(model_config("sim://local")).model_copy(
        update={"verifier_timeout_seconds": VERIFIER_TIMEOUT}
    )
    run = collect(backend, request, catalog.get(SCENARIO_ID), data_dir, timeout_seconds=120)

    for task_id, rollout in run.rollouts.items():
        assert rollout.status == RolloutStatus.COMPLETED and rollout.result is not None, task_id
    target = run.rollouts[TARGET_TASK].result
    assert target is not None
    assert (target.error_class, target.attempts) == (ErrorClass.VERIFIER, 1), target.message
    [outcome] = target.verifiers
    assert outcome.module == TARGET_VERIFIER and outcome.is_error and reason in outcome.message, outcome.message
    assert all(run.rollouts[t].result.success for t in set(TASK_IDS) - {TARGET_TASK})  # type: ignore[union-attr]
    assert not (scenarios_copy / "pwned.txt").exists()

    _, rates = run.scores(data_dir / "eval.duckdb")  # re-verification goes through the same containment
    assert (rates["n"], rates["passes"], rates["n_errors"]) == (len(TASK_IDS) - 1, len(TASK_IDS) - 1, 1)
    assert not marked_processes(marker)
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.slow
def test_through_the_cli_a_dying_verifier_costs_its_verdicts_and_leaves_no_run_started(
    scenarios_copy: Path, tmp_path: Path
) -> None:
    """The same containment as a user meets it: the sweep completes, says which pair broke and why, exits with
    the error-threshold rule, and no Dagster run is left STARTED."""
    _break_verifier(scenarios_copy, "import os; os._exit(3)")
    config = tmp_path / "sweeps" / "exits.yaml"
    config.parent.mkdir()
    config.write_text(
        "name: exits\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        f"task_ids: {list(TASK_IDS)}\n"
        "rollout_count: 1\n"
        "models:\n"
        "  - {name: sim-oracle, model: sim-oracle, base_url: 'sim://local'}\n",
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "DAGSTER_HOME": str(make_dagster_home(tmp_path / "dagster_home")),
        "EVAL_PIPELINES_DATA_DIR": str(tmp_path / "data"),
        "EVAL_PIPELINES_SCENARIOS_DIR": str(scenarios_copy),
    }
    command = [sys.executable, "-m", "eval_pipelines.cli", "sweep", "--config", str(config), "--skip-assessment"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_ERRORS, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert f"sim-oracle \u00d7 {SCENARIO_ID}: 1/{len(TASK_IDS)} errors (verifier: " in done.stderr, done.stderr[-2000:]
    statuses = subprocess.run(
        [sys.executable, "-c", "import dagster as dg\nwith dg.DagsterInstance.get() as i:\n"
         "    print(' '.join(r.status.value for r in i.get_runs()))"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert statuses and "STARTED" not in statuses, statuses
