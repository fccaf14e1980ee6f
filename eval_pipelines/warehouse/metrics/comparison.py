"""Model comparisons: every pair of models on one sweep x scenario, paired by task (the difference, its task
bootstrap and sign-flip test) and by task and epoch (McNemar's exact test on the discordant epochs), sized by the
minimum detectable difference and the epochs a chosen difference needs (`power`)."""

from __future__ import annotations

from eval_pipelines.warehouse.metrics.power import (
    ALPHA,
    DEFAULT_DETECTABLE_DIFFERENCE,
    POWER,
    POWER_FACTOR,
    epochs_needed_sql,
)
from eval_pipelines.warehouse.metrics.stats import (
    BOOTSTRAP_REPLICATES,
    COMPARISON_BOOTSTRAP_SEED,
    EXACT_PERMUTATION_MAX_TASKS,
    PERMUTATION_PATTERNS,
    PERMUTATION_SEED,
    PERMUTATION_TOLERANCE,
    mix32_sql,
)
from eval_pipelines.warehouse.views import MetricView

_PAIR = "sweep_id, scenario_id, model_a, model_b"

TASK_EPOCHS = MetricView(
    name="task_epochs",
    doc="One row per sweep x scenario x model x task x epoch (`rollout_index`) with a score: the unit that pairs "
    "two models' rollouts in `model_comparison`. A table, computed when the catalog is built. An epoch scored "
    "twice (a re-run) keeps the reward of its greatest rollout_id.",
    sql="""
select sweep_id, scenario_id, model_name, task_id, rollout_index, arg_max(reward, rollout_id) as reward
from rollout_scores
where reward is not null
group by sweep_id, scenario_id, model_name, task_id, rollout_index
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        ("task_id", "Task id."),
        ("rollout_index", "The epoch: index of the rollout among the repeats of its task."),
        ("reward", "1.0 passed, 0.0 failed (errors and unscored rollouts have no row)."),
    ),
    key=("sweep_id", "scenario_id", "model_name", "task_id", "rollout_index"),
    materialized=True,
)

MODEL_COMPARISON = MetricView(
    name="model_comparison",
    doc="Every ordered pair of models on the same sweep x scenario, paired by task (only tasks both models "
    "have scored). diff = mean over those tasks of (pass rate of A - pass rate of B), each task weighted "
    "equally; it equals the difference of pooled pass rates when every task has the same n. 95% CI: paired "
    f"bootstrap percentile interval, {BOOTSTRAP_REPLICATES} replicates resampling tasks. p-value: two-sided "
    f"sign-flip permutation test of mean diff = 0 over tasks; exact (all 2^G patterns) when G <= "
    f"{EXACT_PERMUTATION_MAX_TASKS} tasks, else {PERMUTATION_PATTERNS} hashed patterns with "
    f"p = (1 + hits) / ({PERMUTATION_PATTERNS} + 1). Draws are deterministic (see metrics/stats.py). Both (A, B) and "
    "(B, A) are listed; their diff and CI are mirrored and their p-value is the same. Paired by task and epoch "
    "(`task_epochs`: the same task_id and rollout_index), `mcnemar_p_value` is McNemar's exact test on the "
    f"discordant epochs. `mdd` is the minimum detectable difference (power {POWER:.0%}, two-sided alpha "
    f"{ALPHA}) for this sweep's tasks and epochs, and `epochs_needed` the epochs per task that would detect "
    f"{DEFAULT_DETECTABLE_DIFFERENCE * 100:g} points (see the Power note above).",
    sql=f"""
with rates as materialized (
    select sweep_id, scenario_id, model_name, task_id, is_simulated, passes / n as rate
    from task_totals
    where n > 0
),
paired as materialized (
    select
        a.sweep_id,
        a.scenario_id,
        a.model_name as model_a,
        b.model_name as model_b,
        a.is_simulated as a_is_simulated,
        b.is_simulated as b_is_simulated,
        a.task_id,
        a.rate as rate_a,
        b.rate as rate_b,
        a.rate - b.rate as d,
        dense_rank() over (order by a.sweep_id, a.scenario_id, a.model_name, b.model_name) as pair_index,
        row_number() over (
            partition by a.sweep_id, a.scenario_id, a.model_name, b.model_name order by a.task_id
        ) - 1 as task_index,
        count(*) over (partition by a.sweep_id, a.scenario_id, a.model_name, b.model_name) as n_tasks
    from rates as a
    join rates as b
        on a.sweep_id = b.sweep_id and a.scenario_id = b.scenario_id and a.task_id = b.task_id
        and a.model_name < b.model_name
),
pairs as (
    select
        pair_index,
        {_PAIR},
        bool_or(a_is_simulated) as a_is_simulated,
        bool_or(b_is_simulated) as b_is_simulated,
        count(*) as n_tasks,
        avg(rate_a) as pass_rate_a,
        avg(rate_b) as pass_rate_b,
        avg(d) as diff,
        stddev_samp(d) / sqrt(count(*)) as std_error,
        count(*) filter (where d > 0) as tasks_a_better,
        count(*) filter (where d < 0) as tasks_b_better
    from paired
    group by pair_index, {_PAIR}
),
epoch_tasks as (
    select
        a.sweep_id,
        a.scenario_id,
        a.model_name as model_a,
        b.model_name as model_b,
        a.task_id,
        count(*) as n_pairs,
        count(*) filter (where a.reward > b.reward) as a_only,
        count(*) filter (where a.reward < b.reward) as b_only,
        var_samp(a.reward - b.reward) as within_variance
    from task_epochs as a
    join task_epochs as b
        on a.sweep_id = b.sweep_id and a.scenario_id = b.scenario_id and a.task_id = b.task_id
        and a.rollout_index = b.rollout_index and a.model_name < b.model_name
    group by all
),
epoch_pairs as (
    select
        p.pair_index,
        sum(e.n_pairs)::bigint as n_pairs,
        avg(e.n_pairs) as epochs,
        sum(e.a_only)::bigint as a_only,
        sum(e.b_only)::bigint as b_only,
        avg(e.within_variance) as sigma2_within
    from pairs as p
    join epoch_tasks as e using ({_PAIR})
    group by p.pair_index
),
mcnemar as (
    -- Exact two-sided: 2 * P(X <= min(a_only, b_only)), X ~ Binomial(a_only + b_only, 1/2), at most 1.
    select
        pair_index,
        least(1.0, 2 * sum(exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * ln(2.0)))) as p_value
    from (select pair_index, a_only + b_only as n, unnest(range(least(a_only, b_only) + 1)) as i from epoch_pairs)
    group by pair_index
),
sized as (
    select
        p.pair_index,
        e.n_pairs,
        e.epochs,
        e.a_only,
        e.b_only,
        case when p.n_tasks >= 2 then {POWER_FACTOR!r} * p.std_error end as mdd,
        -- greatest() skips NULLs, so an unknown within-task variance is caught first.
        case when e.sigma2_within is not null then greatest(p.std_error^2 * p.n_tasks - e.sigma2_within / e.epochs, 0)
        end as sigma2_between,
        e.sigma2_within
    from pairs as p
    left join epoch_pairs as e using (pair_index)
),
replicates as (
    select range as replicate, {mix32_sql(f"xor(range, {COMPARISON_BOOTSTRAP_SEED})", "replicate_key")}
    from range({BOOTSTRAP_REPLICATES})
),
draws as (
    select pair_index, replicate, h % n_tasks as task_index
    from (
        select p.pair_index, p.n_tasks, r.replicate, {mix32_sql("xor(r.replicate_key, p.position::ubigint)", "h")}
        from (select pair_index, n_tasks, unnest(range(n_tasks)) as position from pairs) as p
        cross join replicates as r
    )
),
bootstrap as (
    select pair_index, quantile_cont(diff, 0.025) as ci_low, quantile_cont(diff, 0.975) as ci_high
    from (
        select d.pair_index, d.replicate, avg(x.d) as diff
        from draws as d
        join paired as x on x.pair_index = d.pair_index and x.task_index = d.task_index
        group by d.pair_index, d.replicate
    )
    group by pair_index
),
patterns as (
    select
        pair_index,
        n_tasks <= {EXACT_PERMUTATION_MAX_TASKS} as exact,
        unnest(range(case when exact then 2 ** n_tasks else {PERMUTATION_PATTERNS} end::bigint)) as pattern
    from pairs
),
pattern_keys as (
    select pair_index, exact, pattern, {mix32_sql(f"xor(pattern, {PERMUTATION_SEED})", "pattern_key")}
    from patterns
),
flipped as (
    select
        k.pair_index,
        k.pattern,
        k.exact,
        x.d,
        {mix32_sql("xor(k.pattern_key, x.task_index::ubigint)", "h")},
        case when k.exact then (k.pattern >> x.task_index) & 1 else h & 1 end as flip
    from pattern_keys as k
    join paired as x on x.pair_index = k.pair_index
),
permutation as (
    select
        f.pair_index,
        any_value(f.exact) as exact,
        count(*) filter (where abs(f.statistic) >= abs(p.diff) - {PERMUTATION_TOLERANCE}) as hits,
        count(*) as n_patterns
    from (
        select pair_index, pattern, any_value(exact) as exact, avg(case when flip = 1 then -d else d end) as statistic
        from flipped
        group by pair_index, pattern
    ) as f
    join pairs as p using (pair_index)
    group by f.pair_index
),
errors as (
    select sweep_id, scenario_id, model_name, sum(n_errors)::bigint as n_errors
    from task_totals
    group by sweep_id, scenario_id, model_name
),
one_way as materialized (
    select
        p.{_PAIR.replace(", ", ", p.")},
        p.a_is_simulated,
        p.b_is_simulated,
        p.n_tasks,
        coalesce(s.n_pairs, 0) as n_pairs,
        s.epochs,
        coalesce(ea.n_errors, 0) as n_errors_a,
        coalesce(eb.n_errors, 0) as n_errors_b,
        p.pass_rate_a,
        p.pass_rate_b,
        p.diff,
        p.std_error,
        b.ci_low,
        b.ci_high,
        case when m.exact then m.hits / m.n_patterns else (1 + m.hits) / (m.n_patterns + 1) end as p_value,
        mc.p_value as mcnemar_p_value,
        coalesce(s.a_only, 0) as a_only_passes,
        coalesce(s.b_only, 0) as b_only_passes,
        s.mdd,
        s.sigma2_between,
        s.sigma2_within,
        {epochs_needed_sql("s.sigma2_between", "s.sigma2_within", "p.n_tasks", DEFAULT_DETECTABLE_DIFFERENCE)}
            as epochs_needed,
        p.tasks_a_better,
        p.tasks_b_better
    from pairs as p
    join sized as s using (pair_index)
    left join mcnemar as mc using (pair_index)
    join bootstrap as b using (pair_index)
    join permutation as m using (pair_index)
    left join errors as ea
        on ea.sweep_id = p.sweep_id and ea.scenario_id = p.scenario_id and ea.model_name = p.model_a
    left join errors as eb
        on eb.sweep_id = p.sweep_id and eb.scenario_id = p.scenario_id and eb.model_name = p.model_b
)
select * from one_way
union all
-- 0.0 - x rather than -x: negating 0.0 gives -0.0, which prints as "-0.000".
select
    sweep_id,
    scenario_id,
    model_b as model_a,
    model_a as model_b,
    b_is_simulated as a_is_simulated,
    a_is_simulated as b_is_simulated,
    n_tasks,
    n_pairs,
    epochs,
    n_errors_b as n_errors_a,
    n_errors_a as n_errors_b,
    pass_rate_b as pass_rate_a,
    pass_rate_a as pass_rate_b,
    0.0 - diff as diff,
    std_error,
    0.0 - ci_high as ci_low,
    0.0 - ci_low as ci_high,
    p_value,
    mcnemar_p_value,
    b_only_passes as a_only_passes,
    a_only_passes as b_only_passes,
    mdd,
    sigma2_between,
    sigma2_within,
    epochs_needed,
    tasks_b_better as tasks_a_better,
    tasks_a_better as tasks_b_better
from one_way
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("model_a", "First model (model_name)."),
        ("model_b", "Second model (model_name)."),
        ("a_is_simulated", "True if model_a is a simulated model."),
        ("b_is_simulated", "True if model_b is a simulated model."),
        ("n_tasks", "Paired tasks: tasks with scored rollouts from both models."),
        ("n_pairs", "Paired epochs: (task, rollout_index) that both models have scored (`task_epochs`)."),
        ("epochs", "Mean paired epochs per task that has any (NULL when none)."),
        ("n_errors_a", "model_a's errored rollouts in this sweep x scenario (left out of every rate)."),
        ("n_errors_b", "model_b's errored rollouts in this sweep x scenario."),
        ("pass_rate_a", "Mean over the paired tasks of model_a's task pass rate."),
        ("pass_rate_b", "Mean over the paired tasks of model_b's task pass rate."),
        ("diff", "pass_rate_a - pass_rate_b: positive means A passes more."),
        ("std_error", "Standard error of diff from the task differences: stddev_samp(d) / sqrt(n_tasks)."),
        ("ci_low", "2.5% percentile of diff over the paired task bootstrap."),
        ("ci_high", "97.5% percentile of diff over the paired task bootstrap."),
        ("p_value", "Two-sided sign-flip permutation p-value for diff = 0 (1.0 when every task ties)."),
        (
            "mcnemar_p_value",
            "McNemar's exact two-sided p-value on the paired epochs: 2 * P(X <= min(a_only_passes, b_only_passes)) "
            "for X ~ Binomial(a_only_passes + b_only_passes, 1/2), at most 1; 1.0 without discordant epochs, NULL "
            "without paired epochs. It treats epochs as independent; `p_value` respects the clustering by task.",
        ),
        ("a_only_passes", "Paired epochs model_a passed and model_b failed (discordant)."),
        ("b_only_passes", "Paired epochs model_b passed and model_a failed (discordant)."),
        (
            "mdd",
            f"Minimum detectable difference: the true |diff| a two-sided test at alpha {ALPHA} detects with "
            f"{POWER:.0%} power with this sweep's tasks and epochs, {POWER_FACTOR:.4f} * std_error (normal "
            "approximation). A |diff| below it is not evidence of no difference. NULL when n_tasks < 2.",
        ),
        (
            "sigma2_between",
            "Task-to-task variance of the true task difference: max(var(d) - sigma2_within / epochs, 0), d the "
            "task differences; only more tasks shrink its share of the variance.",
        ),
        (
            "sigma2_within",
            "Epoch-to-epoch variance of a task's paired difference (mean over tasks with 2+ paired epochs of the "
            "sample variance of reward_a - reward_b); more epochs shrink its share.",
        ),
        (
            "epochs_needed",
            f"Epochs per task for mdd <= {DEFAULT_DETECTABLE_DIFFERENCE:.2f} with these tasks: "
            f"ceil(sigma2_within / (n_tasks * ({DEFAULT_DETECTABLE_DIFFERENCE} / {POWER_FACTOR:.4f})^2 - "
            "sigma2_between)), at least 1; NULL when "
            "no number of epochs suffices (more tasks are needed) or sigma2_within is unknown.",
        ),
        ("tasks_a_better", "Paired tasks where model_a's pass rate is higher."),
        ("tasks_b_better", "Paired tasks where model_b's pass rate is higher."),
    ),
    key=("sweep_id", "scenario_id", "model_a", "model_b"),
)
