"""`eval-pipelines parity` on a synthetic warehouse with a fake adapter: the rows it appends, its exit codes, and
a repeat that adds no row."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from eval_pipelines import cli
from eval_pipelines.benchmarks import parity
from eval_pipelines.benchmarks.parity import ParityItem, UpstreamVerdict, compare
from eval_pipelines.inputs.paths import DATA_DIR_ENV
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.warehouse.catalog import connect_read_only
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import PARITY
from tests.support.benchmark_warehouse import SyntheticRollout, task, write_sweep

SCENARIO = "tau2_airline:26.3"
DB, COMMUNICATE, NL = "DB", "COMMUNICATE", "NL_ASSERTION"
BOTH = {DB: True, COMMUNICATE: True}


class FakeWorker:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class FakeAdapter:
    """Grades by a table of verdicts, so each case's upstream answer is known."""

    benchmark = "tau2"
    upstream_version = "26.3"
    judged_components = frozenset({NL})

    def __init__(self, verdicts: dict[str, tuple[bool, dict[str, bool]]]) -> None:
        self.verdicts = verdicts
        self.graded: list[list[str]] = []
        self.workers: list[FakeWorker] = []

    async def start_worker(self) -> FakeWorker:
        self.workers.append(FakeWorker())
        return self.workers[-1]

    async def upstream_verdicts(self, worker: Any, items: Sequence[ParityItem]) -> list[UpstreamVerdict]:
        assert worker is self.workers[-1] and not worker.closed
        self.graded.append([i.rollout_id for i in items])
        # The item carries the stored trace and the task it ran.
        assert all(i.artifacts.task_id == i.task_id == i.task.task_id for i in items)
        return [
            UpstreamVerdict(i.rollout_id, *self._verdict(i.rollout_id), message=f"graded {i.rollout_id}") for i in items
        ]

    def _verdict(self, rollout_id: str) -> tuple[bool, float, dict[str, bool]]:
        success, components = self.verdicts[rollout_id]
        return success, float(success), components


#: rollout -> (our outcome, our components, upstream success, upstream components)
Cases = dict[str, tuple[str, dict[str, bool], bool, dict[str, bool]]]
AGREEING: Cases = {
    "r-pass": ("passed", BOTH, True, BOTH),
    "r-fail": ("failed", {DB: False, COMMUNICATE: True}, False, {DB: False, COMMUNICATE: True}),
    # Only the judged component (and with it the overall verdict) differs: reported, not a deterministic flip.
    "r-judged": ("failed", {DB: True, NL: False}, True, {DB: True, NL: True}),
}
DISAGREEING = {
    **AGREEING,
    "r-db": ("passed", BOTH, False, {DB: False, COMMUNICATE: True}),
}


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    tasks = {f"tau2_airline_{i}": task(f"tau2_airline_{i}", "tau2") for i in range(10)}

    def task_lookup(catalog: object) -> parity.TaskLookup:
        def of(scenario_id: str, task_id: str) -> Task:
            assert scenario_id == SCENARIO
            return tasks[task_id]

        return of

    monkeypatch.setattr(parity, "catalog_tasks", task_lookup)
    return tmp_path / "data"


def _write(data_dir: Path, sweep: str, cases: Cases) -> None:
    rollouts = [
        SyntheticRollout(rid, SCENARIO, f"tau2_airline_{i}", outcome, sweep_id=sweep, components=ours)
        for i, (rid, (outcome, ours, _, _)) in enumerate(cases.items())
    ]
    # An infrastructure error has no verdict of ours: it is listed as not graded, never sent upstream.
    rollouts.append(SyntheticRollout(f"{sweep}-error", SCENARIO, "tau2_airline_9", "error", sweep_id=sweep))
    write_sweep(data_dir / "warehouse", rollouts, benchmark_of={SCENARIO: "tau2"}, traces_dir=data_dir / "traces")


def _adapter(
    monkeypatch: pytest.MonkeyPatch, cases: dict[str, tuple[str, dict[str, bool], bool, dict[str, bool]]]
) -> FakeAdapter:
    adapter = FakeAdapter({rid: (up, up_parts) for rid, (_, _, up, up_parts) in cases.items()})
    monkeypatch.setattr(parity, "adapter_for", lambda name: adapter if name == "tau2" else pytest.fail(name))
    return adapter


def test_all_agree_exits_0_and_writes_one_row_per_graded_rollout(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(data_dir, "sweep-a", AGREEING)
    adapter = _adapter(monkeypatch, AGREEING)
    assert cli.main(["parity", "--sweep", "sweep-a"]) == 0
    out = capsys.readouterr().out
    assert "tau2 (upstream 26.3): 3 rollouts graded, 2 agree, 1 disagree (0 on a deterministic component)" in out
    assert "r-judged" in out and "flips success, NL_ASSERTION" in out
    assert "not graded: 1 x error" in out
    assert sorted(adapter.graded[0]) == sorted(AGREEING) and adapter.workers[0].closed
    with connect_read_only(data_dir / "eval.duckdb") as con:
        rows = con.execute("select rollout_id, ours, upstream, agree, flips from parity order by 1").fetchall()
    assert rows == [
        ("r-fail", False, False, True, []),
        ("r-judged", False, True, False, ["success", NL]),
        ("r-pass", True, True, True, []),
    ]


def test_a_deterministic_flip_exits_1_and_a_repeat_adds_no_row(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(data_dir, "sweep-b", DISAGREEING)
    _adapter(monkeypatch, DISAGREEING)
    assert cli.main(["parity", "--sweep", "sweep-b", "--benchmark", "tau2"]) == cli.EXIT_PARITY_DISAGREEMENT
    out = capsys.readouterr().out
    assert "1 on a deterministic component" in out
    assert "r-db tau2_airline:26.3/tau2_airline_3 gpt-x: ours pass, upstream fail; flips success, DB" in out
    warehouse = Warehouse(data_dir / "warehouse")
    first = sorted(warehouse.read(PARITY.name).column("rollout_id"))
    assert first == sorted(DISAGREEING)
    # The same grading again replaces its own file: the table does not grow.
    assert cli.main(["parity", "--sweep", "sweep-b"]) == cli.EXIT_PARITY_DISAGREEMENT
    assert sorted(warehouse.read(PARITY.name).column("rollout_id")) == first
    files = warehouse.files(PARITY.name)
    assert len(files) == 1 and pq.read_table(files[0]).num_rows == len(DISAGREEING)
    with connect_read_only(data_dir / "eval.duckdb") as con:
        flagged = con.execute("select rollout_id, flips from parity where deterministic_disagreement").fetchall()
    assert flagged == [("r-db", ["success", DB])]


def test_unknown_sweep_or_benchmark_is_exit_2_naming_it(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(data_dir, "sweep-a", AGREEING)
    _adapter(monkeypatch, AGREEING)
    assert cli.main(["parity", "--sweep", "no-such-sweep"]) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "'no-such-sweep'" in err and "sweep-a" in err and "Traceback" not in err
    assert cli.main(["parity", "--sweep", "sweep-a", "--benchmark", "bfcl"]) == cli.EXIT_USER_ERROR
    assert "no rollouts of benchmark 'bfcl'" in capsys.readouterr().err


def test_a_benchmark_without_an_adapter_is_a_clear_error() -> None:
    with pytest.raises(parity.ParityError, match="no parity adapter"):
        parity.adapter_for("nonexistent_bench")
    with pytest.raises(parity.ParityError, match="not a benchmark name"):
        parity.adapter_for("../x")


def test_a_flip_only_on_a_judged_component_is_not_deterministic() -> None:
    upstream = UpstreamVerdict("r", success=True, reward=1.0, components={DB: True, NL: True})
    judged = compare(False, {DB: True, NL: False}, upstream, frozenset({NL}))
    assert judged.flips == ("success", NL) and not judged.deterministic_disagreement
    unexplained = compare(False, {DB: True}, UpstreamVerdict("r", True, 1.0, {DB: True}), frozenset({NL}))
    assert unexplained.flips == ("success",) and unexplained.deterministic_disagreement
    assert compare(True, {DB: True, "ours_only": False}, UpstreamVerdict("r", True, 1.0, {DB: True}), frozenset()).agree


def test_the_worker_is_closed_when_grading_fails(data_dir: Path) -> None:
    _write(data_dir, "sweep-a", AGREEING)

    class Broken(FakeAdapter):
        async def upstream_verdicts(self, worker: Any, items: Sequence[ParityItem]) -> list[UpstreamVerdict]:
            raise RuntimeError("grader crashed")

    adapter = Broken({})
    with pytest.raises(RuntimeError, match="grader crashed"):
        asyncio.run(
            parity.run_parity(
                data_dir / "warehouse",
                "sweep-a",
                task_of=lambda scenario_id, task_id: task(task_id, "tau2"),
                adapters={"tau2": adapter},
            )
        )
    assert adapter.workers[0].closed
