"""pass@k and pass^k: the unbiased per-task estimators and their task averages."""

from __future__ import annotations

from eval_pipelines.warehouse.metrics.rates import TASK_KEYS
from eval_pipelines.warehouse.views import MetricView


def choose_ratio_sql(m: str) -> str:
    """C(m, k) / C(n, k) for m <= n, k <= m, through lgamma. Terms are paired so that m = n gives exp(0) = 1."""
    return f"exp((lgamma(({m}) + 1.0) - lgamma(n + 1.0)) + (lgamma(n - k + 1.0) - lgamma(({m}) - k + 1.0)))"


TASK_PASS_AT_K_CTES = f"""
scored_tasks as materialized (
    select * from task_totals where n > 0
),
attempts as (
    select unnest(range(1, max(n) + 1)) as k from scored_tasks
),
per_task as (
    select
        t.sweep_id,
        t.scenario_id,
        t.model_name,
        t.task_id,
        t.is_simulated,
        t.n,
        t.passes,
        a.k,
        case when n - passes < k then 1.0 else 1.0 - {choose_ratio_sql("n - passes")} end as pass_at_k,
        case when passes < k then 0.0 else {choose_ratio_sql("passes")} end as pass_hat_k
    from scored_tasks as t
    join attempts as a on a.k <= t.n
)"""

TASK_PASS_AT_K = MetricView(
    name="task_pass_at_k",
    doc="Per sweep x scenario x model x task and k = 1..n (n = the task's scored rollouts): the unbiased "
    "estimators pass@k = 1 - C(n - c, k) / C(n, k) (at least one of k rollouts drawn without replacement "
    "passes) and pass^k = C(c, k) / C(n, k) (all k pass; tau-bench), c = passes. Binomial ratios are "
    "computed as exp of lgamma differences: at n = 1000 both are within 1e-11 absolute and pass^k within 1e-10 "
    "relative of the exact value; all-pass and all-fail tasks come out exactly 1 and 0.",
    sql=f"""
with {TASK_PASS_AT_K_CTES.strip()}
select * from per_task
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        ("task_id", "Task id."),
        ("is_simulated", "True if any rollout in the group came from a simulated model."),
        ("n", "Scored rollouts of the task."),
        ("passes", "Of them passed (c)."),
        ("k", "Number of attempts, 1..n."),
        ("pass_at_k", "Unbiased pass@k = 1 - C(n - c, k) / C(n, k)."),
        ("pass_hat_k", "Unbiased pass^k = C(c, k) / C(n, k)."),
    ),
    key=(*TASK_KEYS, "k"),
)


def _pass_at_k_sql(group: tuple[str, ...]) -> str:
    """Task-level estimates averaged per group. Computed from task_totals in one pass rather than by reading
    `task_pass_at_k`, which would evaluate the rollout scores a second time for the task counts. Every group
    has a row, so one whose rollouts all errored shows its errors (with k and the estimates NULL)."""
    keys = ", ".join(group)
    return f"""
with {TASK_PASS_AT_K_CTES.strip()},
group_tasks as (
    select
        {keys},
        bool_or(is_simulated) as is_simulated,
        count(*) filter (where n > 0) as n_scored_tasks,
        sum(n)::bigint as n_scored,
        sum(n_errors)::bigint as n_errors
    from task_totals
    group by {keys}
),
per_k as (
    select {keys}, k, count(*) as n_tasks, avg(pass_at_k) as pass_at_k, avg(pass_hat_k) as pass_hat_k
    from per_task
    group by {keys}, k
)
select
    {", ".join(f"g.{k}" for k in group)},
    g.is_simulated,
    p.k,
    coalesce(p.n_tasks, 0) as n_tasks,
    g.n_scored_tasks - coalesce(p.n_tasks, 0) as n_tasks_excluded,
    p.pass_at_k,
    p.pass_hat_k,
    g.n_errors,
    g.n_errors / nullif(g.n_scored + g.n_errors, 0) as error_share
from group_tasks as g
left join per_k as p using ({keys})
"""


_PASS_AT_K_COLUMNS: tuple[tuple[str, str], ...] = (
    ("is_simulated", "True if any rollout in the group came from a simulated model."),
    (
        "k",
        "Number of attempts, from 1 to the largest n of any task in the group; NULL (one row) when no task has a "
        "scored rollout, e.g. when every rollout errored.",
    ),
    ("n_tasks", "Tasks averaged at this k: those with at least k scored rollouts."),
    (
        "n_tasks_excluded",
        "Scored tasks left out at this k because they have fewer than k scored rollouts (no unbiased "
        "estimate); when it is not 0, the average covers a subset of the tasks.",
    ),
    ("pass_at_k", "Mean over those tasks of the task's unbiased pass@k."),
    ("pass_hat_k", "Mean over those tasks of the task's unbiased pass^k."),
    ("n_errors", "Rollouts of the group that ended in an error; they are not among the n of any task."),
    ("error_share", "n_errors / (scored rollouts + n_errors) over the group."),
)

PASS_AT_K = MetricView(
    name="pass_at_k",
    doc="Per sweep x scenario x model and k: pass@k and pass^k computed per task (`task_pass_at_k`), then "
    "averaged over the tasks, each task weighted equally. A task with n < k is excluded from that k.",
    sql=_pass_at_k_sql(("sweep_id", "scenario_id", "model_name")),
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        *_PASS_AT_K_COLUMNS,
    ),
    key=("sweep_id", "scenario_id", "model_name", "k"),
)

MODEL_PASS_AT_K = MetricView(
    name="model_pass_at_k",
    doc="As `pass_at_k`, per sweep x model, averaged over every task of every scenario the model ran.",
    sql=_pass_at_k_sql(("sweep_id", "model_name")),
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("model_name", "The model's name in the sweep config."),
        *_PASS_AT_K_COLUMNS,
    ),
    key=("sweep_id", "model_name", "k"),
)
