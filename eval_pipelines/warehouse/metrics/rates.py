"""Pass rates: the additive per-task sums (`task_totals`, computed when the catalog is built) and the plain pass
rates read from them (per task, per scenario x model over all sweeps, per sweep x task). The SQL fragments here
(`rate_select`, `cost_select`, ...) are reused by the interval views."""

from __future__ import annotations

from eval_pipelines.warehouse.views import MetricView

ERROR_COLUMNS: tuple[tuple[str, str], ...] = (
    ("n_errors", "Rollouts that ended in an error (not the agent's fault); never in n or the pass rate."),
    ("error_share", "n_errors / (n + n_errors): the share of finished rollouts that say nothing about the model."),
)
AGGREGATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("n", "Scored rollouts (passed or failed; errors are left out)."),
    ("n_unscored", "Rollouts without a score yet (not verified, or still running)."),
    ("passes", "Scored rollouts with reward 1.0."),
    ("pass_rate", "passes / n (NULL when n = 0, e.g. when every rollout errored)."),
    *ERROR_COLUMNS,
)

TASK_KEYS = ("sweep_id", "scenario_id", "model_name", "task_id")

TASK_TOTALS = MetricView(
    name="task_totals",
    doc="Additive sums per sweep x scenario x model x task, from `rollout_scores`. A table, computed when the "
    "catalog is built; every aggregate view rolls these sums up, and so can you (sum them over any grouping).",
    sql="""
select
    sweep_id,
    scenario_id,
    model_name,
    task_id,
    bool_or(is_simulated) as is_simulated,
    count(*) as n_rollouts,
    count(reward) as n,
    count(*) filter (where outcome = 'error') as n_errors,
    count(*) filter (where reward = 1.0) as passes,
    coalesce(sum(reward), 0)::double as reward_sum,
    coalesce(sum(reward * reward), 0)::double as reward_sq_sum,
    coalesce(sum(partial_credit), 0)::double as partial_credit_sum,
    count(total_tokens) as n_with_tokens,
    coalesce(sum(total_tokens), 0)::double as tokens_sum,
    count(cost_usd) as n_with_cost,
    coalesce(sum(cost_usd), 0)::double as cost_usd_sum,
    count(duration_seconds) as n_with_duration,
    coalesce(sum(duration_seconds), 0)::double as duration_seconds_sum
from rollout_scores
group by sweep_id, scenario_id, model_name, task_id
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        ("task_id", "Task id."),
        ("is_simulated", "True if any rollout in the group came from a simulated model."),
        ("n_rollouts", "All rollouts, scored or not."),
        ("n", "Scored rollouts (reward not NULL)."),
        ("n_errors", "Rollouts that ended in an error (reward NULL, outside n)."),
        ("passes", "Scored rollouts with reward 1.0."),
        ("reward_sum", "Sum of the reward over scored rollouts."),
        ("reward_sq_sum", "Sum of the squared reward over scored rollouts (for variances)."),
        ("partial_credit_sum", "Sum of the partial credit over scored rollouts."),
        ("n_with_tokens", "Rollouts that report total_tokens."),
        ("tokens_sum", "Sum of total_tokens over them."),
        ("n_with_cost", "Rollouts that report cost_usd."),
        ("cost_usd_sum", "Sum of cost_usd over them."),
        ("n_with_duration", "Rollouts that report duration_seconds."),
        ("duration_seconds_sum", "Sum of duration_seconds over them."),
    ),
    key=TASK_KEYS,
    materialized=True,
)

#: Columns shared by the task, scenario x model and model levels, from the same sums.
RATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("n", "Scored rollouts (passed or failed; errors are left out)."),
    ("n_unscored", "Rollouts without a score yet (not verified, or still running)."),
    *ERROR_COLUMNS,
    ("passes", "Scored rollouts with reward 1.0."),
    ("pass_rate", "passes / n over the scored rollouts (NULL when n = 0)."),
    ("variance", "Population variance of the per-rollout reward (p(1 - p) for 0/1 rewards)."),
    ("std", "Square root of `variance`."),
    ("mean_reward", "Mean reward over scored rollouts; equals pass_rate while rewards are 0/1."),
    ("mean_partial_credit", "Mean partial credit (share of verifiers passed) over scored rollouts."),
)
COST_COLUMNS: tuple[tuple[str, str], ...] = (
    ("tokens_per_rollout", "Mean total_tokens over the rollouts that report it."),
    ("cost_per_rollout_usd", "Mean cost_usd over the rollouts that report it."),
    ("seconds_per_rollout", "Mean duration_seconds (latency) over the rollouts that report it."),
    ("total_cost_usd", "Sum of cost_usd over the rollouts that report it (NULL, unknown, when none does)."),
)


def variance_sql(source: str) -> str:
    """Population variance from sums; clamped at 0 against rounding, NULL without scored rollouts (DuckDB's
    greatest() skips NULLs, so the guard must be explicit)."""
    return (
        f"case when {source}n > 0 then greatest({source}reward_sq_sum / {source}n "
        f"- ({source}reward_sum / {source}n)^2, 0) end"
    )


def error_share_sql(source: str) -> str:
    return f"{source}n_errors / nullif({source}n + {source}n_errors, 0)"


def rate_select(source: str) -> str:
    """Ratios from summed columns of `source` (a task_totals row or a sum over such rows)."""
    return f"""
    {source}n as n,
    {source}n_rollouts - {source}n - {source}n_errors as n_unscored,
    {source}n_errors as n_errors,
    {error_share_sql(source)} as error_share,
    {source}passes as passes,
    {source}passes / nullif({source}n, 0) as pass_rate,
    {variance_sql(source)} as variance,
    sqrt(variance) as std,
    {source}reward_sum / nullif({source}n, 0) as mean_reward,
    {source}partial_credit_sum / nullif({source}n, 0) as mean_partial_credit"""


def cost_select(source: str) -> str:
    return f"""
    {source}tokens_sum / nullif({source}n_with_tokens, 0) as tokens_per_rollout,
    {source}cost_usd_sum / nullif({source}n_with_cost, 0) as cost_per_rollout_usd,
    {source}duration_seconds_sum / nullif({source}n_with_duration, 0) as seconds_per_rollout,
    case when {source}n_with_cost > 0 then {source}cost_usd_sum end as total_cost_usd"""


TASK_PASS_RATES = MetricView(
    name="task_pass_rates",
    doc="Pass rate per scenario_id x model_name x task_id over scored rollouts, over all sweeps together (see "
    "`task_metrics` for the per-sweep view with more columns).",
    sql="""
select
    scenario_id,
    model_name,
    task_id,
    sum(n)::bigint as n,
    (sum(n_rollouts) - sum(n) - sum(n_errors))::bigint as n_unscored,
    sum(passes)::bigint as passes,
    sum(reward_sum) / nullif(sum(n), 0) as pass_rate,
    sum(n_errors)::bigint as n_errors,
    sum(n_errors) / nullif(sum(n) + sum(n_errors), 0) as error_share,
    bool_or(is_simulated) as is_simulated
from task_totals
group by scenario_id, model_name, task_id
""",
    columns=(
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        ("task_id", "Task id."),
        *AGGREGATE_COLUMNS,
        ("is_simulated", "True if any rollout in the group came from a simulated model."),
    ),
    key=("scenario_id", "model_name", "task_id"),
)

PASS_RATES = MetricView(
    name="pass_rates",
    doc="Pass rate per scenario_id x model_name over scored rollouts, over all sweeps together, with the "
    "population variance and standard deviation of the per-rollout reward. `scenario_model_metrics` has the "
    "per-sweep numbers with clustered standard errors and confidence intervals.",
    sql=f"""
select
    scenario_id,
    model_name,
    n,
    n_unscored,
    passes,
    reward_sum / nullif(n, 0) as pass_rate,
    n_errors,
    {error_share_sql("")} as error_share,
    {variance_sql("")} as variance,
    sqrt(variance) as std,
    partial_credit_sum / nullif(n, 0) as mean_partial_credit,
    is_simulated
from (
    select
        scenario_id,
        model_name,
        sum(n)::bigint as n,
        (sum(n_rollouts) - sum(n) - sum(n_errors))::bigint as n_unscored,
        sum(passes)::bigint as passes,
        sum(n_errors)::bigint as n_errors,
        sum(reward_sum) as reward_sum,
        sum(reward_sq_sum) as reward_sq_sum,
        sum(partial_credit_sum) as partial_credit_sum,
        bool_or(is_simulated) as is_simulated
    from task_totals
    group by scenario_id, model_name
)
""",
    columns=(
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        *AGGREGATE_COLUMNS,
        ("variance", "Population variance of the per-rollout reward."),
        ("std", "Population standard deviation of the per-rollout reward."),
        ("mean_partial_credit", "Mean partial credit over scored rollouts."),
        ("is_simulated", "True if any rollout in the group came from a simulated model."),
    ),
    key=("scenario_id", "model_name"),
)

TASK_METRICS = MetricView(
    name="task_metrics",
    doc="Per sweep x scenario x model x task: n, pass rate, variance and std of the reward over the task's "
    "repeated rollouts, mean reward, and tokens, cost and latency per rollout.",
    sql=f"""
select
    sweep_id,
    scenario_id,
    model_name,
    task_id,
    is_simulated,{rate_select("")},{cost_select("")}
from task_totals
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        ("task_id", "Task id."),
        ("is_simulated", "True if any rollout in the group came from a simulated model."),
        *RATE_COLUMNS,
        *COST_COLUMNS,
    ),
    key=TASK_KEYS,
)

SUM_COLUMNS = (
    "n_rollouts",
    "n",
    "n_errors",
    "passes",
    "reward_sum",
    "reward_sq_sum",
    "partial_credit_sum",
    "n_with_tokens",
    "tokens_sum",
    "n_with_cost",
    "cost_usd_sum",
    "n_with_duration",
    "duration_seconds_sum",
)
