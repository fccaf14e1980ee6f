"""The benchmarks' own metrics, computed as their authors compute them, and the parity view.

- `bfcl_accuracy`: BFCL's per-category accuracy (its `save_eval_results`: correct / entries graded), over our
  scored rollouts; rollouts that ended in an infrastructure error are left out and counted beside.
- `tau2_pass_hat_k`: τ²'s pass^k (`tau2.metrics.agent_metrics`): per task C(c, k) / C(n, k), averaged over the
  tasks, for k = 1 .. the smallest trial count of any task, after infrastructure errors are dropped.
- `parity`: the latest grading of each benchmark rollout by `eval-pipelines parity`.

A benchmark's category (BFCL) or domain (τ²) is its scenario family without the benchmark's prefix
(`bfcl_multi_turn_base` -> `multi_turn_base`, `tau2_airline` -> `airline`), as the adapters name the scenarios.
"""

from __future__ import annotations

from eval_pipelines.warehouse.views import MetricView

BFCL = "bfcl"
TAU2 = "tau2"


def _family_without_prefix(column: str, benchmark: str) -> str:
    """SQL: the scenario family of the raw id in `column`, without the benchmark's `<name>_` prefix."""
    return f"regexp_replace(split_part({column}, ':', 1), '^{benchmark}_', '')"


def _benchmark_rollouts_sql(benchmark: str) -> str:
    """SQL: the rollout scores of one benchmark's tasks (a task is the benchmark's when its adapter said so)."""
    return f"""
benchmark_tasks as (
    select distinct scenario_id, task_id
    from tasks
    where benchmark = '{benchmark}'
),
scored as (
    select s.*
    from rollout_scores as s
    semi join benchmark_tasks as t on t.scenario_id = s.scenario_id and t.task_id = s.task_id
)"""


PARITY_VIEW = MetricView(
    name="parity",
    doc="The latest grading of each benchmark rollout by `eval-pipelines parity` (from `parity_gradings`): our "
    "verdict beside the upstream grader's on the same trace, and which components flipped.",
    sql="""
select
    sweep_id,
    benchmark,
    scenario_id,
    task_id,
    rollout_id,
    model_name,
    ours_success as ours,
    upstream_success as upstream,
    agree,
    flips,
    deterministic_disagreement,
    upstream_message,
    upstream_version,
    graded_at
from parity_gradings
qualify row_number() over (partition by rollout_id order by graded_at desc, grading_id desc) = 1
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollout."),
        ("benchmark", "Benchmark of the task (`bfcl`, `tau2`)."),
        ("scenario_id", "Raw scenario id."),
        ("task_id", "Task id."),
        ("rollout_id", "Rollout graded."),
        ("model_name", "The model's name in the sweep config."),
        ("ours", "Our verdict (passed = true)."),
        ("upstream", "The upstream grader's verdict."),
        ("agree", "True when no component (nor the overall verdict) differs."),
        ("flips", "Components whose verdicts differ; `success` for the overall verdict."),
        ("deterministic_disagreement", "A flip on a component no model judges."),
        ("upstream_message", "The upstream grader's message."),
        ("upstream_version", "Version of the upstream package whose grader ran."),
        ("graded_at", "When the upstream grader ran (the latest grading of the rollout)."),
    ),
    key=("rollout_id",),
)

BFCL_ACCURACY = MetricView(
    name="bfcl_accuracy",
    doc="BFCL's accuracy per sweep x model x category, as its `save_eval_results` computes it: correct / total "
    "over the rollouts graded (our scored rollouts). Rollouts that ended in an infrastructure error are not "
    "graded and are counted in `n_errors`; rollouts not verified yet in `n_unscored`.",
    sql=f"""
with {_benchmark_rollouts_sql(BFCL).strip()}
select
    sweep_id,
    model_name,
    {_family_without_prefix("scenario_id", BFCL)} as category,
    count(*) filter (where outcome = 'passed') as correct,
    count(*) filter (where outcome in ('passed', 'failed')) as total,
    (count(*) filter (where outcome = 'passed'))
        / nullif(count(*) filter (where outcome in ('passed', 'failed')), 0)::double as accuracy,
    count(*) filter (where outcome = 'error') as n_errors,
    count(*) filter (where outcome is null) as n_unscored
from scored
group by all
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("model_name", "The model's name in the sweep config."),
        ("category", "BFCL test category (`multi_turn_base`, `multi_turn_miss_func`, ...)."),
        ("correct", "Rollouts graded valid."),
        ("total", "Rollouts graded (passed or failed)."),
        ("accuracy", "correct / total (NULL when nothing was graded)."),
        ("n_errors", "Rollouts that ended in an infrastructure error; not in total."),
        ("n_unscored", "Rollouts not verified yet (or still running); not in total."),
    ),
    key=("sweep_id", "model_name", "category"),
)

TAU2_PASS_HAT_K = MetricView(
    name="tau2_pass_hat_k",
    doc="τ²-bench's pass^k per sweep x model x domain, as `tau2.metrics.agent_metrics` computes it: "
    "infrastructure errors dropped first, then per task C(c, k) / C(n, k) (n trials, c successes), averaged "
    "over the tasks with equal weight, for k = 1 .. the smallest n of any task. The per-task ratio is "
    "`task_pass_at_k.pass_hat_k`; `avg_reward` is τ²'s average reward over the same rollouts.",
    sql=f"""
with {_benchmark_rollouts_sql(TAU2).strip()},
by_domain as (
    select *, {_family_without_prefix("scenario_id", TAU2)} as domain
    from scored
),
groups as (
    select
        sweep_id,
        model_name,
        domain,
        avg(reward) as avg_reward,
        count(*) filter (where outcome = 'error') as n_errors,
        count(distinct task_id) filter (where outcome in ('passed', 'failed')) as n_tasks
    from by_domain
    group by all
),
task_trials as (
    select sweep_id, model_name, domain, scenario_id, task_id, count(*) as n
    from by_domain
    where outcome in ('passed', 'failed')
    group by all
),
max_k as (
    select sweep_id, model_name, domain, min(n) as max_k
    from task_trials
    group by all
),
per_k as (
    select t.sweep_id, t.model_name, t.domain, p.k, avg(p.pass_hat_k) as pass_hat_k
    from task_pass_at_k as p
    join task_trials as t using (sweep_id, model_name, scenario_id, task_id)
    join max_k as m on m.sweep_id = t.sweep_id and m.model_name = t.model_name and m.domain = t.domain
    where p.k <= m.max_k
    group by all
)
select
    g.sweep_id,
    g.model_name,
    g.domain,
    p.k,
    p.pass_hat_k,
    g.n_tasks,
    g.avg_reward,
    g.n_errors
from groups as g
join per_k as p using (sweep_id, model_name, domain)
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("model_name", "The model's name in the sweep config."),
        ("domain", "τ² domain (`airline`, `retail`)."),
        ("k", "1 .. the smallest number of scored trials of any task of the domain."),
        ("pass_hat_k", "Mean over the tasks of C(c, k) / C(n, k)."),
        ("n_tasks", "Tasks with at least one scored trial."),
        ("avg_reward", "Mean reward over the scored trials (τ²'s `avg_reward`)."),
        ("n_errors", "Trials that ended in an infrastructure error, dropped before the metric."),
    ),
    key=("sweep_id", "model_name", "domain", "k"),
)

#: Appended to the catalog's metric views after the general ones (they read `rollout_scores`, `task_pass_at_k`).
BENCHMARK_VIEWS: tuple[MetricView, ...] = (PARITY_VIEW, BFCL_ACCURACY, TAU2_PASS_HAT_K)
