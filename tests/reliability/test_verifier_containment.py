"""Hostile or broken verifiers cost one verdict, never the run: a verifier that kills its interpreter, loops
forever, allocates 4 GB, or writes outside its folder.

Each test breaks the target task's verifier in a copy of the built-in scenarios, runs three email_ops tasks
through the embedded backend and `run_and_collect` (verifiers run in the contained worker the service uses),
and checks that only the target's verdict is lost, as a `verifier` error with the reason, while the other two
rollouts pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipelines.lib.confine import abi_version
from eval_pipelines.scenarios.catalog import ScenarioCatalog
from eval_pipelines.schemas.runs import ErrorClass, RolloutStatus
from eval_pipelines.service.embedded import EmbeddedEvaluationService
from tests.reliability.support_runs import SCENARIO_ID, TARGET_TASK, TASK_IDS, collect, launch_request, model_config
from tests.reliability.test_fault_scenario_files import TARGET_VERIFIER, _break_verifier

#: Short, so the endless loop is cut off quickly; far above what a healthy verifier needs.
VERIFIER_TIMEOUT = 3.0


def _hostile(scenarios: Path) -> dict[str, tuple[str, str]]:
    """name -> (verifier body, what the verdict's reason says)."""
    outside = scenarios / "pwned.txt"
    return {
        "os_exit": ("import os; os._exit(3)", "Verifier process exited with code 3"),
        "endless_loop": ("while True: pass", f"Verifier timed out after {VERIFIER_TIMEOUT:g}s"),
        "memory_blow_up": ("blob = bytearray(4 << 30)", "MemoryError"),
        "writes_outside": (f"open({str(outside)!r}, 'w').write('pwned')", "PermissionError"),
    }


@pytest.mark.parametrize("attack", ["os_exit", "endless_loop", "memory_blow_up", "writes_outside"])
def test_hostile_verifier_costs_one_verdict(attack: str, scenarios_copy: Path, data_dir: Path) -> None:
    if attack == "writes_outside" and abi_version() < 1:
        pytest.skip("this kernel has no Landlock, so writes cannot be confined (the project's machines have it)")
    body, reason = _hostile(scenarios_copy)[attack]
    _break_verifier(scenarios_copy, body)
    catalog = ScenarioCatalog(scenarios_copy)
    backend = EmbeddedEvaluationService(data_dir, catalog)
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
