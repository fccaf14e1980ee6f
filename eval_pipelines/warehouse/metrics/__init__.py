"""The catalog's metric views, one module per metric family, registered here in dependency order. Add a metric by
defining a `MetricView` in its family's module (or a new one) and listing it in `METRIC_VIEWS`: the catalog
creates it and the data dictionary documents it.

Families: `stats` (hashed draws, t quantiles), `scores` (latest verdicts, the scoring rule), `rates` (task sums,
plain pass rates), `intervals` (clustered SEs, t and bootstrap intervals), `pass_at_k`, `comparison` (paired
model comparisons), `judges` (judge scores and agreement), `verifier_versions`; `methods` holds the statistical
notes that docs/warehouse.md renders.

Scoring rules, in one place (`scores`):
- Only the latest run of each verifier on a rollout counts (`verifications_latest`), so re-verifying with a
  changed verifier supersedes the old verdicts without deleting them.
- A rollout passes (reward 1.0) iff every latest verifier passed.
- A rollout that ended failed or workspace_error scores 0: the agent did not finish.
- A rollout still pending/running, or completed but not yet verified, has reward NULL; aggregates ignore it
  and report it in `n_unscored`.
"""

from __future__ import annotations

from eval_pipelines.warehouse.benchmark_metrics import BENCHMARK_VIEWS
from eval_pipelines.warehouse.judge_calibration import JUDGE_CALIBRATION_VIEWS
from eval_pipelines.warehouse.metrics.comparison import MODEL_COMPARISON, TASK_EPOCHS
from eval_pipelines.warehouse.metrics.intervals import MODEL_METRICS, SCENARIO_MODEL_METRICS
from eval_pipelines.warehouse.metrics.judges import (
    AGREEMENT_SELECT,
    JUDGE_SCORES_BY_MODEL,
    JUDGE_VERIFIER_AGREEMENT,
    JUDGEMENTS_LATEST,
    QUALITY_PASS_SCORE,
    RUBRIC_VERIFIER_AGREEMENT,
    SAFETY_FLAG_SCORE,
)
from eval_pipelines.warehouse.metrics.methods import METHODS
from eval_pipelines.warehouse.metrics.noise_floor import NOISE_FLOOR
from eval_pipelines.warehouse.metrics.pass_at_k import MODEL_PASS_AT_K, PASS_AT_K, TASK_PASS_AT_K
from eval_pipelines.warehouse.metrics.rates import PASS_RATES, TASK_METRICS, TASK_PASS_RATES, TASK_TOTALS
from eval_pipelines.warehouse.metrics.scores import ROLLOUT_SCORES, VERIFICATIONS_LATEST
from eval_pipelines.warehouse.metrics.stats import (
    BOOTSTRAP_REPLICATES,
    BOOTSTRAP_SEED,
    COMPARISON_BOOTSTRAP_SEED,
    EXACT_PERMUTATION_MAX_TASKS,
    PERMUTATION_PATTERNS,
    PERMUTATION_SEED,
    PERMUTATION_TOLERANCE,
    T_TABLE_MAX_DF,
    hashed_draw,
    mix32,
    student_t_975,
    t975_sql,
)
from eval_pipelines.warehouse.metrics.verifier_versions import VERIFIER_VERSION_PASS_RATES
from eval_pipelines.warehouse.simulator_fidelity import SIMULATOR_FIDELITY_VIEWS
from eval_pipelines.warehouse.views import MetricView

#: In dependency order: each view may read the base tables and the views before it.
METRIC_VIEWS: tuple[MetricView, ...] = (
    VERIFICATIONS_LATEST,
    ROLLOUT_SCORES,
    TASK_TOTALS,
    TASK_EPOCHS,
    TASK_PASS_RATES,
    PASS_RATES,
    TASK_METRICS,
    SCENARIO_MODEL_METRICS,
    MODEL_METRICS,
    TASK_PASS_AT_K,
    PASS_AT_K,
    MODEL_PASS_AT_K,
    NOISE_FLOOR,
    MODEL_COMPARISON,
    JUDGEMENTS_LATEST,
    JUDGE_SCORES_BY_MODEL,
    JUDGE_VERIFIER_AGREEMENT,
    RUBRIC_VERIFIER_AGREEMENT,
    *JUDGE_CALIBRATION_VIEWS,
    VERIFIER_VERSION_PASS_RATES,
    *SIMULATOR_FIDELITY_VIEWS,
    # Last: the benchmarks' own metrics read `rollout_scores` and the tables.
    *BENCHMARK_VIEWS,
)


def metric_view_statements() -> list[str]:
    """Every metric view's `create` statement, in dependency order: the single registration point."""
    return [view.statement() for view in METRIC_VIEWS]


__all__ = [
    "AGREEMENT_SELECT",
    "BOOTSTRAP_REPLICATES",
    "BOOTSTRAP_SEED",
    "COMPARISON_BOOTSTRAP_SEED",
    "EXACT_PERMUTATION_MAX_TASKS",
    "JUDGEMENTS_LATEST",
    "JUDGE_SCORES_BY_MODEL",
    "JUDGE_VERIFIER_AGREEMENT",
    "METHODS",
    "METRIC_VIEWS",
    "MODEL_COMPARISON",
    "MODEL_METRICS",
    "MODEL_PASS_AT_K",
    "NOISE_FLOOR",
    "PASS_AT_K",
    "PASS_RATES",
    "PERMUTATION_PATTERNS",
    "PERMUTATION_SEED",
    "PERMUTATION_TOLERANCE",
    "QUALITY_PASS_SCORE",
    "ROLLOUT_SCORES",
    "RUBRIC_VERIFIER_AGREEMENT",
    "SAFETY_FLAG_SCORE",
    "SCENARIO_MODEL_METRICS",
    "TASK_EPOCHS",
    "TASK_METRICS",
    "TASK_PASS_AT_K",
    "TASK_PASS_RATES",
    "TASK_TOTALS",
    "T_TABLE_MAX_DF",
    "VERIFICATIONS_LATEST",
    "VERIFIER_VERSION_PASS_RATES",
    "hashed_draw",
    "metric_view_statements",
    "mix32",
    "student_t_975",
    "t975_sql",
]
