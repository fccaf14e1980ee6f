"""Is a sweep's result usable? The share of rollouts per model x scenario that ended in an *error* (an endpoint,
a tool server, an NPC model, a verifier: anything but the agent) against the sweep's `error_threshold`.

Both the CLI (one line per broken pair, then a non-zero exit) and the `verification` asset check read it here,
so an outage can never pass for a model's skill on either path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipelines.schemas.runs import MSG_AGENT_FAILED, TERMINAL_STATUSES, ErrorClass
from eval_pipelines.warehouse.catalog import connect_read_only
from eval_pipelines.warehouse.store import Warehouse, read_rows

#: Between a model and a scenario in the lines a person reads (the multiplication sign, as in the README).
PAIR_SIGN = "\u00d7"
#: Characters of the sample reason printed beside an error count.
SAMPLE_REASON_CHARS = 160
_AGENT_FAILED_PREFIX = MSG_AGENT_FAILED.split("{", 1)[0]


def _short_reason(text: str | None) -> str:
    reason = " ".join((text or "no reason recorded").split())
    reason = reason.removeprefix(_AGENT_FAILED_PREFIX)
    return reason if len(reason) <= SAMPLE_REASON_CHARS else reason[: SAMPLE_REASON_CHARS - 1] + "…"


@dataclass(frozen=True)
class ErrorShare:
    """Errors of one model x scenario in one sweep, with the most frequent class and one of its reasons."""

    model_name: str
    scenario_id: str
    n_errors: int
    n_finished: int
    error_class: str | None
    sample_reason: str | None

    @property
    def share(self) -> float:
        return self.n_errors / self.n_finished if self.n_finished else 0.0

    def exceeds(self, threshold: float) -> bool:
        return self.n_errors > 0 and self.share > threshold

    def line(self) -> str:
        """`qwen-local x email_ops:1.0.0: 12/12 errors (model_endpoint: connection refused at ...)`."""
        return (
            f"{self.model_name} {PAIR_SIGN} {self.scenario_id}: {self.n_errors}/{self.n_finished} errors "
            f"({self.error_class}: {_short_reason(self.sample_reason)})"
        )


def error_share_check(share: ErrorShare | None, threshold: float) -> tuple[bool, str, dict[str, Any]]:
    """The `errors_below_threshold` check of a partition (`share`: its errors, None when no rollout finished):
    whether it passes, its description and the metadata it records. One home for the asset check and `reverify`."""
    if share is None:
        return True, "no finished rollout", {"errors": 0}
    return (
        not share.exceeds(threshold),
        share.line() if share.n_errors else f"{share.n_finished} rollouts, no error",
        {
            "errors": share.n_errors,
            "finished": share.n_finished,
            "error_share": round(share.share, 4),
            "threshold": threshold,
            "error_class": share.error_class or "-",
        },
    )


#: Where an error's reason is stored: a rollout that failed has it in `rollouts.error`; one that completed and is an
#: error all the same (an NPC model that failed, a verifier that gave no verdict) only in its final attempt's message,
#: and a verifier error the pipeline's own verification found only in that verdict's message.
_SWEEP_ERRORS_SQL = """
with broken_verdicts as (
    select rollout_id, arg_min(verifier || ': ' || coalesce(message, 'no message'), verifier) as reason
    from verifications_latest
    where kind = 'programmatic' and coalesce(is_error, false)
    group by rollout_id
),
final_attempts as (
    select rollout_id, any_value(message) as reason
    from rollout_attempts
    where is_final
    group by rollout_id
),
finished as (
    select
        s.model_name,
        s.scenario_id,
        s.outcome,
        s.error_class,
        case
            when s.error_class = 'verifier' then coalesce(v.reason, a.reason)
            else coalesce(r.error, a.reason)
        end as error,
        r.completed_at
    from rollout_scores as s
    join rollouts as r using (rollout_id)
    left join broken_verdicts as v using (rollout_id)
    left join final_attempts as a using (rollout_id)
    where s.sweep_id = ? and s.status not in ('pending', 'running')
),
classes as (
    select
        model_name,
        scenario_id,
        error_class,
        arg_min(error, completed_at) filter (where error is not null) as sample_reason,
        row_number() over (partition by model_name, scenario_id order by count(*) desc, error_class) as rank
    from finished
    where outcome = 'error'
    group by model_name, scenario_id, error_class
)
select
    f.model_name,
    f.scenario_id,
    count(*) filter (where f.outcome = 'error') as n_errors,
    count(*) as n_finished,
    any_value(c.error_class) as error_class,
    any_value(c.sample_reason) as sample_reason
from finished as f
left join classes as c on c.model_name = f.model_name and c.scenario_id = f.scenario_id and c.rank = 1
group by f.model_name, f.scenario_id
order by f.scenario_id, f.model_name
"""


def sweep_error_shares(duckdb_path: Path, sweep_id: str) -> list[ErrorShare]:
    """Every model x scenario of the sweep with its error count, from the catalog (after `eval_catalog`)."""
    con = connect_read_only(duckdb_path)
    try:
        rows = con.execute(_SWEEP_ERRORS_SQL, [sweep_id]).fetchall()
    finally:
        con.close()
    return [ErrorShare(*row) for row in rows]


def broken_pairs(duckdb_path: Path, sweep_id: str, threshold: float) -> list[ErrorShare]:
    """The model x scenario pairs whose error share exceeds `threshold`: the sweep's numbers cannot be trusted."""
    return [share for share in sweep_error_shares(duckdb_path, sweep_id) if share.exceeds(threshold)]


def partition_error_share(
    warehouse: Warehouse,
    model_key: str,
    scenario_key: str,
    *,
    sweep_id: str | None,
    verification_files: Sequence[Path],
) -> ErrorShare | None:
    """Errors of one partition's rollouts of `sweep_id` (None: the partition's newest sweep), read from its Parquet
    files: the engine's error classes, except that a verifier error counts only while the current verifier version
    (`verification_files` are its verdicts) still gives no verdict. None when no rollout of the sweep finished."""
    sweep_id = sweep_id or warehouse.newest_sweep(model_key=model_key, scenario_key=scenario_key)
    if sweep_id is None:
        return None
    columns = ("rollout_id", "scenario_id", "model_name", "status", "error_class", "error")
    rows = warehouse.partition_rows(
        "rollouts", model_key=model_key, scenario_key=scenario_key, columns=columns, sweep_id=sweep_id
    )
    terminal = {status.value for status in TERMINAL_STATUSES}
    finished = [r for r in rows if r["status"] in terminal]
    if not finished:
        return None
    no_verdict = _rollouts_without_verdict(verification_files)
    final_messages = {
        row["rollout_id"]: row["message"]
        for row in warehouse.partition_rows(
            "rollout_attempts",
            model_key=model_key,
            scenario_key=scenario_key,
            columns=("rollout_id", "is_final", "message"),
            sweep_id=sweep_id,
        )
        if row["is_final"]
    }
    counts: dict[str, int] = {}
    samples: dict[str, str] = {}
    for row in finished:
        error_class = row["error_class"]
        if error_class == ErrorClass.VERIFIER.value or row["rollout_id"] in no_verdict:
            error_class = ErrorClass.VERIFIER.value if row["rollout_id"] in no_verdict else None
        if error_class is None:
            continue
        counts[error_class] = counts.get(error_class, 0) + 1
        # As `_SWEEP_ERRORS_SQL` finds it: the verdict's message, the rollout's error, its final attempt's message.
        stored = no_verdict.get(row["rollout_id"]) or row["error"] or final_messages.get(row["rollout_id"])
        if stored and error_class not in samples:
            samples[error_class] = stored
    top = min(counts, key=lambda c: (-counts[c], c)) if counts else None
    return ErrorShare(
        model_name=finished[0]["model_name"],
        scenario_id=finished[0]["scenario_id"],
        n_errors=sum(counts.values()),
        n_finished=len(finished),
        error_class=top,
        sample_reason=samples.get(top) if top else None,
    )


def _rollouts_without_verdict(files: Sequence[Path]) -> dict[str, str]:
    """Rollouts some verifier gave no verdict on, each with the first such verifier's message."""
    broken: dict[str, str] = {}
    for path in files:
        # A file written before `is_error` existed reads it as None: no verifier error there.
        rows = read_rows([path], ["rollout_id", "verifier", "is_error", "message"])
        for row in sorted(rows, key=lambda r: r["verifier"]):
            if row["is_error"]:
                broken.setdefault(row["rollout_id"], f"{row['verifier']}: {row['message'] or 'no message'}")
    return broken
