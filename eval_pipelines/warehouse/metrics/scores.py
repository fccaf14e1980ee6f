"""Verdicts and rollout scores: the latest verifier verdict per rollout and the scoring rule (`rollout_scores`)."""

from __future__ import annotations

from eval_pipelines.warehouse.views import MetricView

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
    key=("rollout_id", "verifier"),
)

#: A group of programmatic verdict rows counted (per rollout): the inputs of `OUTCOME_ERROR_CLASS_SQL` and
#: `OUTCOME_SQL`.
VERDICT_COUNTS_SQL = """
        count(*) as n_verifiers,
        count(*) filter (where success) as passed_verifiers,
        count(*) filter (where coalesce(is_error, false)) as broken_verifiers"""
#: The error class of a rollout `r` (a `rollouts` row) given its verdicts `v` (`VERDICT_COUNTS_SQL`, NULL when it
#: has none); NULL when the outcome is the agent's. One home for `rollout_scores` and `verifier_version_pass_rates`.
OUTCOME_ERROR_CLASS_SQL = """case
            when r.status in ('pending', 'running') then null
            -- A verifier error is decided by the verdicts counted: re-verifying with a fixed verifier clears it.
            when r.error_class is not null and r.error_class <> 'verifier' then r.error_class
            when r.termination_reason = 'cost_ceiling' then 'budget'
            when r.termination_reason in ('cancelled', 'server_restart') then 'cancelled'
            when r.status = 'workspace_error' then 'tool_server'
            when r.status = 'completed' and v.broken_verifiers > 0 then 'verifier'
        end"""
#: passed / failed / error, or NULL (running, or not verified), from the columns status, outcome_error_class,
#: n_verifiers and passed_verifiers.
OUTCOME_SQL = """case
        when status in ('pending', 'running') then null
        when outcome_error_class is not null then 'error'
        when status <> 'completed' then 'failed'
        when n_verifiers is null then null
        when passed_verifiers = n_verifiers then 'passed'
        else 'failed'
    end"""

ROLLOUT_SCORES = MetricView(
    name="rollout_scores",
    doc="One row per rollout with its outcome and score from the latest programmatic verifier verdicts "
    "(rubric-judge verdicts are compared in `rubric_verifier_agreement`, never counted here). `outcome` is "
    "`passed`, `failed` (the agent's fault: a wrong result, a timeout, a crash of its own) or `error` (something "
    "else failed: the model endpoint, a tool server, an NPC model, a verifier, a cancel or the cost ceiling; "
    "`error_class` says which). Errors have reward NULL and are left out of every pass rate; unverified and "
    "running rollouts have outcome NULL.",
    sql=f"""
with verdicts as (
    select
        rollout_id,{VERDICT_COUNTS_SQL}
    from verifications_latest
    where kind = 'programmatic'
    group by rollout_id
),
classified as (
    select
        r.*,
        v.n_verifiers,
        v.passed_verifiers,
        {OUTCOME_ERROR_CLASS_SQL} as outcome_error_class
    from rollouts as r
    left join verdicts as v using (rollout_id)
)
select
    sweep_id,
    run_id,
    rollout_id,
    rollout_index,
    model_name,
    model,
    scenario,
    scenario_id,
    task_id,
    status,
    is_simulated,
    coalesce(n_verifiers, 0) as n_verifiers,
    coalesce(passed_verifiers, 0) as passed_verifiers,
    {OUTCOME_SQL} as outcome,
    outcome_error_class as error_class,
    case outcome when 'passed' then 1.0 when 'failed' then 0.0 end::double as reward,
    case
        when outcome = 'failed' and status <> 'completed' then 0.0
        when outcome in ('passed', 'failed') then passed_verifiers / n_verifiers
    end::double as partial_credit,
    total_tokens,
    cost_usd,
    duration_seconds
from classified
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
        ("outcome", "`passed`, `failed` (the agent's fault) or `error`; NULL while running or not verified."),
        (
            "error_class",
            "For an error: model_endpoint, tool_server, npc_model, user_simulator, simulator_off_script, verifier, "
            "cancelled, budget, internal, agent_environment.",
        ),
        ("reward", "1.0 passed, 0.0 failed; NULL for an error or an unscored rollout."),
        ("partial_credit", "passed_verifiers / n_verifiers (0.0 for an agent that did not finish; NULL as reward)."),
        ("total_tokens", "Prompt plus completion tokens (from `rollouts`)."),
        ("cost_usd", "Estimated cost in USD (from `rollouts`); NULL when a model's price is unknown."),
        ("duration_seconds", "Wall-clock duration of the rollout (from `rollouts`)."),
    ),
    key=("rollout_id",),
)
