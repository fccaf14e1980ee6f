"""Faults in a scenario's own files at run time: a verifier that crashes, and a seed file that cannot be read.

Each test breaks one file of a copy of the built-in scenarios (`ScenarioCatalog(copy)`), runs three
email_ops tasks through the embedded backend and `run_and_collect`, then re-verifies the stored rollouts the
way the `verification` asset does (`verify_partition`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.pipeline.steps import verify_partition
from eval_pipelines.schemas.runs import ErrorClass, RolloutStatus, TerminationReason
from tests.reliability.support_runs import (
    MODEL_KEY,
    SCENARIO_ID,
    TARGET_TASK,
    TASK_IDS,
    CollectedRun,
    collect,
    launch_request,
    model_config,
)

#: The verifier module of the target task (email_ops_002: delete the toner promotion).
TARGET_VERIFIER = "delete_toner_promo"
CRASHES = {
    "raises": 'raise RuntimeError("verifier bug: mailbox key missing")',
    "exits": "raise SystemExit(3)",
}


def _break_verifier(scenarios: Path, body: str) -> None:
    path = scenarios / "email_ops" / "verifiers" / f"{TARGET_VERIFIER}.py"
    source = path.read_text(encoding="utf-8")
    anchor = "def check(initial: State, final: State) -> Result:\n"
    assert anchor in source, "the verifier's layout changed; update this test"
    head, tail = source.split(anchor, 1)
    docstring, rest = tail.split("\n", 1)
    path.write_text(f"{head}{anchor}{docstring}\n    {body}\n{rest}", encoding="utf-8")


def _run(
    scenarios: Path, data_dir: Path, local_backend: Callable[..., EvaluationBackend]
) -> tuple[CollectedRun, EvaluationBackend, ScenarioCatalog]:
    catalog = ScenarioCatalog(scenarios)
    backend = local_backend(data_dir, catalog)
    request = launch_request(model_config("sim://local"))
    try:
        run = collect(backend, request, catalog.get(SCENARIO_ID), data_dir)
    except SystemExit as exc:  # turned into a failure: an escaped SystemExit would end the whole sweep process
        pytest.fail(f"SystemExit({exc.code}) escaped the run; no rollout state was written")
    return run, backend, catalog


def _assert_verifier_crash_is_a_verifier_error(run: CollectedRun, data_dir: Path) -> None:
    """The crash costs the target's verdict only: a `verifier` error (not retried: re-running the agent cannot
    fix a verifier), outside the pass rate, while the other rollouts pass."""
    for task_id, rollout in run.rollouts.items():
        assert rollout.status == RolloutStatus.COMPLETED and rollout.result is not None, task_id
    target = run.rollouts[TARGET_TASK].result
    assert target is not None and not target.success and target.reward == 0.0
    assert (target.error_class, target.attempts) == (ErrorClass.VERIFIER, 1)
    [outcome] = target.verifiers
    assert outcome.module == TARGET_VERIFIER and not outcome.success and outcome.is_error
    assert outcome.message.startswith("Verifier error: "), outcome.message
    by_task, rates = run.scores(data_dir / "eval.duckdb")
    assert (by_task[TARGET_TASK]["outcome"], by_task[TARGET_TASK]["error_class"]) == ("error", "verifier")
    assert (rates["n"], rates["passes"], rates["n_errors"]) == (len(TASK_IDS) - 1, len(TASK_IDS) - 1, 1)
    assert all(run.rollouts[t].result.success for t in set(TASK_IDS) - {TARGET_TASK})  # type: ignore[union-attr]
    rows = {t: found[0] for t, found in run.rows_by_task("rollouts").items()}
    assert {t: r["status"] for t, r in rows.items()} == {t: "completed" for t in TASK_IDS}
    assert rows[TARGET_TASK]["success"] is False


def test_verifier_that_raises_is_a_labelled_verifier_error(
    scenarios_copy: Path, data_dir: Path, local_backend: Callable[..., EvaluationBackend]
) -> None:
    _break_verifier(scenarios_copy, CRASHES["raises"])
    run, _, catalog = _run(scenarios_copy, data_dir, local_backend)
    _assert_verifier_crash_is_a_verifier_error(run, data_dir)
    target = run.rollouts[TARGET_TASK].result
    assert target is not None and "RuntimeError: verifier bug: mailbox key missing" in target.verifiers[0].message

    # Re-verification (the `verification` asset) records the crash per rollout and scores the others.
    summary = verify_partition(run.warehouse, catalog.get(SCENARIO_ID), MODEL_KEY, run.scenario_key)
    assert (summary.rollouts_verified, summary.passed, summary.skipped) == (3, 2, 0)
    assert summary.verifier_errors == 1
    assert summary.file is not None
    verdicts = {r["task_id"]: r for r in pq.read_table(summary.file).to_pylist()}
    assert verdicts[TARGET_TASK]["success"] is False and verdicts[TARGET_TASK]["is_error"] is True
    assert verdicts[TARGET_TASK]["message"].startswith("Verifier error: RuntimeError")


def test_verifier_that_calls_sys_exit_costs_one_verdict_not_the_run(
    scenarios_copy: Path, data_dir: Path, local_backend: Callable[..., EvaluationBackend]
) -> None:
    _break_verifier(scenarios_copy, CRASHES["exits"])
    run, _, _ = _run(scenarios_copy, data_dir, local_backend)
    _assert_verifier_crash_is_a_verifier_error(run, data_dir)


def test_unreadable_seed_file_fails_only_the_tasks_that_use_it(
    scenarios_copy: Path, data_dir: Path, local_backend: Callable[..., EvaluationBackend]
) -> None:
    task_path = scenarios_copy / "email_ops" / "tasks" / f"{TARGET_TASK}.json"
    task = json.loads(task_path.read_text(encoding="utf-8"))
    task["seed_data"]["email"] = ["mailbox_broken.json"]
    task_path.write_text(json.dumps(task), encoding="utf-8")
    broken = scenarios_copy / "email_ops" / "seed_data" / "mailbox_broken.json"
    broken.write_text((scenarios_copy / "email_ops" / "seed_data" / "mailbox.json").read_text(), encoding="utf-8")

    catalog = ScenarioCatalog(scenarios_copy)
    backend = local_backend(data_dir, catalog)
    # Loaded while valid, by the service too (a broken file at load is a CLI error, exit 2, and a 500 from the
    # service: its own files are broken)...
    catalog.get(SCENARIO_ID).tasks()
    backend.client.list_tasks(SCENARIO_ID)
    broken.write_text('{"emails": [', encoding="utf-8")  # ...then it breaks while the scenario is in use
    run = collect(backend, launch_request(model_config("sim://local")), catalog.get(SCENARIO_ID), data_dir)
    target = run.rollouts[TARGET_TASK]
    assert (target.status, target.termination_reason) == (
        RolloutStatus.WORKSPACE_ERROR,
        TerminationReason.WORKSPACE_ERROR,
    )
    assert target.result is not None and "mailbox_broken.json" in target.result.message
    assert all(run.rollouts[t].status == RolloutStatus.COMPLETED for t in set(TASK_IDS) - {TARGET_TASK})
