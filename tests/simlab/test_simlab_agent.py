"""A SimLab-style agent through the engine, as written: duck-typed, sync, its own event loop for tool listing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutSpec
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.artifacts import META_STATE
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import RolloutStatus
from eval_pipelines.toolservers.admin import ToolServerAdmin

AISHA = "aisha.okafor@example.com"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def _examples_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the README runs it: `PYTHONPATH=examples`."""
    monkeypatch.syspath_prepend(str(EXAMPLES))


SCENARIO = ScenarioCatalog().get("email_ops:1.0.0")
TASK = SCENARIO.task("email_ops_001")


async def _execute(tool_host: Any, agent_path: str) -> Any:
    spec = RolloutSpec(
        rollout_id="ro_simlab",
        run_id="run_simlab",
        scenario_id=SCENARIO.scenario_id,
        task=TASK,
        model_config=ModelConfig(model="unused", api_key="k", base_url="http://127.0.0.1:9/v1"),
        tool_server_urls={"email": tool_host.base_url("email")},
        seed={"email": SCENARIO.seed_payload(TASK, "email")},
        verifiers_dir=None,
        timeout_seconds=30,
        agent_path=agent_path,
    )
    engine = RolloutEngine(ChatClientPool(), ToolServerAdmin())
    try:
        return await engine.execute(spec, None, None)
    finally:
        await engine.clients.aclose()
        await engine.admin.aclose()


async def test_a_sync_simlab_agent_lists_with_asyncio_run_and_calls_through_the_sync_wrapper(tool_host: Any) -> None:
    outcome = await _execute(tool_host, "simlab_agent:SimLabStyleMailer")
    assert outcome.status == RolloutStatus.COMPLETED, outcome.artifacts.error
    artifacts = outcome.artifacts
    assert artifacts.final_observation == "sent"
    # SimLab's call and result objects were recorded as this project's, so every reader gets its own shape
    [call] = artifacts.tool_calls
    assert (call.tool_server, call.tool_name, call.parameters["to"]) == ("email", "send_email", AISHA)
    assert isinstance(artifacts.tool_results[0].observation, str) and not artifacts.tool_results[0].is_error
    artifacts.model_dump_json()  # serialisable
    sent = artifacts.metadata[META_STATE]["email"]["final"]["emails"]
    assert any(e["subject"] == "Projector in Room 4B" and AISHA in e["to"] for e in sent.values())


async def test_an_async_simlab_agent_runs_too(tool_host: Any) -> None:
    outcome = await _execute(tool_host, "simlab_agent:AsyncSimLabStyleAgent")
    assert outcome.status == RolloutStatus.COMPLETED, outcome.artifacts.error
    count = int(outcome.artifacts.final_observation.split()[0])
    assert count > 5
