"""Model comparisons: every pair of models on one sweep x scenario, paired by task."""

from __future__ import annotations

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

MODEL_COMPARISON = MetricView(
    name="model_comparison",
    doc="Every ordered pair of models on the same sweep x scenario, paired by task (only tasks both models "
    "have scored). diff = mean over those tasks of (pass rate of A - pass rate of B), each task weighted "
    "equally; it equals the difference of pooled pass rates when every task has the same n. 95% CI: paired "
    f"bootstrap percentile interval, {BOOTSTRAP_REPLICATES} replicates resampling tasks. p-value: two-sided "
    f"sign-flip permutation test of mean diff = 0 over tasks; exact (all 2^G patterns) when G <= "
    f"{EXACT_PERMUTATION_MAX_TASKS} tasks, else {PERMUTATION_PATTERNS} hashed patterns with "
    f"p = (1 + hits) / ({PERMUTATION_PATTERNS} + 1). Draws are deterministic (see metrics/stats.py). Both (A, B) and "
    "(B, A) are listed; their diff and CI are mirrored and their p-value is the same.",
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
        coalesce(ea.n_errors, 0) as n_errors_a,
        coalesce(eb.n_errors, 0) as n_errors_b,
        p.pass_rate_a,
        p.pass_rate_b,
        p.diff,
        p.std_error,
        b.ci_low,
        b.ci_high,
        case when m.exact then m.hits / m.n_patterns else (1 + m.hits) / (m.n_patterns + 1) end as p_value,
        p.tasks_a_better,
        p.tasks_b_better
    from pairs as p
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
    n_errors_b as n_errors_a,
    n_errors_a as n_errors_b,
    pass_rate_b as pass_rate_a,
    pass_rate_a as pass_rate_b,
    0.0 - diff as diff,
    std_error,
    0.0 - ci_high as ci_low,
    0.0 - ci_low as ci_high,
    p_value,
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
        ("n_errors_a", "model_a's errored rollouts in this sweep x scenario (left out of every rate)."),
        ("n_errors_b", "model_b's errored rollouts in this sweep x scenario."),
        ("pass_rate_a", "Mean over the paired tasks of model_a's task pass rate."),
        ("pass_rate_b", "Mean over the paired tasks of model_b's task pass rate."),
        ("diff", "pass_rate_a - pass_rate_b: positive means A passes more."),
        ("std_error", "Standard error of diff from the task differences: stddev_samp(d) / sqrt(n_tasks)."),
        ("ci_low", "2.5% percentile of diff over the paired task bootstrap."),
        ("ci_high", "97.5% percentile of diff over the paired task bootstrap."),
        ("p_value", "Two-sided sign-flip permutation p-value for diff = 0 (1.0 when every task ties)."),
        ("tasks_a_better", "Paired tasks where model_a's pass rate is higher."),
        ("tasks_b_better", "Paired tasks where model_b's pass rate is higher."),
    ),
    key=("sweep_id", "scenario_id", "model_a", "model_b"),
)
