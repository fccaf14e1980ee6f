"""A store holding many small runs: listings read pages through indexes, and finished runs share checkpoints."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from eval_pipelines.schemas.model_config import ModelConfigEcho
from eval_pipelines.service import store as store_module
from eval_pipelines.service.store import NewRollout, RunStore


def _store_with_runs(tmp_path: Path, count: int) -> RunStore:
    store = RunStore(tmp_path / "runs.sqlite3")
    for index in range(count):
        store.create_run(
            run_id=f"run_{index:03d}",
            run_name=None,
            scenario_id="s:1" if index % 2 else "s:2",
            source="rl-gym",
            request={},
            model_config=ModelConfigEcho(model="m"),
            rollouts=[NewRollout(f"ro_{index:03d}", "t1", 0, 5)],
        )
    return store


def _plan(store: RunStore, sql: str, params: tuple[object, ...] = ()) -> str:
    rows = store._conn().execute(f"explain query plan {sql}", params).fetchall()
    return " | ".join(row["detail"] for row in rows)


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("select * from runs order by created_at desc, run_id limit 20 offset 0", ()),
        ("select * from runs where scenario_id = ? order by created_at desc, run_id limit 20 offset 0", ("s:1",)),
        ("select * from rollouts order by created_at, task_id, rollout_index limit 20 offset 0", ()),
    ],
)
def test_listing_pages_are_read_through_an_index_without_sorting_the_table(
    tmp_path: Path, sql: str, params: tuple[object, ...]
) -> None:
    plan = _plan(_store_with_runs(tmp_path, 5), sql, params)
    assert "USING INDEX" in plan and "TEMP B-TREE" not in plan, plan


def test_the_newest_runs_come_first_in_pages(tmp_path: Path) -> None:
    store = _store_with_runs(tmp_path, 30)
    total, first = store.list_runs(scenario_id=None, source=None, limit=10, offset=0, expand_rollouts=False)
    _, second = store.list_runs(scenario_id=None, source=None, limit=10, offset=10, expand_rollouts=False)
    created = [run.created_at for run in first + second]
    assert total == 30 and created == sorted(created, reverse=True)
    assert not {run.run_id for run in first} & {run.run_id for run in second}


def test_a_burst_of_finished_runs_makes_one_checkpoint_now_and_one_after_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "CHECKPOINT_INTERVAL_SECONDS", 0.5)
    store = _store_with_runs(tmp_path, 1)
    made: list[float] = []
    monkeypatch.setattr(store, "checkpoint", lambda: made.append(time.monotonic()) or True)
    started = time.monotonic()
    store.checkpoint_soon()
    deadline = time.monotonic() + 5
    while not made and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range(20):  # runs finishing right after: one more checkpoint covers them all
        store.checkpoint_soon()
    while len(made) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.7)
    assert len(made) == 2
    assert made[0] - started < 0.4 and made[1] - made[0] >= 0.5


def test_a_scheduled_checkpoint_of_a_closed_or_deleted_store_neither_runs_nor_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raised: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    monkeypatch.setattr(store_module, "CHECKPOINT_INTERVAL_SECONDS", 0.3)
    store = _store_with_runs(tmp_path / "closed", 1)
    made: list[bool] = []
    store.checkpoint_soon()  # the first runs at once; the next waits for the interval
    deadline = time.monotonic() + 5
    while store._checkpoint_due and time.monotonic() < deadline:
        time.sleep(0.01)
    monkeypatch.setattr(store, "checkpoint", lambda: made.append(True) or True)
    store.checkpoint_soon()
    store.close()  # cancels the pending one
    time.sleep(0.6)
    assert made == []
    # A timer that already fired when the store's folder was deleted (a test's or a benchmark's temp dir).
    doomed = _store_with_runs(tmp_path / "deleted", 1)
    shutil.rmtree(tmp_path / "deleted")
    doomed._scheduled_checkpoint()
    assert raised == []
