from __future__ import annotations

import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from eval_pipelines.warehouse.catalog import build_catalog, connect_read_only
from eval_pipelines.warehouse.metrics import METRIC_VIEWS
from eval_pipelines.warehouse.rows import rollout_tables, tasks_table, verification_table
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import TABLE_SPECS

ALL_VIEWS = [*TABLE_SPECS, *(v.name for v in METRIC_VIEWS)]

# (rollout_id, model_name, task_id, status) and (rollout_id, verifier, version, success, minutes after T0).
ROLLOUTS = [
    ("g1", "gpt-x", "t1", "completed"),  # both pass -> 1
    ("g2", "gpt-x", "t1", "completed"),  # one fails -> 0, partial 0.5
    ("g3", "gpt-x", "t2", "completed"),  # reply_sent re-verified: old version failed, latest passes -> 1
    ("g4", "gpt-x", "t2", "failed"),  # verifiers pass but the rollout failed -> 0
    ("g5", "gpt-x", "t2", "completed"),  # not verified yet -> NULL, not counted
    ("g6", "gpt-x", "t1", "completed"),  # re-verified: latest version now fails -> 0
    ("s1", "sim-oracle", "t1", "completed"),  # tie on verified_at: greater version wins (pass) -> 1
    ("s2", "sim-oracle", "t2", "completed"),  # -> 1
    ("s3", "sim-oracle", "t2", "workspace_error"),  # the tool server failed: an error, outside every rate -> NULL
]
VERIFICATIONS = [
    ("g1", "reply_sent", "h1", True, 0),
    ("g1", "tone_ok", "k1", True, 0),
    ("g2", "reply_sent", "h1", True, 0),
    ("g2", "tone_ok", "k1", False, 0),
    ("g3", "reply_sent", "h1", False, 0),
    ("g3", "reply_sent", "h2", True, 60),
    ("g3", "tone_ok", "k1", True, 0),
    ("g4", "reply_sent", "h1", True, 0),
    ("g4", "tone_ok", "k1", True, 0),
    ("g6", "reply_sent", "h1", True, 0),
    ("g6", "reply_sent", "h2", False, 60),
    ("g6", "tone_ok", "k1", True, 0),
    ("s1", "reply_sent", "aaa", False, 5),
    ("s1", "reply_sent", "bbb", True, 5),
    ("s1", "tone_ok", "k1", True, 0),
    ("s2", "reply_sent", "h1", True, 0),
    ("s2", "tone_ok", "k1", True, 0),
]


def _populate(root: Path, f: ModuleType) -> None:
    wh = Warehouse(root)
    task_of = {r[0]: r[2] for r in ROLLOUTS}
    for model in ("gpt-x", "sim-oracle"):
        ctx = f.make_ctx(model, simulated=model == "sim-oracle")
        mine = [r for r in ROLLOUTS if r[1] == model]
        items = [
            (
                f.make_rollout(rid, task, index=i, status=status, success=status == "completed"),
                f.make_artifacts(task),
                None,
            )
            for i, (rid, _, task, status) in enumerate(mine)
        ]
        for name, table in rollout_tables(ctx, items).items():
            wh.write(name, table, model_key=model, scenario_key=f.SCENARIO_KEY, file_stem="run-1")
        records = [
            f.make_verification(rid, mod, ver, ok, minutes=minutes, task_id=task_of[rid], model_name=model)
            for rid, mod, ver, ok, minutes in VERIFICATIONS
            if rid in {r[0] for r in mine}
        ]
        wh.write(
            "verifications", verification_table(records), model_key=model, scenario_key=f.SCENARIO_KEY, file_stem="v"
        )
    wh.write_tasks(tasks_table(f.SCENARIO_ID, [f.make_task("t1"), f.make_task("t2")]), f.SCENARIO_KEY)


def _expected_scores() -> dict[str, tuple[float | None, float | None]]:
    """Independent of the SQL: latest verdict per (rollout, verifier) by (minutes, version), then the rules."""
    latest: dict[tuple[str, str], tuple[int, str, bool]] = {}
    for rid, mod, ver, ok, minutes in VERIFICATIONS:
        current = latest.get((rid, mod))
        if current is None or (minutes, ver) > current[:2]:
            latest[(rid, mod)] = (minutes, ver, ok)
    scores: dict[str, tuple[float | None, float | None]] = {}
    for rid, _, _, status in ROLLOUTS:
        verdicts = [v[2] for (r, _), v in latest.items() if r == rid]
        if status == "workspace_error":
            scores[rid] = (None, None)
        elif status != "completed":
            scores[rid] = (0.0, 0.0)
        elif not verdicts:
            scores[rid] = (None, None)
        else:
            scores[rid] = (float(all(verdicts)), sum(verdicts) / len(verdicts))
    return scores


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@pytest.fixture
def populated(tmp_path: Path, f: ModuleType) -> Path:
    root = tmp_path / "warehouse"
    _populate(root, f)
    db = tmp_path / "eval.duckdb"
    build_catalog(root, db)
    return db


def test_empty_warehouse_views_return_no_rows(tmp_path: Path) -> None:
    summary = build_catalog(tmp_path / "warehouse", tmp_path / "eval.duckdb")
    assert list(summary.views) == ALL_VIEWS
    assert summary.row_counts == dict.fromkeys(TABLE_SPECS, 0)
    con = connect_read_only(summary.path)
    try:
        for view in ALL_VIEWS:
            assert con.execute(f"select count(*) from {view}").fetchone() == (0,), view
    finally:
        con.close()


def test_empty_views_have_the_same_columns_and_types_as_populated_ones(tmp_path: Path, populated: Path) -> None:
    empty_db = build_catalog(tmp_path / "empty", tmp_path / "empty.duckdb").path
    described = {}
    for db in (empty_db, populated):
        con = connect_read_only(db)
        try:
            described[db] = {v: con.execute(f"describe {v}").fetchall() for v in ALL_VIEWS}
        finally:
            con.close()
    for view in ALL_VIEWS:
        assert [r[:2] for r in described[empty_db][view]] == [r[:2] for r in described[populated][view]], view


def test_table_views_and_hive_columns(populated: Path, f: ModuleType) -> None:
    con = connect_read_only(populated)
    try:
        assert con.execute("select count(*) from rollouts").fetchone() == (len(ROLLOUTS),)
        assert con.execute("select count(*) from verifications").fetchone() == (len(VERIFICATIONS),)
        assert con.execute("select count(*) from messages").fetchone() == (5 * len(ROLLOUTS),)
        rows = _rows(con, "select distinct model, scenario, model_name, scenario_id from rollouts order by model")
        assert rows == [
            {"model": "gpt-x", "scenario": f.SCENARIO_KEY, "model_name": "gpt-x", "scenario_id": f.SCENARIO_ID},
            {
                "model": "sim-oracle",
                "scenario": f.SCENARIO_KEY,
                "model_name": "sim-oracle",
                "scenario_id": f.SCENARIO_ID,
            },
        ]
        assert con.execute("select distinct scenario from tasks").fetchall() == [(f.SCENARIO_KEY,)]
        assert "model" not in [r[0] for r in con.execute("describe tasks").fetchall()]
    finally:
        con.close()


def test_hive_keys_stay_text(tmp_path: Path, f: ModuleType) -> None:
    wh = Warehouse(tmp_path / "w")
    tables = rollout_tables(f.make_ctx("1.5"), [(f.make_rollout("r1"), None, None)])
    wh.write("rollouts", tables["rollouts"], model_key="1.5", scenario_key="2024", file_stem="x")
    con = connect_read_only(build_catalog(tmp_path / "w", tmp_path / "c.duckdb").path)
    try:
        assert con.execute("select model, scenario from rollouts").fetchall() == [("1.5", "2024")]
    finally:
        con.close()


def test_verifications_latest_picks_newest_version(populated: Path) -> None:
    con = connect_read_only(populated)
    try:
        latest = {
            (r, v): (ver, ok)
            for r, v, ver, ok in con.execute(
                "select rollout_id, verifier, verifier_version, success from verifications_latest"
            ).fetchall()
        }
    finally:
        con.close()
    assert latest[("g3", "reply_sent")] == ("h2", True)
    assert latest[("g6", "reply_sent")] == ("h2", False)
    assert latest[("s1", "reply_sent")] == ("bbb", True)  # same verified_at: the greater version wins
    assert len(latest) == len({(r, v) for r, v, *_ in VERIFICATIONS})


def test_rollout_scores_and_pass_rates_match_python(populated: Path) -> None:
    expected = _expected_scores()
    con = connect_read_only(populated)
    try:
        scores = _rows(con, "select * from rollout_scores")
        pass_rates = {(r["scenario_id"], r["model_name"]): r for r in _rows(con, "select * from pass_rates")}
        task_rates = {(r["model_name"], r["task_id"]): r for r in _rows(con, "select * from task_pass_rates")}
    finally:
        con.close()

    assert {r["rollout_id"]: (r["reward"], r["partial_credit"]) for r in scores} == expected
    by_id = {r["rollout_id"]: r for r in scores}
    assert by_id["g5"]["reward"] is None and by_id["g5"]["n_verifiers"] == 0
    assert by_id["g4"]["reward"] == 0.0 and by_id["g4"]["passed_verifiers"] == 2
    assert (by_id["s1"]["model"], by_id["s1"]["is_simulated"]) == ("sim-oracle", True)

    model_of = {r[0]: r[1] for r in ROLLOUTS}
    task_of = {r[0]: r[2] for r in ROLLOUTS}
    by_model: dict[str, list[tuple[float, float]]] = defaultdict(list)
    by_task: dict[tuple[str, str], list[float]] = defaultdict(list)
    for rid, (reward, partial) in expected.items():
        if reward is not None and partial is not None:
            by_model[model_of[rid]].append((reward, partial))
            by_task[(model_of[rid], task_of[rid])].append(reward)

    assert set(pass_rates) == {("email:v1", "gpt-x"), ("email:v1", "sim-oracle")}
    for (_, model), row in pass_rates.items():
        rewards = [r for r, _ in by_model[model]]
        assert row["n"] == len(rewards)
        assert row["passes"] == sum(1 for r in rewards if r == 1.0)
        assert row["pass_rate"] == pytest.approx(statistics.fmean(rewards))
        assert row["variance"] == pytest.approx(statistics.pvariance(rewards))
        assert row["std"] == pytest.approx(statistics.pstdev(rewards))
        assert row["mean_partial_credit"] == pytest.approx(statistics.fmean(p for _, p in by_model[model]))
        assert row["is_simulated"] is (model == "sim-oracle")
    # Spelled out once, so a wrong rule cannot hide behind a matching wrong oracle.
    gpt = pass_rates[("email:v1", "gpt-x")]
    assert (gpt["n"], gpt["n_unscored"], gpt["passes"]) == (5, 1, 2)
    assert gpt["pass_rate"] == pytest.approx(0.4) and gpt["variance"] == pytest.approx(0.24)
    assert (gpt["n_errors"], gpt["error_share"]) == (0, 0.0)
    sim = pass_rates[("email:v1", "sim-oracle")]
    assert (sim["n"], sim["passes"], sim["pass_rate"]) == (2, 2, pytest.approx(1.0))
    assert (sim["n_errors"], sim["error_share"], sim["n_unscored"]) == (1, pytest.approx(1 / 3), 0)
    assert (by_id["s3"]["outcome"], by_id["s3"]["error_class"]) == ("error", "tool_server")
    assert (by_id["g4"]["outcome"], by_id["g4"]["error_class"]) == ("failed", None)
    assert by_id["g5"]["outcome"] is None

    assert set(task_rates) == set(by_task)
    for key, row in task_rates.items():
        assert (row["n"], row["passes"]) == (len(by_task[key]), sum(1 for r in by_task[key] if r == 1.0))
        assert row["pass_rate"] == pytest.approx(statistics.fmean(by_task[key]))


def test_metric_view_columns_match_their_docs(populated: Path) -> None:
    con = connect_read_only(populated)
    try:
        for view in METRIC_VIEWS:
            documented = [name for name, _ in view.columns]
            if documented == ["*"]:
                continue
            assert [r[0] for r in con.execute(f"describe {view.name}").fetchall()] == documented, view.name
    finally:
        con.close()


_READER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print(con.execute("select count(*) from rollouts").fetchone()[0], flush=True)
sys.stdin.readline()
print(con.execute("select count(*) from rollouts").fetchone()[0], flush=True)
"""


def test_rebuild_while_an_analyst_holds_a_read_only_connection(tmp_path: Path, f: ModuleType) -> None:
    root, db = tmp_path / "w", tmp_path / "eval.duckdb"
    build_catalog(root, db)
    # Another process, as an analyst's notebook would be: DuckDB's file locks are per process.
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout is not None and reader.stdin is not None
        assert reader.stdout.readline().strip() == "0"
        # Control: writing the catalog in place would collide with the reader's lock.
        with pytest.raises(duckdb.IOException):
            duckdb.connect(str(db)).close()

        _populate(root, f)
        summary = build_catalog(root, db)
        assert summary.row_counts["rollouts"] == len(ROLLOUTS)

        con = connect_read_only(db)
        try:
            assert con.execute("select count(*) from rollouts").fetchone() == (len(ROLLOUTS),)
        finally:
            con.close()

        # The analyst's session keeps working on the catalog it opened.
        out, _ = reader.communicate("\n", timeout=30)
        assert out.strip() == "0"
        assert reader.returncode == 0
    finally:
        if reader.poll() is None:
            reader.kill()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.duckdb", "w"]


def test_in_process_reader_and_rebuild(tmp_path: Path, f: ModuleType) -> None:
    root, db = tmp_path / "w", tmp_path / "eval.duckdb"
    build_catalog(root, db)
    con = connect_read_only(db)
    _populate(root, f)
    build_catalog(root, db)
    assert con.execute("select count(*) from rollouts").fetchone() == (0,)
    con.close()
    con = connect_read_only(db)
    try:
        assert con.execute("select count(*) from rollouts").fetchone() == (len(ROLLOUTS),)
    finally:
        con.close()


def test_root_with_equals_sign_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must not contain '='"):
        build_catalog(tmp_path / "date=2026" / "warehouse", tmp_path / "eval.duckdb")


def test_summary_row_counts(populated: Path, tmp_path: Path) -> None:
    summary = build_catalog(tmp_path / "warehouse", populated)
    assert summary.path == populated.resolve()
    assert summary.row_counts["rollouts"] == len(ROLLOUTS)
    assert summary.row_counts["verifications"] == len(VERIFICATIONS)
    assert summary.row_counts["tasks"] == 2
    assert summary.row_counts["tool_calls"] == 2 * len(ROLLOUTS)
    assert summary.row_counts["state_diffs"] == 2 * len(ROLLOUTS)


def test_a_warehouse_written_before_a_nullable_column_existed_still_builds(tmp_path: Path) -> None:
    """Tasks files from before `tasks.benchmark`: the column reads NULL, and the views that use it (parity,
    bfcl_accuracy, tau2_pass_hat_k) build instead of failing the whole catalog."""
    from tests.reports.synthetic_warehouse import attempts_with, write_warehouse

    root = tmp_path / "warehouse"
    write_warehouse(root, attempts_with({"t1": (2, 1)}))
    for tasks_file in (root / "tasks").rglob("*.parquet"):
        old = pq.read_table(tasks_file)
        pq.write_table(old.drop_columns(["benchmark"]), tasks_file)
        assert "benchmark" not in pq.read_schema(tasks_file).names
    db = build_catalog(root, tmp_path / "eval.duckdb").path
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("select task_id, benchmark from tasks").fetchall() == [("t1", None)]
        assert con.execute("select count(*) from bfcl_accuracy").fetchone() == (0,)
