"""Judge validity: a sweep's rubric judge scores every rollout; verdicts are compared, never counted."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb

from eval_pipelines.definitions import assets_by_name
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService

SWEEP = """
name: judged
scenarios: ["email_ops:1.0.0"]
task_ids: [email_ops_001, email_ops_002, email_ops_003, email_ops_004]
models:
  - {name: sim-oracle, model: sim-oracle, base_url: "sim://local"}
  - {name: sim-noop, model: sim-noop, base_url: "sim://local"}
rollout_count: 1
rubric_judge: {name: sim-judge, model: sim-judge, base_url: "sim://local"}
"""


def test_rubric_judge_verdicts_feed_agreement_not_pass_rates(tmp_path: Path) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "judged.yaml").write_text(SWEEP)
    data = tmp_path / "data"
    resources = {
        "paths": EvalPaths(data_dir=str(data), sweeps_dir=str(sweeps)),
        "eval_service": EvalService(data_dir=str(data)),
        "assessment_platform": AssessmentPlatform(data_dir=str(data)),
    }
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(MODELS.name or "", ["sim-oracle", "sim-noop"])
    instance.add_dynamic_partitions(SCENARIOS.name or "", ["email_ops:1.0.0"])
    assets = assets_by_name()
    steps = [assets[k] for k in ("eval_run", "rollouts", "verification", "rubric_verification")]
    for model in ("sim-oracle", "sim-noop"):
        result = dg.materialize(
            steps,
            partition_key=partition_of(model, "email_ops:1.0.0"),
            instance=instance,
            resources=resources,
            tags={SWEEP_TAG: "judged", SWEEP_ID_TAG: "judged-1"},
        )
        assert result.success
        judged = result.asset_materializations_for_node("rubric_verification")[0].metadata["judged"].value
        assert judged == 4
    assert dg.materialize([assets["eval_catalog"]], instance=instance, resources=resources).success
    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    try:
        kinds = dict(con.execute("select kind, count(*) from verifications_latest group by kind").fetchall())
        rates = dict(con.execute("select model_name, pass_rate from pass_rates").fetchall())
        agreement = con.execute("select sum(n), min(agreement) from rubric_verifier_agreement").fetchone()
    finally:
        con.close()
    assert kinds == {"programmatic": 8, "rubric": 8}
    assert rates == {"sim-oracle": 1.0, "sim-noop": 0.0}  # the judge's verdicts are not counted
    assert agreement is not None and agreement[0] == 8 and agreement[1] >= 0.75
