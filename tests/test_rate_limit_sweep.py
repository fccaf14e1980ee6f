"""A sweep against a model endpoint that answers a burst with 429 + Retry-After: no rollout is lost, and the
chat client's concurrency visibly drops and recovers (the limiter's log lines, which Dagster also records)."""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import JSONResponse

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.runs import RolloutStatus, RunLaunchRequest
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app

BURST = 12


class BurstOf429:
    """The simulated models behind a provider that rate-limits the first BURST chat requests."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            self.calls += 1
            if self.calls <= BURST:
                response = JSONResponse(
                    {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                    status_code=429,
                    headers={"Retry-After": "0.2"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def test_a_429_burst_loses_no_rollout_and_concurrency_recovers(
    serve: Any, caplog: pytest.LogCaptureFixture, local_backend: Callable[..., EvaluationBackend]
) -> None:
    catalog = ScenarioCatalog()
    provider = BurstOf429(create_sim_app(ReferenceBook.from_catalog(catalog)))
    server = serve(provider)
    scenario = catalog.get("email_ops:1.0.0")
    service = local_backend(Path(tempfile.mkdtemp()), catalog)
    request = RunLaunchRequest.model_validate(
        {
            "scenario_id": scenario.scenario_id,
            "task_ids": list(scenario.tasks()),
            "rollout_count": 2,
            "max_parallel": 8,
            "run_name": "rate-limited",
            "model_config": {"model": "sim-oracle", "base_url": f"{server.url}/v1", "api_key": "k"},
        }
    )
    caplog.set_level(logging.INFO, logger="eval_pipelines.llm.limiter")
    run_id = service.launch_or_resume(request)
    run = service.complete_run(run_id, request, timeout_seconds=120)
    rollouts = service.list_rollouts(run_id)

    assert provider.calls > BURST
    assert run.total == 24 and run.completed == 24 and run.failed == 0  # zero lost rollouts
    assert all(r.status == RolloutStatus.COMPLETED and r.result and r.result.success for r in rollouts)
    changes = [
        (int(m.group(1)), int(m.group(2)))
        for record in caplog.records
        if (m := re.search(r"concurrency (\d+) -> (\d+)", record.getMessage()))
    ]
    drops = [c for c in changes if c[1] < c[0]]
    rises = [c for c in changes if c[1] > c[0]]
    assert drops, "the limiter never lowered its concurrency"
    assert rises and changes.index(rises[-1]) > changes.index(drops[0]), "it never recovered after dropping"
