"""SQL of the metric views, in dependency order. Add a metric (pass@k, pass^k, CIs, ...) by appending a
`MetricView` to `METRIC_VIEWS`: the catalog creates it and the data dictionary documents it.

Scoring rules, in one place:
- Only the latest run of each verifier on a rollout counts (`verifications_latest`), so re-verifying with a
  changed verifier supersedes the old verdicts without deleting them.
- A rollout passes (reward 1.0) iff every latest verifier passed.
- A rollout that ended failed or workspace_error scores 0: the agent did not finish.
- A rollout still pending/running, or completed but not yet verified, has reward NULL; aggregates ignore it
  and report it in `n_unscored`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricView:
    name: str
    doc: str
    sql: str
    #: (column, doc) in view order; a test checks them against the view DuckDB builds.
    columns: tuple[tuple[str, str], ...]

    def statement(self) -> str:
        return f"create or replace view {self.name} as\n{self.sql.strip()}"


VERIFICATIONS_LATEST = MetricView(
    name="verifications_latest",
    doc="For each (rollout_id, verifier), the most recent verification (latest `verified_at`, ties broken by "
    "the greater `verifier_version`): the verdict of the current verifier version.",
    sql="""
select *
from verifications
qualify row_number() over (
    partition by rollout_id, verifier
    order by verified_at desc, verifier_version desc
) = 1
""",
    columns=(("*", "Every column of `verifications`, including the Hive columns `model` and `scenario`."),),
)

ROLLOUT_SCORES = MetricView(
    name="rollout_scores",
    doc="One row per rollout with its score from the latest verifier verdicts. Unverified rollouts are kept "
    "with reward NULL so they are visible; metric views ignore them.",
    sql="""
with verdicts as (
    select
        rollout_id,
        count(*) as n_verifiers,
        count(*) filter (where success) as passed_verifiers
    from verifications_latest
    group by rollout_id
)
select
    r.sweep_id,
    r.run_id,
    r.rollout_id,
    r.rollout_index,
    r.model_name,
    r.model,
    r.scenario,
    r.scenario_id,
    r.task_id,
    r.status,
    r.is_simulated,
    coalesce(v.n_verifiers, 0) as n_verifiers,
    coalesce(v.passed_verifiers, 0) as passed_verifiers,
    case
        when r.status in ('pending', 'running') then null
        when r.status <> 'completed' then 0.0
        when v.n_verifiers is null then null
        when v.passed_verifiers = v.n_verifiers then 1.0
        else 0.0
    end::double as reward,
    case
        when r.status in ('pending', 'running') then null
        when r.status <> 'completed' then 0.0
        when v.n_verifiers is null then null
        else v.passed_verifiers / v.n_verifiers
    end::double as partial_credit
from rollouts as r
left join verdicts as v using (rollout_id)
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollout."),
        ("run_id", "Evaluation-service run id."),
        ("rollout_id", "Rollout id."),
        ("rollout_index", "Index of the rollout among the repeats of its task."),
        ("model_name", "The model's name in the sweep config."),
        ("model", "Hive partition key of the model."),
        ("scenario", "Hive partition key of the scenario."),
        ("scenario_id", "Raw scenario id."),
        ("task_id", "Task id."),
        ("status", "Rollout status."),
        ("is_simulated", "True for the offline simulated models."),
        ("n_verifiers", "Verifiers with a latest verdict on this rollout."),
        ("passed_verifiers", "How many of them passed."),
        ("reward", "1.0 iff all latest verifiers passed; 0.0 for a failed rollout; NULL when not scored yet."),
        ("partial_credit", "passed_verifiers / n_verifiers (0.0 for a failed rollout; NULL when not scored)."),
    ),
)

_AGGREGATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("n", "Scored rollouts (reward not NULL)."),
    ("n_unscored", "Rollouts without a score yet (not verified, or still running)."),
    ("passes", "Scored rollouts with reward 1.0."),
    ("pass_rate", "passes / n (NULL when n = 0)."),
)

TASK_PASS_RATES = MetricView(
    name="task_pass_rates",
    doc="Pass rate per scenario_id x model_name x task_id over scored rollouts.",
    sql="""
select
    scenario_id,
    model_name,
    task_id,
    count(reward) as n,
    count(*) - count(reward) as n_unscored,
    count(*) filter (where reward = 1.0) as passes,
    avg(reward) as pass_rate,
    bool_or(is_simulated) as is_simulated
from rollout_scores
group by scenario_id, model_name, task_id
""",
    columns=(
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        ("task_id", "Task id."),
        *_AGGREGATE_COLUMNS,
        ("is_simulated", "True if any rollout in the group came from a simulated model."),
    ),
)

PASS_RATES = MetricView(
    name="pass_rates",
    doc="Pass rate per scenario_id x model_name over scored rollouts, with the population variance and "
    "standard deviation of the per-rollout reward.",
    sql="""
select
    scenario_id,
    model_name,
    count(reward) as n,
    count(*) - count(reward) as n_unscored,
    count(*) filter (where reward = 1.0) as passes,
    avg(reward) as pass_rate,
    var_pop(reward) as variance,
    stddev_pop(reward) as std,
    avg(partial_credit) as mean_partial_credit,
    bool_or(is_simulated) as is_simulated
from rollout_scores
group by scenario_id, model_name
""",
    columns=(
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        *_AGGREGATE_COLUMNS,
        ("variance", "Population variance of the per-rollout reward."),
        ("std", "Population standard deviation of the per-rollout reward."),
        ("mean_partial_credit", "Mean partial credit over scored rollouts."),
        ("is_simulated", "True if any rollout in the group came from a simulated model."),
    ),
)

#: In dependency order: each view may read the base tables and the views before it.
METRIC_VIEWS: tuple[MetricView, ...] = (VERIFICATIONS_LATEST, ROLLOUT_SCORES, TASK_PASS_RATES, PASS_RATES)


def metric_view_statements() -> list[str]:
    return [view.statement() for view in METRIC_VIEWS]
