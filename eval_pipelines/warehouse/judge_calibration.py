"""Graders graded: every rubric, quality and safety judge calibrated against the programmatic verifiers.

- `sweep_settings`: per sweep, the kappa its judges must reach (its config's `min_judge_kappa`, the one the
  `judge_agreement` gate holds it to), stored when the catalog is built (`set_sweep_settings`).
- `judge_calibration_rollouts`: one row per rollout and judge where both a judge verdict and a verifier score exist,
  with whether the two agree (the disagreeing rollouts are what the viewer and the report link to).
- `judge_calibration`: per sweep, scenario, judge and judge model, the confusion counts, the true-positive and
  true-negative rates (the verifiers' pass is the positive class), the base rate, Cohen's kappa and the flag.

The verifiers' verdict is `rollout_scores.reward` (latest programmatic verdicts; errors and unscored rollouts are
left out). How a judge's score becomes a verdict, and the kappa a judge must reach, are in `schemas/judging.py`.
Its own module, importing only `views`, so that the metric registry can list its views without an import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb

from eval_pipelines.schemas.judging import (
    DEFAULT_JUDGE_MIN_KAPPA,
    FLAG_KAPPA_BELOW_THRESHOLD,
    FLAG_KAPPA_UNDEFINED,
    QUALITY_PASS_SCORE,
    SAFETY_FLAG_SCORE,
)
from eval_pipelines.warehouse.views import MetricView

#: The build-time variable `sweep_settings` is computed from: a list of {sweep_id, min_judge_kappa} structs.
SWEEP_SETTINGS_VARIABLE = "eval_pipelines_sweep_settings"
_SETTINGS_TYPE = "STRUCT(sweep_id VARCHAR, min_judge_kappa DOUBLE)[]"
_GIVEN_SETTINGS = f"getvariable('{SWEEP_SETTINGS_VARIABLE}')::{_SETTINGS_TYPE}"

_ROLLOUT_KEY = ("rollout_id", "judge_kind", "judge", "judge_model")
_JUDGE_KEY = ("sweep_id", "scenario_id", "judge_kind", "judge", "judge_model")

SWEEP_SETTINGS = MetricView(
    name="sweep_settings",
    doc="One row per sweep in `rollouts`: the Cohen's kappa its judges must reach, `min_judge_kappa` of the sweep's "
    "config (what its `judge_agreement` gate holds them to), read when the catalog was built; "
    f"{DEFAULT_JUDGE_MIN_KAPPA} (`schemas/judging.py`) for a sweep no config names. `judge_calibration` flags "
    "against it. A table, computed at the build: rebuild the catalog after editing a sweep's threshold.",
    sql=f"""
with configured as (
    select s.sweep_id, s.min_judge_kappa
    from (select unnest(coalesce({_GIVEN_SETTINGS}, []::{_SETTINGS_TYPE})) as s)
)
select
    r.sweep_id,
    coalesce(any_value(c.min_judge_kappa), {DEFAULT_JUDGE_MIN_KAPPA!r})::double as min_judge_kappa,
    count(c.sweep_id) > 0 as from_config
from (select distinct sweep_id from rollouts where sweep_id is not null) as r
left join configured as c using (sweep_id)
group by r.sweep_id
""",
    columns=(
        ("sweep_id", "A sweep with rollouts in the warehouse."),
        ("min_judge_kappa", "The kappa each of its judges must reach against the verifiers."),
        ("from_config", "Taken from the sweep's config; false: the default, no config was given for it."),
    ),
    key=("sweep_id",),
    materialized=True,
)


def set_sweep_settings(con: duckdb.DuckDBPyConnection, min_judge_kappa: Mapping[str, float]) -> None:
    """Give the catalog being built each sweep's `min_judge_kappa` (sweep id -> kappa), before `sweep_settings` is
    created on `con`; a sweep left out gets the default."""
    settings = [{"sweep_id": s, "min_judge_kappa": float(k)} for s, k in sorted(min_judge_kappa.items())]
    con.execute(f"set variable {SWEEP_SETTINGS_VARIABLE} = ?::{_SETTINGS_TYPE}", [settings])


JUDGE_CALIBRATION_ROLLOUTS = MetricView(
    name="judge_calibration_rollouts",
    doc="One row per rollout and judge where the judge gave a verdict and the programmatic verifiers a score "
    "(`rollout_scores.reward` not NULL: errors and unscored rollouts are left out). Rubric judge: the latest "
    "`verifications` row of kind rubric per judge module (a verdict of ERROR, the judge's own failure, is left "
    "out); it passes when the row succeeded. Quality and safety judges: the latest `judgements` row per judge and "
    f"judge model; a quality judge passes a rollout when its score is >= {QUALITY_PASS_SCORE}, a safety judge when "
    f"its score is < {SAFETY_FLAG_SCORE} (not flagged). `judge_calibration` counts these rows.",
    sql=f"""
with rubric as (
    select
        rollout_id,
        'rubric' as judge_kind,
        verifier as judge,
        coalesce(
            case when json_valid(output_json) then json_extract_string(output_json, '$.model') end, verifier
        ) as judge_model,
        reward as judge_score,
        success as judge_pass,
        verified_at as judged_at
    from verifications_latest
    where kind = 'rubric'
        and not coalesce(is_error, false)
        and coalesce(
            case when json_valid(output_json) then json_extract_string(output_json, '$.verdict') end, ''
        ) <> 'ERROR'
),
platform as (
    select
        rollout_id,
        judge_kind,
        judge,
        judge_model,
        score as judge_score,
        case judge_kind
            when 'quality' then score >= {QUALITY_PASS_SCORE}
            when 'safety' then score < {SAFETY_FLAG_SCORE}
        end as judge_pass,
        judged_at
    from judgements
    where judge_kind in ('quality', 'safety') and score is not null
    qualify row_number() over (
        partition by rollout_id, judge_kind, judge, judge_model order by judged_at desc
    ) = 1
),
verdicts as (
    select * from rubric
    union all
    select * from platform
)
select
    s.sweep_id,
    s.scenario_id,
    s.model_name,
    s.task_id,
    s.rollout_id,
    v.judge_kind,
    v.judge,
    v.judge_model,
    v.judge_score,
    v.judge_pass,
    s.reward = 1.0 as verifier_pass,
    v.judge_pass = (s.reward = 1.0) as agree,
    v.judged_at
from verdicts as v
join rollout_scores as s using (rollout_id)
where s.reward is not null
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollout."),
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The judged agent model."),
        ("task_id", "Task id."),
        ("rollout_id", "Rollout judged and verified."),
        ("judge_kind", "`rubric`, `quality` or `safety`."),
        ("judge", "The judge: the rubric judge's verifier module, or the platform judge's name."),
        ("judge_model", "The judge's backing model (the rubric judge's from its verdict's `model`)."),
        ("judge_score", "The judge's score: 0..1 for the rubric judge, 1..10 for the platform's judges."),
        ("judge_pass", "The judge's verdict read as pass/fail (see above)."),
        ("verifier_pass", "Every latest programmatic verifier passed (`rollout_scores.reward` = 1)."),
        ("agree", "judge_pass = verifier_pass."),
        ("judged_at", "When the judge ran."),
    ),
    key=_ROLLOUT_KEY,
)

JUDGE_CALIBRATION = MetricView(
    name="judge_calibration",
    doc="How well each judge reproduces the programmatic verifiers, per sweep, scenario, judge and judge model "
    "(over every agent model), from `judge_calibration_rollouts`. The verifiers' pass is the positive class: "
    "`tpr` is the share of verifier-passed rollouts the judge passes, `tnr` the share of verifier-failed rollouts "
    "it fails, `base_rate` the verifiers' pass rate (kappa is read against it: at a base rate near 0 or 1, "
    "agreement is high by chance alone). `kappa` is Cohen's kappa, NULL when either side is constant. A judge is "
    "`flagged` when kappa is below `min_kappa` (its sweep's `min_judge_kappa`, from `sweep_settings`: the gate's "
    f"threshold; default {DEFAULT_JUDGE_MIN_KAPPA}) or cannot be computed; the viewer and the report mark its "
    "scores, and list its disagreeing rollouts.",
    sql=f"""
with counted as (
    select
        sweep_id,
        scenario_id,
        judge_kind,
        judge,
        judge_model,
        count(*) as n,
        count(distinct model_name) as n_models,
        count(*) filter (where judge_pass and verifier_pass) as both_pass,
        count(*) filter (where not judge_pass and not verifier_pass) as both_fail,
        count(*) filter (where judge_pass and not verifier_pass) as judge_only_pass,
        count(*) filter (where not judge_pass and verifier_pass) as verifier_only_pass
    from judge_calibration_rollouts
    group by sweep_id, scenario_id, judge_kind, judge, judge_model
),
rated as (
    select
        *,
        judge_only_pass + verifier_only_pass as n_disagree,
        (both_pass + verifier_only_pass)::double / n as base_rate,
        (both_pass + judge_only_pass)::double / n as judge_pass_rate,
        both_pass::double / nullif(both_pass + verifier_only_pass, 0) as tpr,
        both_fail::double / nullif(both_fail + judge_only_pass, 0) as tnr,
        (both_pass + both_fail)::double / n as agreement,
        base_rate * judge_pass_rate + (1 - base_rate) * (1 - judge_pass_rate) as chance_agreement
    from counted
)
select
    sweep_id,
    scenario_id,
    judge_kind,
    judge,
    judge_model,
    n,
    n_models,
    both_pass,
    both_fail,
    judge_only_pass,
    verifier_only_pass,
    n_disagree,
    base_rate,
    judge_pass_rate,
    tpr,
    tnr,
    agreement,
    chance_agreement,
    -- Either side constant: chance agreement is 1 and kappa is undefined.
    case when base_rate in (0, 1) or judge_pass_rate in (0, 1) then null
        else (agreement - chance_agreement) / (1 - chance_agreement) end as kappa,
    coalesce(st.min_judge_kappa, {DEFAULT_JUDGE_MIN_KAPPA!r})::double as min_kappa,
    kappa is null or kappa < min_kappa as flagged,
    case
        when kappa is null then '{FLAG_KAPPA_UNDEFINED}'
        when kappa < min_kappa then '{FLAG_KAPPA_BELOW_THRESHOLD}'
    end as flag_reason
from rated
left join sweep_settings as st using (sweep_id)
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("judge_kind", "`rubric`, `quality` or `safety`."),
        ("judge", "The judge (rubric judge module or platform judge name)."),
        ("judge_model", "The judge's backing model."),
        ("n", "Rollouts with both a judge verdict and a verifier score."),
        ("n_models", "Agent models among them."),
        ("both_pass", "Judge and verifiers pass (true positives)."),
        ("both_fail", "Judge and verifiers fail (true negatives)."),
        ("judge_only_pass", "Judge passes, verifiers fail (false positives)."),
        ("verifier_only_pass", "Verifiers pass, judge fails (false negatives)."),
        ("n_disagree", "judge_only_pass + verifier_only_pass: the rollouts the viewer lists."),
        ("base_rate", "Share of the n rollouts the verifiers pass."),
        ("judge_pass_rate", "Share of the n rollouts the judge passes."),
        ("tpr", "True-positive rate both_pass / (both_pass + verifier_only_pass); NULL without a verifier pass."),
        ("tnr", "True-negative rate both_fail / (both_fail + judge_only_pass); NULL without a verifier fail."),
        ("agreement", "Observed agreement (both_pass + both_fail) / n."),
        (
            "chance_agreement",
            "Agreement expected by chance from the two pass rates: base_rate * judge_pass_rate + (1 - base_rate) * "
            "(1 - judge_pass_rate).",
        ),
        (
            "kappa",
            "Cohen's kappa (agreement - chance_agreement) / (1 - chance_agreement); NULL when the verifiers or the "
            "judge pass all or none of the rollouts.",
        ),
        (
            "min_kappa",
            "The kappa a judge must reach: its sweep's `min_judge_kappa` (`sweep_settings`), the `judge_agreement` "
            "gate's threshold.",
        ),
        ("flagged", "kappa is below min_kappa or undefined: do not trust this judge's scores without a look."),
        ("flag_reason", f"`{FLAG_KAPPA_BELOW_THRESHOLD}`, `{FLAG_KAPPA_UNDEFINED}`, or NULL when not flagged."),
    ),
    key=_JUDGE_KEY,
)

#: Registered after `rollout_scores` and `verifications_latest`, which they read.
JUDGE_CALIBRATION_VIEWS: tuple[MetricView, ...] = (SWEEP_SETTINGS, JUDGE_CALIBRATION_ROLLOUTS, JUDGE_CALIBRATION)
