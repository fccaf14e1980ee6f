"""After a sweep partition, the assessment assets judge every rollout and grow synthetic rows."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from eval_pipelines.definitions import assets_by_name
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService

SWEEP = """
name: assess
scenarios: ["email_ops:1.0.0"]
task_ids: [email_ops_001, email_ops_002, email_ops_003]
models:
  - {name: sim-oracle, model: sim-oracle, base_url: "sim://local"}
rollout_count: 2
"""


def test_judgements_cover_every_rollout(tmp_path: Path) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "assess.yaml").write_text(SWEEP)
    data = tmp_path / "data"
    resources = {
        "paths": EvalPaths(data_dir=str(data), sweeps_dir=str(sweeps)),
        "eval_service": EvalService(data_dir=str(data)),
        "assessment_platform": AssessmentPlatform(data_dir=str(data)),
    }
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(MODELS.name or "", ["sim-oracle"])
    instance.add_dynamic_partitions(SCENARIOS.name or "", ["email_ops:1.0.0"])
    assets = assets_by_name()
    steps = [assets[k] for k in ("eval_run", "rollouts", "verification", "assessment_dataset", "judgements")]
    result = dg.materialize(
        steps,
        partition_key=partition_of("sim-oracle", "email_ops:1.0.0"),
        instance=instance,
        resources=resources,
        tags={SWEEP_TAG: "assess", SWEEP_ID_TAG: "assess-1"},
    )
    assert result.success
    part = Path("model=sim-oracle") / "scenario=email_ops_1.0.0"
    rollouts = pq.read_table(next((data / "warehouse" / "rollouts" / part).glob("*.parquet")))
    judged = pq.read_table(next((data / "warehouse" / "judgements" / part).glob("*.parquet")))
    assert rollouts.num_rows == 6
    kinds: dict[str, set[str]] = {}
    for row in judged.to_pylist():
        kinds.setdefault(row["judge_kind"], set()).add(row["rollout_id"])
    assert kinds == {k: set(rollouts.column("rollout_id").to_pylist()) for k in ("quality", "safety")}

    synth = dg.materialize(
        [assets["synthetic_rows"]], partition_key="email_ops:1.0.0", instance=instance, resources=resources
    )
    assert synth.success
    rows = pq.read_table(next((data / "warehouse" / "synthetic_rows" / "scenario=email_ops_1.0.0").glob("*.parquet")))
    assert rows.num_rows == 12  # 3 seed examples x multiplier 4
