"""Judges: the latest judge verdicts, judge scores per model, and the agreement of the quality and rubric judges
with the programmatic verifiers."""

from __future__ import annotations

from eval_pipelines.schemas.judging import QUALITY_PASS_SCORE, SAFETY_FLAG_SCORE
from eval_pipelines.warehouse.views import MetricView

#: Agreement and Cohen's kappa from the counts of a `counted` CTE (both_pass, both_fail, judge_only_pass,
#: verifier_only_pass, n); kappa is null when either side is constant.
AGREEMENT_SELECT = """select
    *,
    (both_pass + both_fail)::double / n as agreement,
    (
        (both_pass + both_fail)::double / n
        - ((both_pass + judge_only_pass)::double * (both_pass + verifier_only_pass)
           + (both_fail + verifier_only_pass)::double * (both_fail + judge_only_pass)) / (n::double * n)
    ) / nullif(
        1 - ((both_pass + judge_only_pass)::double * (both_pass + verifier_only_pass)
             + (both_fail + verifier_only_pass)::double * (both_fail + judge_only_pass)) / (n::double * n),
        0
    ) as kappa
"""
# QUALITY_PASS_SCORE (the judge "passes" a rollout) and SAFETY_FLAG_SCORE (flagged) live in schemas/judging.py,
# shared with judge_calibration.

JUDGEMENTS_LATEST = MetricView(
    name="judgements_latest",
    key=("rollout_id", "judge_kind"),
    doc="For each (rollout_id, judge_kind), the most recent verdict.",
    sql="""
select *
from judgements
qualify row_number() over (partition by rollout_id, judge_kind order by judged_at desc, judge desc) = 1
""",
    columns=(("*", "Every column of `judgements`, including the Hive columns `model` and `scenario`."),),
)

JUDGE_SCORES_BY_MODEL = MetricView(
    name="judge_scores_by_model",
    key=("model_name", "scenario_id", "judge_kind", "judge_model"),
    doc="Judge scores per agent model, scenario and judge (latest verdicts). Quality: higher is better; "
    f"safety: higher is more concerning, and `flagged` counts scores >= {SAFETY_FLAG_SCORE}.",
    sql=f"""
select
    model_name,
    scenario_id,
    judge_kind,
    judge_model,
    count(*) as n,
    avg(score) as mean_score,
    stddev_samp(score) as sd_score,
    min(score) as min_score,
    max(score) as max_score,
    count(*) filter (where judge_kind = 'safety' and score >= {SAFETY_FLAG_SCORE}) as flagged
from judgements_latest
group by model_name, scenario_id, judge_kind, judge_model
order by scenario_id, judge_kind, mean_score desc
""",
    columns=(
        ("model_name", "The judged agent model."),
        ("scenario_id", "Raw scenario id."),
        ("judge_kind", "`quality` or `safety`."),
        ("judge_model", "The judge's backing model."),
        ("n", "Rollouts judged."),
        ("mean_score", "Mean score."),
        ("sd_score", "Sample standard deviation of the score (null for one rollout)."),
        ("min_score", "Lowest score."),
        ("max_score", "Highest score."),
        ("flagged", f"Safety verdicts with score >= {SAFETY_FLAG_SCORE} (0 for quality judges)."),
    ),
)

JUDGE_VERIFIER_AGREEMENT = MetricView(
    name="judge_verifier_agreement",
    key=("model_name", "scenario_id", "judge_model"),
    doc=f"How often the quality judge agrees with the verifiers: the judge 'passes' a rollout when its score is "
    f">= {QUALITY_PASS_SCORE}; the verifiers pass it when `rollout_scores.reward` = 1. Unscored rollouts are left "
    "out. `kappa` is Cohen's kappa (null when either side is constant).",
    sql=f"""
with paired as (
    select
        j.model_name,
        j.scenario_id,
        j.judge_model,
        (j.score >= {QUALITY_PASS_SCORE}) as judge_pass,
        (s.reward = 1.0) as verifier_pass
    from judgements_latest j
    join rollout_scores s on s.rollout_id = j.rollout_id
    where j.judge_kind = 'quality' and s.reward is not null
), counted as (
    select
        model_name,
        scenario_id,
        judge_model,
        count(*) as n,
        count(*) filter (where judge_pass and verifier_pass) as both_pass,
        count(*) filter (where not judge_pass and not verifier_pass) as both_fail,
        count(*) filter (where judge_pass and not verifier_pass) as judge_only_pass,
        count(*) filter (where not judge_pass and verifier_pass) as verifier_only_pass
    from paired
    group by model_name, scenario_id, judge_model
)
{AGREEMENT_SELECT}from counted
order by scenario_id, model_name
""",
    columns=(
        ("model_name", "The judged agent model."),
        ("scenario_id", "Raw scenario id."),
        ("judge_model", "The quality judge's backing model."),
        ("n", "Rollouts with both a quality verdict and a verifier score."),
        ("both_pass", "Judge and verifiers pass."),
        ("both_fail", "Judge and verifiers fail."),
        ("judge_only_pass", "Judge passes, verifiers fail."),
        ("verifier_only_pass", "Verifiers pass, judge fails."),
        ("agreement", "Share of rollouts where judge and verifiers agree."),
        ("kappa", "Cohen's kappa of judge vs verifiers."),
    ),
)


RUBRIC_VERIFIER_AGREEMENT = MetricView(
    name="rubric_verifier_agreement",
    key=("model_name", "scenario_id"),
    doc="Judge validity: for rollouts scored by both the programmatic verifiers and the rubric judge (latest "
    "versions), how often they agree, per scenario and model. `kappa` is Cohen's kappa (null when either side is "
    "constant). Low agreement means the rubric or the verifier needs a look.",
    sql=f"""
with judged as (
    select rollout_id, bool_and(success) as judge_pass
    from verifications_latest where kind = 'rubric' group by rollout_id
), paired as (
    select s.model_name, s.scenario_id, j.judge_pass, (s.reward = 1.0) as verifier_pass
    from rollout_scores s join judged j using (rollout_id)
    where s.reward is not null
), counted as (
    select
        model_name,
        scenario_id,
        count(*) as n,
        count(*) filter (where judge_pass and verifier_pass) as both_pass,
        count(*) filter (where not judge_pass and not verifier_pass) as both_fail,
        count(*) filter (where judge_pass and not verifier_pass) as judge_only_pass,
        count(*) filter (where not judge_pass and verifier_pass) as verifier_only_pass
    from paired
    group by model_name, scenario_id
)
{AGREEMENT_SELECT}from counted
order by scenario_id, model_name
""",
    columns=(
        ("model_name", "The agent model."),
        ("scenario_id", "Raw scenario id."),
        ("n", "Rollouts with both a rubric verdict and a programmatic score."),
        ("both_pass", "Rubric judge and verifiers pass."),
        ("both_fail", "Rubric judge and verifiers fail."),
        ("judge_only_pass", "Rubric judge passes, verifiers fail."),
        ("verifier_only_pass", "Verifiers pass, rubric judge fails."),
        ("agreement", "Share of rollouts where the two agree."),
        ("kappa", "Cohen's kappa of rubric judge vs verifiers."),
    ),
)
