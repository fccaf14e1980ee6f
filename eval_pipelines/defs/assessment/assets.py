"""Assessment-platform assets (spec 002): verified rollouts become dataset rows, judges score them, and seed
examples grow into synthetic rows. Offline they run against the embedded local platform (simulated judges);
with PLATFORM_URL/PLATFORM_TOKEN/PLATFORM_SPACE_ID set, against a hosted one."""

import dagster as dg

from eval_pipelines.defs.evals.assets import LLM_POOL, SWEEP_ID_TAG, sweep_of
from eval_pipelines.defs.evals.partitions import SCENARIO_MODEL, SCENARIOS, keys_of
from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths
from eval_pipelines.defs.table_metadata import table_definition, table_rows
from eval_pipelines.pipeline.assessment import (
    AssessedPartition,
    assessment_dataset_step,
    judgements_step,
    synthetic_rows_step,
)
from eval_pipelines.warehouse.store import Warehouse

GROUP = "assessment"
#: The data version of a partition with nothing to upload.
NO_ROWS = "no-rows"

#: Judge a partition when it is new, or when the dataset's data version (a hash of what the judges read: the
#: conversations and responses, not the verifiers' labels) changed since the last evaluation. A re-verification
#: re-uploads relabelled rows under the same data version, so it costs no judge call; a new sweep's rollouts
#: change it. Written like `eager()` with `any_deps_updated` narrowed to data-version changes.
JUDGE_CONDITION = (
    (
        dg.AutomationCondition.newly_missing()
        | dg.AutomationCondition.any_deps_match(
            dg.AutomationCondition.data_version_changed() & ~dg.AutomationCondition.executed_with_root_target()
        ).with_label("judge_inputs_changed")
    ).since_last_handled()
    & ~dg.AutomationCondition.any_deps_missing()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("eager_on_judge_inputs")


def _assessed(context: dg.AssetExecutionContext, paths: EvalPaths) -> AssessedPartition:
    """The run's partition; its sweep is the run's (tag), else the partition's newest."""
    model_key, scenario_key = keys_of(context)
    return AssessedPartition(
        paths.root, Warehouse(paths.warehouse), model_key, scenario_key, context.run.tags.get(SWEEP_ID_TAG)
    )


@dg.asset(
    partitions_def=SCENARIO_MODEL,
    group_name=GROUP,
    deps=[dg.AssetKey("verification")],
    kinds={"python"},
    automation_condition=dg.AutomationCondition.eager(),
    description="Uploads the partition's verified rollouts to the assessment platform as dataset rows "
    "(conv_prefix, the final assistant turn as response, ground_truth from the verifiers).",
)
def assessment_dataset(
    context: dg.AssetExecutionContext, paths: EvalPaths, assessment_platform: AssessmentPlatform
) -> dg.MaterializeResult:
    manifest = assessment_dataset_step(assessment_platform.target(), _assessed(context, paths))
    if manifest is None:
        return dg.MaterializeResult(metadata={"dagster/row_count": 0}, data_version=dg.DataVersion(NO_ROWS))
    return dg.MaterializeResult(
        metadata={
            "dataset_id": manifest.dataset_id,
            "dataset": manifest.dataset_name,
            "dagster/row_count": len(manifest.rows),
        },
        # What the judges read: `judgements` re-runs only when this changes (see JUDGE_CONDITION).
        data_version=dg.DataVersion(manifest.judge_inputs or manifest.digest),
    )


@dg.asset(
    partitions_def=SCENARIO_MODEL,
    group_name=GROUP,
    deps=[assessment_dataset],
    kinds={"parquet"},
    metadata=table_definition("judgements"),
    pool=LLM_POOL,
    automation_condition=JUDGE_CONDITION,
    description="Scores every uploaded row with a quality judge and a safety judge (higher = more concerning) "
    "and writes the judgements table.",
)
def judgements(
    context: dg.AssetExecutionContext, paths: EvalPaths, assessment_platform: AssessmentPlatform
) -> dg.MaterializeResult:
    model_key, scenario_key = keys_of(context)
    sweep = sweep_of(context.run.tags, paths.sweeps(), model_key, scenario_key)
    calls = sweep.platform_judges if sweep is not None else None
    summary = judgements_step(assessment_platform.target(), _assessed(context, paths), calls)
    if summary is None:
        return dg.MaterializeResult(metadata=table_rows("judgements", 0))
    return dg.MaterializeResult(
        metadata={
            **table_rows("judgements", summary.table.num_rows),
            **{f"mean_score/{kind}": round(score, 3) for kind, score in summary.mean_scores.items()},
        }
    )


@dg.asset(
    partitions_def=SCENARIOS,
    group_name=GROUP,
    kinds={"parquet"},
    metadata=table_definition("synthetic_rows"),
    pool=LLM_POOL,
    description="Expands the scenario's seed examples into synthetic rows (synthetic-data generation).",
)
def synthetic_rows(
    context: dg.AssetExecutionContext, paths: EvalPaths, assessment_platform: AssessmentPlatform
) -> dg.MaterializeResult:
    scenario = paths.catalog().get(context.partition_key)
    rows = synthetic_rows_step(assessment_platform.target(), Warehouse(paths.warehouse), scenario)
    return dg.MaterializeResult(metadata={"scenario_id": scenario.scenario_id, **table_rows("synthetic_rows", rows)})


ASSESSMENT_ASSETS = [assessment_dataset, judgements, synthetic_rows]
