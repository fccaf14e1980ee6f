"""Simulators graded: how often the NPCs and simulated users of a scenario went off script.

The checks themselves run with the rollout (`engine/simulator_checks.py`) and land in the `simulator_checks`
table; a rollout with a failed check is a `simulator_off_script` error, kept out of every pass rate by
`rollout_scores`. These views show the share per scenario, and which checks failed, decided how.
"""

from __future__ import annotations

from eval_pipelines.schemas.artifacts import CHECK_METHOD_DETERMINISTIC, CHECK_METHOD_JUDGE
from eval_pipelines.schemas.runs import ErrorClass
from eval_pipelines.warehouse.views import MetricView

_OFF_SCRIPT = ErrorClass.SIMULATOR_OFF_SCRIPT.value

SIMULATOR_FIDELITY = MetricView(
    name="simulator_fidelity",
    doc="Per sweep x scenario x model: the finished rollouts in which a simulator (an NPC, a simulated user) spoke, "
    "how many of them it went off script in (a failed check of `simulator_checks`, decided by code or by the judge "
    "model, counted apart) and that share. Such rollouts are `simulator_off_script` errors: never the agent's "
    "failure, left out of every pass rate; `error_share` is their share of all the pair's finished rollouts.",
    sql=f"""
with checked as (
    select
        rollout_id,
        bool_or(not passed) as off_script,
        bool_or(not passed and method = '{CHECK_METHOD_DETERMINISTIC}') as off_script_deterministic,
        bool_or(not passed and method = '{CHECK_METHOD_JUDGE}') as off_script_judge
    from simulator_checks
    group by rollout_id
),
pairs as (
    select
        s.sweep_id,
        s.scenario_id,
        s.model_name,
        count(*) as n_rollouts,
        count(c.rollout_id) as n_with_simulator,
        count(*) filter (where c.off_script) as n_off_script,
        count(*) filter (where c.off_script_deterministic) as n_off_script_deterministic,
        count(*) filter (where c.off_script_judge) as n_off_script_judge,
        count(*) filter (where s.error_class = '{_OFF_SCRIPT}') as n_simulator_errors
    from rollout_scores as s
    left join checked as c using (rollout_id)
    where s.status not in ('pending', 'running')
    group by s.sweep_id, s.scenario_id, s.model_name
)
select
    *,
    n_off_script / nullif(n_with_simulator, 0) as off_script_share,
    n_simulator_errors / nullif(n_rollouts, 0) as error_share
from pairs
""",
    columns=(
        ("sweep_id", "Sweep that launched the rollouts."),
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The agent model's name in the sweep config."),
        ("n_rollouts", "Finished rollouts of the pair."),
        ("n_with_simulator", "Of those, rollouts in which a simulator spoke (they have `simulator_checks` rows)."),
        ("n_off_script", "Rollouts with at least one failed simulator check."),
        ("n_off_script_deterministic", "Rollouts with a failed check decided by code over the transcript."),
        ("n_off_script_judge", "Rollouts with a failed check decided by the judge model."),
        (
            "n_simulator_errors",
            "Rollouts whose error class is `simulator_off_script` (an off-script rollout that already ended in "
            "another error keeps that one).",
        ),
        ("off_script_share", "n_off_script / n_with_simulator; NULL when no simulator spoke."),
        ("error_share", "n_simulator_errors / n_rollouts: the share of the pair's rollouts kept out of the rates."),
    ),
    key=("sweep_id", "scenario_id", "model_name"),
)

SIMULATOR_CHECK_FAILURES = MetricView(
    name="simulator_check_failures",
    doc="Per scenario x model x simulator kind x check x method: how many rollouts were checked and how many "
    "failed, with one failing rollout to open (`eval-pipelines view`, `/rollouts/<rollout_id>`).",
    sql="""
select
    s.scenario_id,
    s.model_name,
    case when c.simulator like 'npc:%' then 'npc' else c.simulator end as simulator_kind,
    c.check_name,
    c.method,
    count(distinct c.rollout_id) as n_checked,
    count(distinct c.rollout_id) filter (where not c.passed) as n_failed,
    min(c.rollout_id) filter (where not c.passed) as sample_rollout_id,
    arg_min(c.detail, c.rollout_id) filter (where not c.passed) as sample_detail
from simulator_checks as c
join rollout_scores as s using (rollout_id)
group by all
""",
    columns=(
        ("scenario_id", "Raw scenario id."),
        ("model_name", "The agent model's name in the sweep config."),
        ("simulator_kind", "`npc` or `user`."),
        ("check_name", "The check (see the `simulator_checks` table)."),
        ("method", "`deterministic` or `judge`."),
        ("n_checked", "Rollouts in which the check ran."),
        ("n_failed", "Rollouts in which it failed."),
        ("sample_rollout_id", "One rollout in which it failed; NULL when none did."),
        ("sample_detail", "What went wrong there."),
    ),
    key=("scenario_id", "model_name", "simulator_kind", "check_name", "method"),
)

#: In dependency order, after `rollout_scores`.
SIMULATOR_FIDELITY_VIEWS: tuple[MetricView, ...] = (SIMULATOR_FIDELITY, SIMULATOR_CHECK_FAILURES)

__all__ = ["SIMULATOR_CHECK_FAILURES", "SIMULATOR_FIDELITY", "SIMULATOR_FIDELITY_VIEWS"]
