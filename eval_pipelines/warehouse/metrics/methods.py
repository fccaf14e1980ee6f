"""The statistical choices behind the metric views, one Markdown bullet each; docs/warehouse.md renders them."""

from __future__ import annotations

from eval_pipelines.warehouse.metrics.power import ALPHA, DEFAULT_DETECTABLE_DIFFERENCE, POWER, POWER_FACTOR
from eval_pipelines.warehouse.metrics.stats import (
    BOOTSTRAP_REPLICATES,
    EXACT_PERMUTATION_MAX_TASKS,
    PERMUTATION_PATTERNS,
    PERMUTATION_TOLERANCE,
    T_TABLE_MAX_DF,
)

#: The statistical choices behind the views, one Markdown bullet each; docs/warehouse.md renders them.
METHODS: tuple[str, ...] = (
    "`task_totals` is a table, computed when the catalog is built: one scan of the rollouts and verdicts then "
    "serves every aggregate, which keeps them fast at a million rollouts. Every view above it (pass rates, "
    "intervals, pass@k, comparisons) reads that snapshot; the pipeline rebuilds the catalog after each "
    "verification. `rollout_scores`, `verifications_latest` and the table views read the Parquet files live, "
    "so during a sweep they may be ahead of the aggregates.",
    "Every view from `task_totals` on is per sweep (`sweep_id` is the first key): two sweeps are two "
    "experiments and are never pooled. `pass_rates` and `task_pass_rates` pool all sweeps.",
    "Only scored rollouts count (reward not NULL); unscored ones are reported in `n_unscored`.",
    "The unit of independence is the task. Repeated rollouts of one task share the instruction and the seed "
    "data, so they are correlated: standard errors, intervals and tests treat tasks as clusters, never rollouts.",
    "Clustered standard error (CR1 sandwich for a mean): `sqrt(G / (G - 1) * sum_t (passes_t - n_t * p)^2) / N` "
    "with G tasks, N scored rollouts and p the pooled pass rate. With equal rollouts per task it equals the "
    "standard error of the mean of the task pass rates. The t-interval is `p +- t(0.975, G - 1) * SE`, not "
    f"clipped to [0, 1]; t quantiles come from an exact table up to {T_TABLE_MAX_DF} degrees of freedom, then a "
    "Cornish-Fisher expansion (error below 3e-8).",
    "Bootstrap: percentile interval (2.5%, 97.5%; linear interpolation) of "
    f"{BOOTSTRAP_REPLICATES} replicates that resample tasks with replacement; each replicate's statistic is the "
    "pooled pass rate of the resampled tasks (or, in `model_comparison`, the mean task difference). The draws "
    "come from a counter-based "
    "32-bit hash (lowbias32 of the replicate number, then of the draw position; `metrics.hashed_draw`), not from "
    "`random()`: the same data gives the same interval on any machine, thread count or query plan.",
    "pass@k = 1 - C(n - c, k) / C(n, k) and pass^k = C(c, k) / C(n, k) are the unbiased estimators from a task's "
    "n scored rollouts with c passes, computed per task and then averaged over tasks with equal weight. A task "
    "with n < k has no unbiased estimate at that k and is excluded from that k's average "
    "(`n_tasks_excluded` says how many), so a curve's tail may cover fewer tasks than its head.",
    "`model_comparison`: paired by task (tasks both models have scored); the statistic is the mean over tasks "
    "of the difference in task pass rate. CI: paired bootstrap (the same tasks resampled for both models). "
    "p-value: two-sided sign-flip permutation test over tasks, exact (all 2^G sign patterns) when G <= "
    f"{EXACT_PERMUTATION_MAX_TASKS}, otherwise {PERMUTATION_PATTERNS} hashed patterns with p = (1 + hits) / "
    f"{PERMUTATION_PATTERNS + 1}; |T*| >= |T| is judged with a {PERMUTATION_TOLERANCE:g} tolerance. No correction "
    "for multiple comparisons.",
    "`model_comparison` also pairs by task and epoch (`task_epochs`: same task_id and rollout_index, both "
    "scored): `mcnemar_p_value` is McNemar's exact test on the discordant epochs (two-sided, twice the smaller "
    "binomial tail, at most 1). It treats epochs as independent; when a few tasks carry the difference, trust "
    "the task-level `p_value`.",
    f"Power (`metrics/power.py`): a difference averaged over G tasks and k epochs per task has variance "
    "(sigma2_between + sigma2_within / k) / G. The minimum detectable difference is the true difference a "
    f"two-sided test at alpha {ALPHA} detects with power {POWER:.0%}: `mdd` = (z(0.975) + z(0.80)) * SE = "
    f"{POWER_FACTOR:.4f} * SE (normal approximation). `epochs_needed` is the smallest k whose mdd is at most "
    f"{DEFAULT_DETECTABLE_DIFFERENCE} with the same tasks, NULL when sigma2_between alone is too large (more "
    "tasks, not epochs). `noise_floor` applies the same formula with sigma2_between = 0 and the model's own "
    "epoch-to-epoch variance on both sides: the smallest difference its noise alone allows.",
)
