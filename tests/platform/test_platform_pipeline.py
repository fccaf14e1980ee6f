"""The assessment steps after a real (embedded, simulated) sweep: rows from verified rollouts, judges on the
embedded platform, `judgements` for every rollout, the DuckDB views, and synthetic rows from seed examples."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from eval_pipelines.clients.platform import PlatformClient
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.local.services import local_evaluation_service, open_platform
from eval_pipelines.pipeline.assessment import (
    DatasetManifest,
    JudgeSetup,
    KnownJudge,
    RolloutRef,
    build_dataset_rows,
    dataset_row,
    expand_synthetic,
    judge_manifest,
    judgements_file_stem,
    judgements_table,
    manifest_path,
    seed_examples,
    synthetic_rows_table,
    upload_and_judge,
    upload_partition,
)
from eval_pipelines.pipeline.steps import launch_request, run_and_collect, verify_partition
from eval_pipelines.platform.embedded import EmbeddedPlatform
from eval_pipelines.platform.models import SIM_SYNTH_MODEL_ID
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.platform import DatasetRow
from eval_pipelines.schemas.sweep import SweepConfig
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.metrics import JUDGE_SCORES_BY_MODEL, JUDGE_VERIFIER_AGREEMENT, JUDGEMENTS_LATEST
from eval_pipelines.warehouse.rows import RolloutContext
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import JUDGEMENTS, SYNTHETIC_ROWS
from tests.platform.conftest import BENIGN_ROW, HARMFUL_ROW, SPACE, Platform

SCENARIO_ID = "email_ops:1.0.0"
SWEEP_ID = "tiny-test"
SCENARIO_KEY = "email_ops_1.0.0"
MODELS = ("sim-oracle", "sim-noop")
JUDGED_AT = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny sweep (2 tasks x 1 rollout x 2 simulated models), collected and verified, Dagster-free."""
    data = tmp_path_factory.mktemp("sweep")
    sweep = SweepConfig.model_validate(
        {
            "name": "tiny",
            "scenarios": [SCENARIO_ID],
            "task_ids": ["email_ops_001", "email_ops_002"],
            "models": [{"name": m, "model": m, "base_url": "sim://local"} for m in MODELS],
            "rollout_count": 1,
        }
    )
    catalog = ScenarioCatalog()
    scenario = catalog.get(SCENARIO_ID)
    with local_evaluation_service(data, catalog.root) as local, contextlib.closing(local.backend()) as backend:
        warehouse = Warehouse(data / "warehouse")
        for model in sweep.models:
            request = launch_request(sweep, model, scenario, SWEEP_ID)
            ctx = RolloutContext(
                sweep_id=SWEEP_ID,
                run_name=request.run_name or "",
                model_key=model.name,
                scenario_key=SCENARIO_KEY,
                model_name=model.name,
                is_simulated=True,
            )
            run_and_collect(backend, request, ctx, scenario, warehouse, data / "traces", timeout_seconds=120)
            verify_partition(warehouse, scenario, model.name, SCENARIO_KEY)
    return data


async def test_judgements_for_every_rollout_of_a_sweep(swept: Path, tmp_path: Path) -> None:
    warehouse = Warehouse(swept / "warehouse")
    tables = {}
    with EmbeddedPlatform(tmp_path / "platform-data") as platform:
        async with PlatformClient(platform.url, platform.token) as client:
            for model in MODELS:
                manifest = await upload_partition(
                    client, warehouse, model, SCENARIO_KEY, sweep_id=SWEEP_ID, space_id=platform.space_id
                )
                assert manifest is not None
                summary = await judge_manifest(client, manifest, judged_at=JUDGED_AT)
                assert summary.rows == 2 and summary.dataset_id is not None
                assert set(summary.judges) == {"quality", "safety"}
                tables[model] = summary.table

    for model, table in tables.items():
        assert table.spec == JUDGEMENTS
        stored = next((swept / "warehouse" / "rollouts" / f"model={model}").rglob("*.parquet"))
        rollout_ids = set(pq.read_table(stored).column("rollout_id").to_pylist())
        rows = table.to_pylist()
        assert {(r["rollout_id"], r["judge_kind"]) for r in rows} == {
            (rid, kind) for rid in rollout_ids for kind in ("quality", "safety")
        }
        assert all(r["model_name"] == model and r["sweep_id"] == SWEEP_ID for r in rows)
        assert all(r["rationale"].startswith("[simulated]") and r["judged_at"] == JUDGED_AT for r in rows)
        assert all(r["score"] <= 2 for r in rows if r["judge_kind"] == "safety")  # benign email work
        assert {r["ground_truth"] for r in rows} == ({1} if model == "sim-oracle" else {0})

    def mean_quality(model: str) -> float:
        scores = [r["score"] for r in tables[model].to_pylist() if r["judge_kind"] == "quality"]
        return sum(scores) / len(scores)

    assert mean_quality("sim-oracle") > mean_quality("sim-noop")

    # The views, against the real catalog's rollout_scores and the registered judgements table.
    warehouse = Warehouse(swept / "warehouse")
    for model, table in tables.items():
        warehouse.write(
            "judgements",
            table,
            model_key=model,
            scenario_key=SCENARIO_KEY,
            file_stem=judgements_file_stem(JudgeSetup(), SWEEP_ID),
        )
    catalog = build_catalog(swept / "warehouse", tmp_path / "eval.duckdb").path
    con = duckdb.connect(str(catalog))
    try:
        by_model = con.execute(
            "select model_name, judge_kind, n, flagged from judge_scores_by_model order by model_name, judge_kind"
        ).fetchall()
        assert by_model == [
            ("sim-noop", "quality", 2, 0),
            ("sim-noop", "safety", 2, 0),
            ("sim-oracle", "quality", 2, 0),
            ("sim-oracle", "safety", 2, 0),
        ]
        agreement = con.execute(
            "select model_name, n, both_pass, both_fail, agreement from judge_verifier_agreement order by model_name"
        ).fetchall()
        assert agreement == [("sim-noop", 2, 0, 2, 1.0), ("sim-oracle", 2, 2, 0, 1.0)]
        for view in (JUDGEMENTS_LATEST, JUDGE_SCORES_BY_MODEL, JUDGE_VERIFIER_AGREEMENT):
            names = [c[0] for c in con.execute(f"describe {view.name}").fetchall()]
            documented = [c for c, _ in view.columns]
            assert documented == ["*"] or documented == names, view.name
    finally:
        con.close()


async def test_upload_and_judging_as_separate_steps_across_platform_restarts(swept: Path, tmp_path: Path) -> None:
    """`assessment_dataset` and `judgements` run in different processes: the manifest and the platform's store
    carry the dataset from one to the other."""
    warehouse, platform_data = Warehouse(swept / "warehouse"), tmp_path / "platform-data"
    with EmbeddedPlatform(platform_data) as platform:
        async with PlatformClient(platform.url, platform.token) as client:
            manifest = await upload_partition(
                client, warehouse, "sim-noop", SCENARIO_KEY, sweep_id=SWEEP_ID, space_id=platform.space_id
            )
    assert manifest is not None and len(manifest.rows) == 2
    path = manifest.save(manifest_path(tmp_path, "sim-noop", SCENARIO_KEY, SWEEP_ID))
    assert DatasetManifest.load(path) == manifest

    with EmbeddedPlatform(platform_data) as platform:  # a new token, the same local space and store
        async with PlatformClient(platform.url, platform.token) as client:
            summary = await judge_manifest(client, DatasetManifest.load(path), judged_at=JUDGED_AT)
    assert summary.rows == 2 and summary.table.num_rows == 4
    assert [r.rollout_id for r in manifest.rows] == summary.table.column("rollout_id")[::2]
    assert set(summary.table.column("ground_truth")) == {0}
    assert summary.mean_scores["quality"] < 5


def test_dataset_rows_come_from_the_stored_traces(swept: Path) -> None:
    rows = build_dataset_rows(Warehouse(swept / "warehouse"), "sim-oracle", SCENARIO_KEY, SWEEP_ID)
    assert len(rows) == 2 and [r.ref.task_id for r in rows] == ["email_ops_001", "email_ops_002"]
    for row in rows:
        assert row.row.response.role == "assistant" and row.row.response.content
        assert row.row.conv_prefix[0].role in ("system", "user")
        assert any(m.role == "tool" for m in row.row.conv_prefix)
        assert any("[tool call] email__" in m.content for m in row.row.conv_prefix if m.role == "assistant")
        assert row.ref.rollout_id in (row.row.context or "") and row.ref.task_id in (row.row.context or "")
        assert row.ref.ground_truth == row.row.ground_truth == 1


def test_dataset_row_splits_at_the_final_assistant_turn() -> None:
    artifacts = RunArtifacts(
        task_id="t1",
        task="Send it",
        messages=[
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "Send it"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "email__send", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sent"},
            {"role": "assistant", "content": "Sent."},
        ],
    )
    row = dataset_row(artifacts, ground_truth=1, task_id="t1", rollout_id="r1")
    assert row is not None
    assert [m.role for m in row.conv_prefix] == ["system", "user", "assistant", "tool"]
    assert row.conv_prefix[1].content == "Send it"
    assert row.conv_prefix[2].content == "[tool call] email__send({})"
    assert row.response.content == "Sent." and row.ground_truth == 1
    no_answer = RunArtifacts(task_id="t1", task="x", messages=[{"role": "user", "content": "x"}])
    assert dataset_row(no_answer, ground_truth=None, task_id="t1", rollout_id="r1") is None


async def test_reused_judges_are_kept_and_missing_ones_recreated(platform: Platform) -> None:
    rows = [DatasetRow.model_validate(BENIGN_ROW), DatasetRow.model_validate(HARMFUL_ROW)]
    async with platform.client() as client:
        first = await upload_and_judge(client, rows, SPACE, dataset_name="d", run_name="r1")
        again = await upload_and_judge(client, rows, SPACE, dataset_name="d", run_name="r2", reuse=first.judges)
        assert again.judges == first.judges and again.dataset_id != first.dataset_id
        gone = {k: KnownJudge(str(uuid.uuid4()), f"gone-{k}", j.model_name) for k, j in first.judges.items()}
        recreated = await upload_and_judge(client, rows, SPACE, dataset_name="d", run_name="r3", reuse=gone)
    assert {j.judge_id for j in recreated.judges.values()}.isdisjoint({j.judge_id for j in gone.values()})
    assert recreated.verdicts[1]["safety"].score > recreated.verdicts[0]["safety"].score
    assert recreated.verdicts[1]["safety"].category == "weapons"

    refs = [RolloutRef("s", f"r{i}", "sc", "t", "m", row.ground_truth) for i, row in enumerate(rows)]
    table = judgements_table(refs, recreated, judged_at=JUDGED_AT)
    assert table.num_rows == 4 and set(table.column("judge_kind")) == {"quality", "safety"}
    assert table.column("ground_truth") == [1, 1, 0, 0]


async def test_synthetic_rows_from_a_scenarios_seed_examples(platform: Platform) -> None:
    examples = seed_examples(ScenarioCatalog().get(SCENARIO_ID), limit=3)
    assert len(examples) == 3
    async with platform.client() as client:
        generated = await expand_synthetic(client, examples, multiplier=2)
    assert len(generated) == 6
    assert all(set(r.data) == {"conv_prefix", "response", "context"} for r in generated)
    table = synthetic_rows_table(
        SCENARIO_ID, generated, model_id=SIM_SYNTH_MODEL_ID, prompt="p", generated_at=JUDGED_AT
    )
    assert table.spec == SYNTHETIC_ROWS and table.num_rows == 6
    assert table.column("row_index") == list(range(6))
    first: dict[str, Any] = table.to_pylist()[0]
    assert first["original_json"] != first["generated_json"] and first["scenario_id"] == SCENARIO_ID


async def test_open_platform_is_embedded_by_default_and_hosted_when_configured(
    platform: Platform, tmp_path: Path
) -> None:
    with open_platform(tmp_path / "embedded", environ={}) as target:
        assert target.embedded and target.token not in repr(target)
        async with target.client() as client:
            upload = await client.upload_platform([BENIGN_ROW], dataset_name="e", space_id=target.space_id)
        assert upload.data.rows == 1
    hosted_env = {"PLATFORM_URL": platform.url, "PLATFORM_TOKEN": platform.token, "PLATFORM_SPACE_ID": SPACE}
    with open_platform(tmp_path / "unused", environ=hosted_env) as target:
        assert not target.embedded and target.url == platform.url and target.space_id == SPACE
        async with target.client() as client:
            assert (await client.upload_platform([BENIGN_ROW], dataset_name="h", space_id=SPACE)).data.rows == 1
    assert not (tmp_path / "unused").exists()
    with (
        pytest.raises(ValueError, match="PLATFORM_TOKEN and PLATFORM_SPACE_ID"),
        open_platform(tmp_path, environ={"PLATFORM_URL": platform.url}),
    ):
        pass
