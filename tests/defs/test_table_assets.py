"""Dagster's table conventions over the whole asset graph: every asset that writes a warehouse table (kind
`parquet`) declares its columns and table name, and every materialisation of it carries `dagster/row_count`, the
rows it wrote (0 when it wrote none), and `dagster/column_schema`; no materialisation uses a `rows` key of our own
where the standard one exists. The table assets are found by walking the code location's assets, not from a list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pyarrow.parquet as pq
import pytest

from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIO_MODEL, SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService
from eval_pipelines.defs.registry import build_assets
from eval_pipelines.defs.table_metadata import TABLE_KIND, table_name

pytestmark = pytest.mark.slow

SWEEP = """
name: tables
scenarios: ["email_ops:1.0.0"]
task_ids: [email_ops_001, email_ops_002]
models:
  - {name: sim-oracle, model: sim-oracle, base_url: "sim://local"}
rollout_count: 2
rubric_judge: {name: sim-judge, model: sim-judge, base_url: "sim://local"}
"""
IN_SWEEP = partition_of("sim-oracle", "email_ops:1.0.0")
#: A partition of the grid that no sweep pairs: its assets run and write nothing.
NOT_IN_SWEEP = partition_of("sim-oracle", "team_chat:1.0.0")


def _table_of(spec: dg.AssetSpec) -> str:
    name = spec.metadata["dagster/table_name"]
    assert isinstance(name, str) and name.startswith("eval.main.")
    return name.removeprefix("eval.main.")


def _parquet_rows(folder: Path) -> int:
    return sum(pq.read_metadata(path).num_rows for path in folder.rglob("*.parquet"))


def test_every_table_asset_materialisation_carries_the_standard_row_count(tmp_path: Path) -> None:
    assets = build_assets()
    specs = {spec.key: spec for a in assets for spec in a.specs}
    tables = {key: spec for key, spec in specs.items() if TABLE_KIND in spec.kinds}
    assert len(tables) >= 5  # rollouts, verification, rubric_verification, judgements, synthetic_rows, ...
    for key, spec in tables.items():
        assert isinstance(spec.metadata.get("dagster/column_schema"), dg.TableSchema), key
        assert spec.metadata["dagster/table_name"] == table_name(_table_of(spec)), key

    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "tables.yaml").write_text(SWEEP)
    data = tmp_path / "data"
    resources = {
        "paths": EvalPaths(data_dir=str(data), sweeps_dir=str(sweeps)),
        "eval_service": EvalService(data_dir=str(data)),
        "assessment_platform": AssessmentPlatform(data_dir=str(data)),
    }
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(MODELS.name or "", ["sim-oracle"])
    instance.add_dynamic_partitions(SCENARIOS.name or "", ["email_ops:1.0.0", "team_chat:1.0.0"])

    # The table assets and what they read, run partition by partition; then the catalog over what they wrote.
    needed = dg.AssetSelection.assets(*tables).upstream().resolve(assets)
    by_partitions: dict[Any, list[dg.AssetsDefinition]] = {}
    for a in assets:
        if a.key in needed:
            by_partitions.setdefault(a.partitions_def, []).append(a)
    assert set(by_partitions) == {SCENARIO_MODEL, SCENARIOS}, by_partitions
    runs: list[tuple[Any, str, dict[str, str]]] = [
        (SCENARIO_MODEL, IN_SWEEP, {SWEEP_TAG: "tables", SWEEP_ID_TAG: "tables-1"}),
        (SCENARIO_MODEL, NOT_IN_SWEEP, {}),
        (SCENARIOS, "email_ops:1.0.0", {}),
    ]
    materialised: dict[dg.AssetKey, dict[str, dict[str, Any]]] = {}
    for partitions_def, partition, tags in runs:
        result = dg.materialize(
            by_partitions[partitions_def], partition_key=partition, instance=instance, resources=resources, tags=tags
        )
        assert result.success, partition
        for event in result.get_asset_materialization_events():
            m = event.materialization
            materialised.setdefault(m.asset_key, {})[partition] = {k: v.value for k, v in m.metadata.items()}
    catalog = next(a for a in assets if a.key == dg.AssetKey("eval_catalog"))
    result = dg.materialize([catalog], instance=instance, resources=resources)
    assert result.success
    (event,) = result.get_asset_materialization_events()
    materialised[catalog.key] = {"": {k: v.value for k, v in event.materialization.metadata.items()}}

    for key in tables:
        assert key in materialised, key
        for partition, metadata in materialised[key].items():
            assert isinstance(metadata.get("dagster/row_count"), int), (key, partition)
            assert metadata["dagster/column_schema"] == specs[key].metadata["dagster/column_schema"], (key, partition)
            assert metadata["dagster/table_name"] == specs[key].metadata["dagster/table_name"], (key, partition)
    for key, partitions in materialised.items():
        for metadata in partitions.values():
            custom = [k for k in metadata if k == "rows" or k.startswith("rows/")]
            assert not custom, (key, custom)

    # The counts are the rows written: nothing outside the sweep, and what the Parquet files hold inside it.
    warehouse = data / "warehouse"
    model_scenario = {key for key in tables if specs[key].partitions_def == SCENARIO_MODEL}
    for key in model_scenario:
        assert materialised[key][NOT_IN_SWEEP]["dagster/row_count"] == 0, key
    part = Path("model=sim-oracle") / "scenario=email_ops_1.0.0"
    written: dict[str, int] = {}
    for key in model_scenario:
        table = _table_of(specs[key])
        written[table] = written.get(table, 0) + materialised[key][IN_SWEEP]["dagster/row_count"]
    assert written["rollouts"] == 4 and written["verifications"] > 4  # programmatic verdicts and the judge's
    for table, rows in written.items():
        assert rows == _parquet_rows(warehouse / table / part), table
    synthetic = next(key for key in tables if specs[key].partitions_def == SCENARIOS)
    assert materialised[synthetic]["email_ops:1.0.0"]["dagster/row_count"] == _parquet_rows(
        warehouse / _table_of(specs[synthetic])
    )
    # The other tables `rollouts` writes, and the catalog's views, as table-valued entries.
    tables_written = materialised[dg.AssetKey("rollouts")][IN_SWEEP]["tables_written"].records
    other = {r.data["table"]: r.data["rows"] for r in tables_written}
    assert other["rollouts"] == 4 and other["messages"] == _parquet_rows(warehouse / "messages" / part)
    counts = {r.data["table"]: r.data["rows"] for r in materialised[catalog.key][""]["row_counts"].records}
    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    try:
        for view in ("rollouts", "verifications", "judgements", "synthetic_rows"):
            row = con.execute(f"select count(*) from {view}").fetchone()
            assert row is not None and counts[view] == row[0], view
    finally:
        con.close()
