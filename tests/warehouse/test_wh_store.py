from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eval_pipelines.warehouse.rows import rollout_tables, tasks_table, verification_table
from eval_pipelines.warehouse.store import SchemaMismatchError, Warehouse
from eval_pipelines.warehouse.tables import TABLES


def _rollouts(f: ModuleType, *ids: str) -> dict[str, pa.Table]:
    return rollout_tables(f.make_ctx(), [(f.make_rollout(i), f.make_artifacts(), f"a/{i}.json") for i in ids])


def test_hive_paths_and_partition_columns_not_in_files(tmp_path: Path, f: ModuleType) -> None:
    wh = Warehouse(tmp_path)
    path = wh.write(
        "rollouts", _rollouts(f, "r1")["rollouts"], model_key="gpt-x", scenario_key="email_v1", file_stem="run-1"
    )
    assert path == tmp_path / "rollouts" / "model=gpt-x" / "scenario=email_v1" / "run-1.parquet"
    names = pq.read_schema(path).names
    assert "model" not in names and "scenario" not in names
    assert {"model_name", "scenario_id"} <= set(names)
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "ZSTD"

    tasks_path = wh.write_tasks(tasks_table(f.SCENARIO_ID, [f.make_task("t1")]), "email_v1")
    assert tasks_path == tmp_path / "tasks" / "scenario=email_v1" / "tasks.parquet"
    assert wh.files("tasks") == [tasks_path]
    assert wh.files("rollouts") == [path]


def test_rewrite_same_stem_is_idempotent(tmp_path: Path, f: ModuleType) -> None:
    wh = Warehouse(tmp_path)
    keys = {"model_key": "gpt-x", "scenario_key": "email_v1"}
    for _ in range(2):
        for name, table in _rollouts(f, "r1", "r2").items():
            wh.write(name, table, file_stem="run-1", **keys)
    assert wh.read("rollouts").num_rows == 2
    assert wh.read("messages").num_rows == 10
    assert len(wh.files("rollouts")) == 1
    # No temp files survive a write.
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".parquet"]

    wh.write("rollouts", _rollouts(f, "r3")["rollouts"], file_stem="run-2", **keys)
    assert wh.read("rollouts").num_rows == 3
    assert wh.remove("rollouts", file_stem="run-2", **keys) is True
    assert wh.remove("rollouts", file_stem="run-2", **keys) is False
    assert wh.read("rollouts").num_rows == 2


def test_schema_is_enforced(tmp_path: Path, f: ModuleType) -> None:
    wh = Warehouse(tmp_path)
    keys = {"model_key": "gpt-x", "scenario_key": "email_v1", "file_stem": "x"}
    inferred = pa.Table.from_pylist(_rollouts(f, "r1")["rollouts"].to_pylist())
    with pytest.raises(SchemaMismatchError, match=r"rollout_index: type int64 != int32"):
        wh.write("rollouts", inferred, **keys)

    good = _rollouts(f, "r1")["rollouts"]
    with pytest.raises(SchemaMismatchError, match=r"missing columns \['artifacts_path'\]"):
        wh.write("rollouts", good.drop_columns(["artifacts_path"]), **keys)
    with pytest.raises(SchemaMismatchError, match="unexpected columns"):
        wh.write("rollouts", good.append_column("model", pa.array(["gpt-x"])), **keys)
    with pytest.raises(SchemaMismatchError, match="does not match its registered schema"):
        wh.write("messages", good, **keys)
    relaxed = pa.schema([fld.with_nullable(True) for fld in TABLES["rollouts"]])
    with pytest.raises(SchemaMismatchError, match="sweep_id: nullable=True"):
        wh.write("rollouts", good.cast(relaxed), **keys)
    assert not list(tmp_path.rglob("*.parquet"))


def test_bad_keys_and_tables_are_rejected(tmp_path: Path, f: ModuleType) -> None:
    wh = Warehouse(tmp_path)
    table = verification_table([])
    with pytest.raises(ValueError, match="model_key"):
        wh.write("verifications", table, model_key="../etc", scenario_key="s", file_stem="x")
    with pytest.raises(ValueError, match="file_stem"):
        wh.write("verifications", table, model_key="m", scenario_key="s", file_stem="a/b")
    with pytest.raises(ValueError, match="scenario_key"):
        wh.write("verifications", table, model_key="m", scenario_key="email:v1", file_stem="x")
    with pytest.raises(KeyError, match="unknown warehouse table"):
        wh.files("no_such_table")
    with pytest.raises(ValueError, match="write_tasks"):
        wh.write("tasks", tasks_table("s", []), model_key="m", scenario_key="s", file_stem="x")


def test_secrets_never_reach_parquet(tmp_path: Path, f: ModuleType) -> None:
    wh = Warehouse(tmp_path)
    ctx = f.make_ctx(base_url=f"https://user:{f.CANARY}@proxy.example/v1")
    items = [(f.make_rollout("r1", base_url=f"https://user:{f.CANARY}@proxy.example/v1"), f.make_artifacts(), "a")]
    for name, table in rollout_tables(ctx, items).items():
        wh.write(name, table, model_key="gpt-x", scenario_key="email_v1", file_stem="run-1")
    verifs = verification_table(
        [f.make_verification("r1", "v", "h", True, output={"api_key": f.CANARY, "k": f.VISIBLE})]
    )
    wh.write("verifications", verifs, model_key="gpt-x", scenario_key="email_v1", file_stem="run-1")
    wh.write_tasks(tasks_table(f.SCENARIO_ID, [f.make_task("t1")]), "email_v1")

    files = sorted(tmp_path.rglob("*.parquet"))
    # rollouts, rollout_attempts, messages, tool_calls, state_diffs, simulator_checks, verifications, tasks
    assert len(files) == 8
    # zstd would hide a plaintext match in the raw bytes, so also check the decoded values; the visible marker
    # written beside the canary proves the decoded check sees nested data.
    decoded = "\n".join(repr(pq.read_table(p).to_pylist()) for p in files)
    assert f.VISIBLE in decoded
    assert f.CANARY not in decoded
    for p in files:
        assert f.CANARY.encode() not in p.read_bytes(), p


def test_streamed_writes_equal_one_table_and_leave_no_temp_files(tmp_path: Path, f: ModuleType) -> None:
    wh = Warehouse(tmp_path / "wh")
    ctx = f.make_ctx()
    rollouts = [(f.make_rollout(f"r{i}", index=i), f.make_artifacts(), None) for i in range(5)]
    chunks = [rollout_tables(ctx, rollouts[:2]), rollout_tables(ctx, rollouts[2:])]
    rows = wh.write_streams(iter(chunks), model_key=ctx.model_key, scenario_key=ctx.scenario_key, file_stem="run")
    whole = rollout_tables(ctx, rollouts)
    assert rows == {name: table.num_rows for name, table in whole.items()}
    for name, table in whole.items():
        written = pq.read_table(
            wh.path_for(name, model_key=ctx.model_key, scenario_key=ctx.scenario_key, file_stem="run")
        )
        assert written.to_pylist() == table.to_pylist()
    assert not list((tmp_path / "wh").rglob("*.tmp"))

    def failing() -> Iterator[dict[str, pa.Table]]:
        yield chunks[0]
        raise RuntimeError("the source broke mid-stream")

    with pytest.raises(RuntimeError):
        wh.write_streams(failing(), model_key=ctx.model_key, scenario_key=ctx.scenario_key, file_stem="broken")
    assert not list((tmp_path / "wh").rglob("*.tmp")) and not list((tmp_path / "wh").rglob("broken.parquet"))
