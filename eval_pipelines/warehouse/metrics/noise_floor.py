"""The noise floor: how much one model's verdicts move between identical epochs, per sweep x scenario x model,
and what that means for the differences a sweep can see."""

from __future__ import annotations

from eval_pipelines.warehouse.metrics.power import (
    ALPHA,
    DEFAULT_DETECTABLE_DIFFERENCE,
    POWER,
    POWER_FACTOR,
    epochs_needed_sql,
)
from eval_pipelines.warehouse.views import MetricView

_KEYS = ("sweep_id", "scenario_id", "model_name")

NOISE_FLOOR = MetricView(
    name="noise_floor",
    doc="Per sweep x scenario x model: how often a task's verdict flips between two epochs (identical runs), "
    "pass@k beside pass^k at the sweep's epochs, and the smallest difference from an equally noisy model that "
    f"this noise alone lets a paired comparison detect (power {POWER:.0%}, two-sided alpha {ALPHA}), with the "
    f"epochs per task that {DEFAULT_DETECTABLE_DIFFERENCE * 100:g} points need. A floor: the epoch-to-epoch "
    "noise is all it counts; the task-to-task variation of a real difference (`model_comparison.sigma2_between`) "
    "only adds.",
    sql=f"""
with tasks as (
    select
        {", ".join(_KEYS)},
        is_simulated,
        n,
        passes,
        -- Probability that two distinct epochs of the task disagree, unbiased: 2 c (n - c) / (n (n - 1)).
        case when n >= 2 then 2.0 * passes * (n - passes) / (n * (n - 1.0)) end as flip_probability
    from task_totals
    where n > 0
),
groups as (
    select
        {", ".join(_KEYS)},
        bool_or(is_simulated) as is_simulated,
        count(*) as n_tasks,
        min(n) as epochs,
        avg(n) as mean_epochs,
        count(*) filter (where n >= 2) as n_repeated_tasks,
        count(*) filter (where n >= 2 and passes > 0 and passes < n) as n_unstable_tasks,
        avg(flip_probability) as flip_rate
    from tasks
    group by {", ".join(_KEYS)}
),
sized as (
    select
        *,
        n_unstable_tasks / nullif(n_repeated_tasks, 0) as unstable_share,
        flip_rate / 2 as sigma2_within
    from groups
)
select
    s.sweep_id,
    s.scenario_id,
    s.model_name,
    s.is_simulated,
    s.n_tasks,
    s.epochs,
    s.mean_epochs,
    s.n_repeated_tasks,
    s.n_unstable_tasks,
    s.unstable_share,
    s.flip_rate,
    one.pass_at_k as pass_at_1,
    at_k.pass_at_k,
    at_k.pass_hat_k,
    s.sigma2_within,
    {POWER_FACTOR!r} * sqrt(2 * s.sigma2_within / s.n_tasks) as mdd_one_epoch,
    {POWER_FACTOR!r} * sqrt(2 * s.sigma2_within / (s.n_tasks * s.mean_epochs)) as mdd,
    {epochs_needed_sql("0", "2 * s.sigma2_within", "s.n_tasks", DEFAULT_DETECTABLE_DIFFERENCE)} as epochs_needed
from sized as s
left join pass_at_k as one
    on one.sweep_id = s.sweep_id and one.scenario_id = s.scenario_id and one.model_name = s.model_name and one.k = 1
left join pass_at_k as at_k
    on at_k.sweep_id = s.sweep_id and at_k.scenario_id = s.scenario_id and at_k.model_name = s.model_name
    and at_k.k = s.epochs
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        ("is_simulated", "True if any rollout in the group came from a simulated model."),
        ("n_tasks", "Tasks with at least one scored rollout."),
        ("epochs", "The fewest scored rollouts of any of those tasks: the k of pass_at_k and pass_hat_k."),
        ("mean_epochs", "Mean scored rollouts per task."),
        ("n_repeated_tasks", "Tasks with 2+ scored rollouts: the ones a flip can be seen on."),
        ("n_unstable_tasks", "Of them, tasks with both a pass and a fail."),
        ("unstable_share", "n_unstable_tasks / n_repeated_tasks (NULL without repeated tasks)."),
        (
            "flip_rate",
            "Mean over the repeated tasks of 2 c (n - c) / (n (n - 1)), c of n scored rollouts passed: the chance "
            "that two identical epochs of a task disagree (unbiased), i.e. the share of task verdicts that flip "
            "between two identical runs.",
        ),
        ("pass_at_1", "Mean task pass rate (each task weighted equally; `pass_at_k` at k = 1)."),
        ("pass_at_k", "pass@k at k = epochs: the chance that at least one of k epochs passes (`pass_at_k`)."),
        ("pass_hat_k", "pass^k at k = epochs: the chance that all k epochs pass (`pass_at_k`)."),
        ("sigma2_within", "Epoch-to-epoch variance of a verdict, mean over repeated tasks: flip_rate / 2."),
        (
            "mdd_one_epoch",
            f"{POWER_FACTOR:.4f} * sqrt(2 * sigma2_within / n_tasks): the difference two single runs (one epoch "
            "each) must show before this noise alone stops explaining it.",
        ),
        ("mdd", "As mdd_one_epoch with mean_epochs epochs per task: the floor of this sweep's comparisons."),
        (
            "epochs_needed",
            f"Epochs per task for a floor of {DEFAULT_DETECTABLE_DIFFERENCE:.2f}: ceil(2 * sigma2_within / "
            f"(n_tasks * ({DEFAULT_DETECTABLE_DIFFERENCE} / {POWER_FACTOR:.4f})^2)), at least 1; NULL without "
            "repeated tasks.",
        ),
    ),
    key=_KEYS,
)
