"""One scenario x model partition materialised in an ephemeral Dagster instance, rows asserted in Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pyarrow.parquet as pq
import pytest

from eval_pipelines.clients.evaluation import EvaluationClientSync
from eval_pipelines.definitions import build_assets, defs
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG, eval_catalog, eval_run, rollouts
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIO_MODEL, SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from eval_pipelines.schemas.artifacts import STORED_ARTIFACTS_SUFFIX

SWEEP = """
name: tiny
scenarios: ["email_ops:1.0.0"]
task_ids: [email_ops_001, email_ops_002]
models:
  - {name: sim-oracle, model: sim-oracle, base_url: "sim://local"}
  - {name: sim-noop, model: sim-noop, base_url: "sim://local"}
rollout_count: 2
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[dg.DagsterInstance, dict[str, object], Path]:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "tiny.yaml").write_text(SWEEP)
    data = tmp_path / "data"
    resources = {
        "paths": EvalPaths(data_dir=str(data), sweeps_dir=str(sweeps)),
        "eval_service": EvalService(data_dir=str(data)),
        "assessment_platform": AssessmentPlatform(data_dir=str(data)),
    }
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(MODELS.name or "", ["sim-oracle", "sim-noop"])
    instance.add_dynamic_partitions(SCENARIOS.name or "", ["email_ops:1.0.0"])
    return instance, resources, data


def _materialise(instance: dg.DagsterInstance, resources: dict[str, object], model: str) -> dg.ExecuteInProcessResult:
    verification = build_assets()[2]
    return dg.materialize(
        [eval_run, rollouts, verification],
        partition_key=partition_of(model, "email_ops:1.0.0"),
        instance=instance,
        resources=resources,
        tags={SWEEP_TAG: "tiny", SWEEP_ID_TAG: "tiny-test"},
    )


def test_partition_writes_rows_and_rerun_resumes(setup: tuple[dg.DagsterInstance, dict[str, object], Path]) -> None:
    instance, resources, data = setup
    result = _materialise(instance, resources, "sim-oracle")
    assert result.success
    part = data / "warehouse" / "rollouts" / "model=sim-oracle" / "scenario=email_ops_1.0.0"
    table = pq.read_table(next(part.glob("*.parquet")))
    assert table.num_rows == 4
    assert set(table.column("task_id").to_pylist()) == {"email_ops_001", "email_ops_002"}
    assert set(table.column("status").to_pylist()) == {"completed"}
    assert set(table.column("sweep_id").to_pylist()) == {"tiny-test"}
    assert all(table.column("success").to_pylist())
    verified = pq.read_table(
        next((data / "warehouse" / "verifications" / "model=sim-oracle" / "scenario=email_ops_1.0.0").glob("*.parquet"))
    )
    assert verified.num_rows >= 4 and all(verified.column("success").to_pylist())

    materialisation = result.asset_materializations_for_node("rollouts")[0]
    assert materialisation.metadata["rollouts"].value == 4
    # Dagster's standard table keys: the Catalog's row count for this materialisation
    assert materialisation.metadata["dagster/row_count"].value == 4
    assert materialisation.metadata["dagster/table_name"].value == "eval.main.rollouts"
    # a deep link into the viewer's rollout list of this partition
    viewer = materialisation.metadata["viewer"].value
    assert viewer == "http://127.0.0.1:8765/rollouts?sweep=tiny-test&model=sim-oracle&scenario=email_ops%3A1.0.0"
    verification = result.asset_materializations_for_node("verification")[0]
    assert verification.metadata["dagster/row_count"].value == verified.num_rows

    # A re-run of the same partition resumes the run: no new rollouts, no duplicate rows.
    assert _materialise(instance, resources, "sim-oracle").success
    files = list(part.glob("*.parquet"))
    assert len(files) == 1 and pq.read_table(files[0]).num_rows == 4

    assert _materialise(instance, resources, "sim-noop").success
    assert dg.materialize([eval_catalog], instance=instance, resources=resources).success
    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    rates = dict(con.execute("select model_name, pass_rate from pass_rates").fetchall())
    con.close()
    assert rates == {"sim-oracle": 1.0, "sim-noop": 0.0}


def test_asset_graph_and_partitions() -> None:
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"eval_run", "rollouts", "verification", "eval_catalog"} <= keys
    assert {"assessment_dataset", "judgements", "synthetic_rows"} <= keys
    assert graph.get(dg.AssetKey("rollouts")).parent_keys == {dg.AssetKey("eval_run")}
    assert graph.get(dg.AssetKey("verification")).parent_keys == {dg.AssetKey("rollouts")}
    assert graph.get(dg.AssetKey("eval_catalog")).parent_keys == {
        dg.AssetKey("verification"),
        dg.AssetKey("rubric_verification"),
        dg.AssetKey("judgements"),
    }
    assert graph.get(dg.AssetKey("rollouts")).partitions_def == SCENARIO_MODEL
    assert SCENARIO_MODEL.partition_dimension_names == ["model", "scenario"]


def test_a_partition_launches_its_run_once_and_stores_each_artifact_once(
    setup: tuple[dg.DagsterInstance, dict[str, object], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval_run is the only launcher (rollouts waits and collects, with no resume on the healthy path), both reach
    the service through its client, and each rollout's artifacts exist in one file, the one the rows point to."""
    instance, resources, data = setup
    calls: list[str] = []
    for method in ("launch_run", "resume_run"):
        original = getattr(EvaluationClientSync, method)

        def recorded(self: EvaluationClientSync, *args: Any, _name: str = method, _call: Any = original) -> Any:
            calls.append(_name)
            return _call(self, *args)

        monkeypatch.setattr(EvaluationClientSync, method, recorded)

    assert _materialise(instance, resources, "sim-oracle").success
    assert calls == ["launch_run"]

    part = data / "warehouse" / "rollouts" / "model=sim-oracle" / "scenario=email_ops_1.0.0"
    rows = pq.read_table(next(part.glob("*.parquet")), columns=["rollout_id", "artifacts_path"]).to_pylist()
    assert len(rows) == 4
    for row in rows:
        copies = [p for p in data.rglob(f"{row['rollout_id']}{STORED_ARTIFACTS_SUFFIX}") if p.is_file()]
        assert copies == [Path(row["artifacts_path"])], copies


def test_table_assets_declare_their_columns_with_the_standard_keys() -> None:
    """The Catalog's Columns view fills in from the definitions, before anything ran: every registered column of
    the table, with its doc, and the Hive partition columns."""
    from eval_pipelines.warehouse.tables import table_spec

    graph = defs.resolve_asset_graph()
    for asset, table in (
        ("rollouts", "rollouts"),
        ("verification", "verifications"),
        ("judgements", "judgements"),
        ("synthetic_rows", "synthetic_rows"),
    ):
        metadata = graph.get(dg.AssetKey(asset)).metadata
        schema = metadata["dagster/column_schema"]
        spec = table_spec(table)
        columns = {column.name: column for column in schema.columns}
        assert set(columns) == {c.name for c in spec.columns} | set(spec.partition_by), asset
        assert all(columns[c.name].description == c.doc for c in spec.columns), asset
        assert metadata["dagster/table_name"] == f"eval.main.{table}"
