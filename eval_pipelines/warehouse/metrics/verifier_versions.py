"""Pass rates per verification pass, to compare verifier versions (`eval-pipelines reverify`)."""

from __future__ import annotations

from eval_pipelines.warehouse.metrics.rates import error_share_sql
from eval_pipelines.warehouse.metrics.scores import OUTCOME_ERROR_CLASS_SQL, OUTCOME_SQL, VERDICT_COUNTS_SQL
from eval_pipelines.warehouse.views import MetricView

VERIFIER_VERSION_PASS_RATES = MetricView(
    name="verifier_version_pass_rates",
    doc="Pass rate per sweep x scenario x model at each verification pass: the programmatic verdicts one run of "
    "`verification` wrote (one `verified_at`) with the scenario's verifiers at one version. Re-verifying after a "
    "verifier edit adds a pass and keeps the older ones, so this compares versions (`eval-pipelines reverify` "
    "prints it); re-verifying at the same version replaces that version's pass. The rule is `rollout_scores`'s, "
    "applied to the pass's verdicts instead of the latest ones: a rollout passes iff every verifier passed in that "
    "pass; a verifier error in the pass, or an error that is not the agent's (model endpoint, tool server, "
    "cancel, budget), leaves it out of n; a rollout that did not complete fails in every pass.",
    sql=f"""
with verdicts as (
    -- One run of `verification` stamps every verdict it writes for a partition with one verified_at.
    select
        sweep_id,
        scenario_id,
        model_name,
        verified_at,
        rollout_id,{VERDICT_COUNTS_SQL},
        list(verifier || '=' || verifier_version) as versions
    from verifications
    where kind = 'programmatic'
    group by sweep_id, scenario_id, model_name, verified_at, rollout_id
),
passes as (
    select
        sweep_id,
        scenario_id,
        model_name,
        verified_at,
        list_sort(list_distinct(flatten(list(versions)))) as verifier_versions
    from verdicts
    group by sweep_id, scenario_id, model_name, verified_at
),
classified as (
    -- Every rollout of the pass's partition and sweep: one the pass did not verify still counts as an error or
    -- an unfinished agent, as in `rollout_scores`.
    select
        p.sweep_id,
        p.scenario_id,
        p.model_name,
        p.verified_at,
        p.verifier_versions,
        r.status,
        v.n_verifiers,
        v.passed_verifiers,
        {OUTCOME_ERROR_CLASS_SQL} as outcome_error_class
    from passes as p
    join rollouts as r
        on r.sweep_id = p.sweep_id and r.scenario_id = p.scenario_id and r.model_name = p.model_name
    left join verdicts as v on v.rollout_id = r.rollout_id and v.verified_at = p.verified_at
),
scored as (
    select *, {OUTCOME_SQL} as outcome from classified
)
select
    sweep_id,
    scenario_id,
    model_name,
    verified_at,
    any_value(verifier_versions) as verifier_versions,
    count(*) filter (where outcome in ('passed', 'failed')) as n,
    count(*) filter (where outcome is null) as n_unscored,
    count(*) filter (where outcome = 'passed') as passes,
    passes / nullif(n, 0) as pass_rate,
    count(*) filter (where outcome = 'error') as n_errors,
    {error_share_sql("")} as error_share
from scored
group by sweep_id, scenario_id, model_name, verified_at
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The model's name in the sweep config."),
        ("verified_at", "When the pass ran: orders the versions of one sweep x scenario x model."),
        (
            "verifier_versions",
            "`verifier=version` of every verifier that judged the pass, sorted: which verifier changed between "
            "two passes.",
        ),
        ("n", "Rollouts passed or failed in this pass (errors are left out)."),
        ("n_unscored", "Rollouts without a verdict in this pass (not verified by it, or still running)."),
        ("passes", "Rollouts every verifier passed in this pass."),
        ("pass_rate", "passes / n (NULL when n = 0)."),
        ("n_errors", "Rollouts with a verifier error in this pass, or an error that is not the agent's; not in n."),
        ("error_share", "n_errors / (n + n_errors)."),
    ),
    key=("sweep_id", "scenario_id", "model_name", "verified_at"),
)
