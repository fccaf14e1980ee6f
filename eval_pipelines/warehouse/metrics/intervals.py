"""Pass rates with task-clustered standard errors, t-intervals and task bootstraps, per sweep x scenario x model
(`scenario_model_metrics`) and per sweep x model (`model_metrics`)."""

from __future__ import annotations

from eval_pipelines.warehouse.metrics.rates import (
    COST_COLUMNS,
    RATE_COLUMNS,
    SUM_COLUMNS,
    cost_select,
    rate_select,
)
from eval_pipelines.warehouse.metrics.stats import BOOTSTRAP_REPLICATES, BOOTSTRAP_SEED, mix32_sql, t975_sql
from eval_pipelines.warehouse.views import MetricView


def _group_metrics_sql(group: tuple[str, ...], extra: tuple[tuple[str, str], ...] = ()) -> str:
    """Pass rate with task-clustered SE, t-interval and task bootstrap, one row per `group`.

    Clusters are the task_totals rows with n > 0: one per task, so one per (scenario, task) above the scenario
    level. The bootstrap statistic is the pooled pass rate sum(passes) / sum(n) of the resampled clusters.
    """
    keys = ", ".join(group)
    partition = f"partition by {keys}"
    sums = ",\n        ".join(f"sum({c})::{'double' if c.endswith('_sum') else 'bigint'} as {c}" for c in SUM_COLUMNS)
    extra_aggregates = "".join(f"\n        {expression} as {alias}," for alias, expression in extra)
    extra_output = "".join(f"\n    g.{alias}," for alias, _ in extra)
    t975 = t975_sql("t_df")
    return f"""
with totals as materialized (
    select * from task_totals
),
groups as (
    select
        {keys},
        bool_or(is_simulated) as is_simulated,{extra_aggregates}
        count(*) filter (where n > 0) as n_tasks,
        {sums}
    from totals
    group by {keys}
),
clusters as materialized (
    select
        {keys},
        passes,
        n,
        sum(passes) over ({partition}) / sum(n) over ({partition}) as group_rate,
        dense_rank() over (order by {keys}) as group_index,
        row_number() over ({partition} order by scenario_id, task_id) - 1 as cluster_index,
        count(*) over ({partition}) as n_clusters
    from totals
    where n > 0
),
clustered as (
    select {keys}, any_value(group_index) as group_index, sum((passes - n * group_rate)^2) as squared_deviations
    from clusters
    group by {keys}
),
replicates as (
    select range as replicate, {mix32_sql(f"xor(range, {BOOTSTRAP_SEED})", "replicate_key")}
    from range({BOOTSTRAP_REPLICATES})
),
positions as (
    select group_index, n_clusters, unnest(range(n_clusters)) as position
    from (select distinct group_index, n_clusters from clusters)
),
draws as (
    select group_index, replicate, h % n_clusters as cluster_index
    from (
        select p.group_index, p.n_clusters, r.replicate, {mix32_sql("xor(r.replicate_key, p.position::ubigint)", "h")}
        from positions as p
        cross join replicates as r
    )
),
bootstrap as (
    select
        group_index,
        quantile_cont(rate, 0.025) as ci_boot_low,
        quantile_cont(rate, 0.975) as ci_boot_high
    from (
        select d.group_index, d.replicate, sum(c.passes) / sum(c.n) as rate
        from draws as d
        join clusters as c on c.group_index = d.group_index and c.cluster_index = d.cluster_index
        group by d.group_index, d.replicate
    )
    group by group_index
)
select
    {", ".join(f"g.{k}" for k in group)},
    g.is_simulated,{extra_output}
    g.n_tasks,{rate_select("g.")},
    case when g.n_tasks >= 2 then sqrt(g.n_tasks / (g.n_tasks - 1) * c.squared_deviations) / g.n end
        as clustered_se,
    case when g.n_tasks >= 2 then g.n_tasks - 1 end as t_df,
    pass_rate - {t975} * clustered_se as ci_t_low,
    pass_rate + {t975} * clustered_se as ci_t_high,
    b.ci_boot_low,
    b.ci_boot_high,{cost_select("g.")}
from groups as g
left join clustered as c using ({keys})
left join bootstrap as b on b.group_index = c.group_index
"""


_GROUP_METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("n_tasks", "Tasks with at least one scored rollout: the clusters."),
    *RATE_COLUMNS,
    (
        "clustered_se",
        "Task-clustered standard error of pass_rate, CR1 sandwich: sqrt(G / (G - 1) * sum over tasks of "
        "(passes_t - n_t * pass_rate)^2) / n, G = n_tasks. Equals the standard error of the mean of the task "
        "pass rates when every task has the same n. NULL when n_tasks < 2.",
    ),
    ("t_df", "Degrees of freedom of the t-interval: n_tasks - 1 (NULL when n_tasks < 2)."),
    (
        "ci_t_low",
        "Lower end of the 95% t-interval pass_rate - t(0.975, t_df) * clustered_se; not clipped to [0, 1].",
    ),
    ("ci_t_high", "Upper end of the 95% t-interval; not clipped to [0, 1]."),
    (
        "ci_boot_low",
        f"2.5% percentile of the pooled pass rate over {BOOTSTRAP_REPLICATES} bootstrap replicates that resample "
        "tasks with replacement (deterministic hashed draws, see warehouse/metrics/stats.py).",
    ),
    ("ci_boot_high", "97.5% percentile of the same bootstrap replicates."),
    *COST_COLUMNS,
)

SCENARIO_MODEL_METRICS = MetricView(
    name="scenario_model_metrics",
    doc="Per sweep x scenario x model: pass rate over scored rollouts with its task-clustered standard error, "
    "a 95% t-interval and a 95% task-bootstrap interval, the reward's variance, mean reward, and tokens, cost "
    "and latency per rollout.",
    sql=_group_metrics_sql(("sweep_id", "scenario_id", "model_name")),
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        ("is_simulated", "True if any rollout in the group came from a simulated model."),
        *_GROUP_METRIC_COLUMNS,
    ),
    key=("sweep_id", "scenario_id", "model_name"),
)

MODEL_METRICS = MetricView(
    name="model_metrics",
    doc="Per sweep x model, over all its scenarios: as `scenario_model_metrics`, with each (scenario, task) as "
    "a cluster (the bootstrap resamples them without stratifying by scenario).",
    sql=_group_metrics_sql(("sweep_id", "model_name"), extra=(("n_scenarios", "count(distinct scenario_id)"),)),
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("model_name", "The model's name in the sweep config."),
        ("is_simulated", "True if any rollout in the group came from a simulated model."),
        ("n_scenarios", "Scenarios the model ran in this sweep."),
        *_GROUP_METRIC_COLUMNS,
    ),
    key=("sweep_id", "model_name"),
)
