"""The durable run store: duplicate names, lifecycle events, resume, restart recovery, delete."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from eval_pipelines.schemas.model_config import ModelConfigEcho
from eval_pipelines.schemas.runs import ErrorClass, RolloutPhase, RolloutResult, RolloutStatus, TerminationReason
from eval_pipelines.service.store import DuplicateRunName, NewRollout, ProgressEvent, RunStore


def _store(
    tmp_path: Path, run_name: str | None = "nightly", rollouts: list[NewRollout] | None = None, run_id: str = "run_1"
) -> RunStore:
    store = RunStore(tmp_path / "runs.sqlite3")
    store.create_run(
        run_id=run_id,
        run_name=run_name,
        scenario_id="s:1",
        source="rl-gym",
        request={"model_config": {"model": "m", "api_key": "sk-canary"}},
        model_config=ModelConfigEcho(model="m"),
        rollouts=rollouts or [NewRollout(f"ro_{i}", "t1" if i < 2 else "t2", i % 2, 5) for i in range(4)],
    )
    return store


def test_create_counts_and_duplicate_name(tmp_path: Path) -> None:
    store = _store(tmp_path)
    run = store.get_run("run_1", expand_rollouts=True)
    assert run is not None and (run.total, run.pending, run.completed) == (4, 4, 0)
    assert len(run.rollout_ids) == 4
    with pytest.raises(DuplicateRunName) as info:
        store.create_run(
            run_id="run_2",
            run_name="nightly",
            scenario_id="s:1",
            source="rl-gym",
            request={},
            model_config=ModelConfigEcho(model="m"),
            rollouts=[],
        )
    assert info.value.run_id == "run_1" and "run_1" in str(info.value)
    assert "sk-canary" not in (tmp_path / "runs.sqlite3").read_bytes().decode("latin-1")


def test_lifecycle_events_in_order(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.claim("ro_0") and not store.claim("ro_0")
    store.record_progress([ProgressEvent.of_phase("ro_0", RolloutPhase.BUILDING_ENVIRONMENT)])
    store.record_progress([ProgressEvent.of_phase("ro_0", RolloutPhase.SEEDING)])
    store.record_progress([ProgressEvent.of_phase("ro_0", RolloutPhase.AGENT_RUNNING)])
    store.record_progress([ProgressEvent.of_step("ro_0", 1)])
    running = store.get_rollout("ro_0")
    assert running is not None and running.current_step == 1 and running.phase == RolloutPhase.AGENT_RUNNING
    store.record_progress([ProgressEvent.of_phase("ro_0", RolloutPhase.VERIFYING)])
    store.finish("ro_0", RolloutStatus.COMPLETED, RolloutResult(success=True, message="ok"), "final_response", None)
    done = store.get_rollout("ro_0")
    assert done is not None and done.status == RolloutStatus.COMPLETED and done.completed_at
    assert [e.status for e in done.status_events] == [
        "pending",
        "running",
        "phase:building_environment",
        "phase:seeding",
        "phase:agent_running",
        "phase:agent_running",
        "phase:verifying",
        "phase:completed",
        "completed",
    ]


def test_restart_recovery_and_resume(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.claim("ro_0")
    store.claim("ro_1")
    store.finish("ro_1", RolloutStatus.COMPLETED, RolloutResult(success=True), "final_response", None)
    reopened = RunStore(tmp_path / "runs.sqlite3")
    assert reopened.fail_interrupted() == 1
    crashed = reopened.get_rollout("ro_0")
    assert crashed is not None and crashed.status == RolloutStatus.FAILED
    assert crashed.termination_reason == TerminationReason.SERVER_RESTART.value
    assert reopened.requeue_unfinished("run_1") == 1  # the completed rollout keeps its result
    run = reopened.get_run("run_1")
    assert run is not None and (run.completed, run.pending, run.failed) == (1, 3, 0)


def test_fail_pending_and_delete(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.claim("ro_0")
    assert store.fail_pending(["ro_0", "ro_1", "ro_2"], TerminationReason.CANCELLED, "Cancelled") == 2
    run = store.get_run("run_1")
    assert run is not None and (run.failed, run.running, run.pending) == (2, 1, 1)
    assert store.delete_run("run_1") == 4
    assert store.get_run("run_1") is None and store.get_rollout("ro_0") is None
    assert store.delete_run("run_1") is None


def test_list_runs_filters_and_pages(tmp_path: Path) -> None:
    store = _store(tmp_path, run_name=None)
    total, runs = store.list_runs(scenario_id="s:1", source="rl-gym", limit=1, offset=0, expand_rollouts=False)
    assert total == 1 and runs[0].rollout_ids == []
    total, runs = store.list_runs(scenario_id="other", source=None, limit=50, offset=0, expand_rollouts=False)
    assert (total, runs) == (0, [])


def test_rollout_pages_cover_the_run_once_in_listing_order(tmp_path: Path) -> None:
    store = _store(tmp_path, None, [NewRollout(f"ro_{i}", f"t{i % 3}", i // 3, 5) for i in range(7)], "run_p")
    store.record_progress([ProgressEvent.of_phase("ro_0", RolloutPhase.SEEDING)])  # events ride along
    pages = list(store.run_rollout_pages("run_p", 3))
    assert [len(page) for page in pages] == [3, 3, 1]
    paged = [r.rollout_id for page in pages for r in page]
    assert paged == [r.rollout_id for r in store.list_rollouts(run_id="run_p")]
    assert [(r.task_id, r.rollout_index) for r in pages[0]] == [("t0", 0), ("t0", 1), ("t0", 2)]
    assert list(store.run_rollout_pages("run_missing", 3)) == []


def test_pending_slots_are_the_pending_rollouts_in_order(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.claim("ro_1")
    slots = store.pending_slots("run_1")
    pending = store.list_rollouts(run_id="run_1", status=RolloutStatus.PENDING.value)
    assert slots == [NewRollout(r.rollout_id, r.task_id, r.rollout_index, 5) for r in pending]
    assert [s.rollout_id for s in slots] == ["ro_0", "ro_2", "ro_3"]


def test_progress_events_land_in_order_in_one_batch(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.claim("ro_0")
    store.record_progress(
        [
            ProgressEvent.of_phase("ro_0", RolloutPhase.BUILDING_ENVIRONMENT),
            ProgressEvent.of_phase("ro_0", RolloutPhase.AGENT_RUNNING, "step 0"),
            ProgressEvent.of_step("ro_0", 1),
            ProgressEvent.of_step("ro_0", 2),
        ]
    )
    rollout = store.get_rollout("ro_0")
    assert rollout is not None and rollout.current_step == 2 and rollout.phase == RolloutPhase.AGENT_RUNNING
    tail = [(e.status, e.detail) for e in rollout.status_events][-4:]
    assert tail == [
        ("phase:building_environment", None),
        ("phase:agent_running", "step 0"),
        ("phase:agent_running", "step 1"),
        ("phase:agent_running", "step 2"),
    ]


def test_errors_are_counted_and_an_older_store_file_keeps_its_error_counts(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.claim("ro_0")
    store.claim("ro_1")
    failed = RolloutResult(success=False, message="endpoint down", error_class=ErrorClass.MODEL_ENDPOINT)
    store.finish("ro_0", RolloutStatus.FAILED, failed, "model_endpoint_error", None)
    store.finish("ro_1", RolloutStatus.FAILED, RolloutResult(success=False, message="wrong"), "final_response", None)
    run = store.get_run("run_1")
    assert run is not None and (run.failed, run.errors) == (2, 1)

    # A store file written before error_class was a column holds the class only inside result_json.
    with sqlite3.connect(tmp_path / "runs.sqlite3") as db:
        db.execute("alter table rollouts drop column error_class")
    reopened = RunStore(tmp_path / "runs.sqlite3").get_run("run_1")
    assert reopened is not None and reopened.errors == 1
