"""How a rollout tells a simulated model which task it plays: `<rollout id>#task=<scenario id>/<task id>` in the
request's `user` field. Benchmarks hold tasks whose first message is the same (BFCL's categories share questions,
and some entries within one), so the text alone cannot tell the sims which gold to play; only simulated models are
sent the mark. A module of its own so the rollout engine reads it without importing the simulated endpoint's web
app (FastAPI), which a rollout worker process never serves."""

from __future__ import annotations

TASK_MARK = "#task="


def simulated_request_tag(rollout_id: str, scenario_id: str, task_id: str) -> str:
    """The `user` value a rollout sends a simulated model: its id, and the task it plays."""
    return f"{rollout_id}{TASK_MARK}{scenario_id}/{task_id}"


def marked_task(user: str | None) -> tuple[str, str] | None:
    """(scenario id, task id) from a `user` value `simulated_request_tag` made; None for any other value."""
    if not user or TASK_MARK not in user:
        return None
    scenario_id, _, task_id = user.rpartition(TASK_MARK)[2].rpartition("/")
    return (scenario_id, task_id) if scenario_id and task_id else None
