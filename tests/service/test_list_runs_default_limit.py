"""Spec 000: `GET /runs` without `limit` answers at most 50 runs (the default), with `total` counting them all."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx

from eval_pipelines.schemas.model_config import ModelConfigEcho
from tests.service.eval_service_support import WRITE_KEY, running_service

#: More runs than one default page holds.
STORED_RUNS = 60


def test_list_runs_without_limit_answers_the_default_page(tmp_path: Path) -> None:
    with running_service(tmp_path) as running:
        scenario = f"listing-{uuid.uuid4().hex[:8]}:1.0.0"
        for index in range(STORED_RUNS):  # straight into the store: no rollout needs to run to be listed
            running.service.store.create_run(
                run_id=f"run_{index:03d}",
                run_name=None,
                scenario_id=scenario,
                source="rl-gym",
                request={},
                model_config=ModelConfigEcho(model="m"),
                rollouts=[],
            )
        with httpx.Client(base_url=running.url, headers={"API-Key": WRITE_KEY}, timeout=30) as http:
            page = http.get("/runs").json()
            explicit = http.get("/runs", params={"limit": 200}).json()
    assert page["total"] == STORED_RUNS
    assert len(page["runs"]) == 50  # the spec's default, not the constant: a changed default must fail here
    assert len(explicit["runs"]) == STORED_RUNS
