"""Run one task of a scenario on a local evaluation backend, as `POST /runs` would, and hand back its rollout."""

from __future__ import annotations

import uuid

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.schemas.runs import Rollout, RolloutStatus, RunLaunchRequest


def run_one_task(
    backend: EvaluationBackend,
    scenario_id: str,
    task_id: str,
    *,
    model: str = "sim-oracle",
    run_label: str = "run",
    timeout_seconds: float = 60,
) -> Rollout:
    """The single rollout of `task_id` under a simulated `model`, after asserting that it completed with a result
    (a run name unique to the call, so a test may run the same task again)."""
    request = RunLaunchRequest.model_validate(
        {
            "scenario_id": scenario_id,
            "task_ids": [task_id],
            "model_config": {"model": model, "base_url": "sim://local", "api_key": "x"},
            "run_name": f"{run_label}-{model}-{uuid.uuid4().hex[:8]}",
        }
    )
    run_id = backend.launch_or_resume(request)
    backend.complete_run(run_id, request, timeout_seconds=timeout_seconds)
    [rollout] = backend.list_rollouts(run_id)
    assert rollout.status == RolloutStatus.COMPLETED and rollout.result is not None
    return rollout
