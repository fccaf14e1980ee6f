"""Rollouts over real HTTP: filters, 404s, artifacts while in progress, redaction, current_step."""

from __future__ import annotations

import asyncio

import pytest

from eval_pipelines.clients.errors import NotFound
from eval_pipelines.clients.evaluation import EvaluationClient
from eval_pipelines.schemas.runs import RolloutPhase, RolloutStatus
from tests.service.eval_service_support import SCENARIO, launch, scripted_model
from tests.support.scripted_llm import Script, text_reply, tool_call_reply


async def test_filters_by_scenario_task_run_and_status(client: EvaluationClient) -> None:
    one = await client.launch_run(launch(["email_ops_001", "email_ops_002"], rollout_count=2))
    two = await client.launch_run(launch(["email_ops_002"]))
    for run_id in (one.run_id, two.run_id):
        await client.wait_for_run(run_id, deadline_seconds=60, poll_interval=0.1)

    by_run = await client.list_rollouts(run_id=one.run_id)
    assert by_run.total == len(by_run.rollouts) == 4 and {r.run_id for r in by_run.rollouts} == {one.run_id}
    by_task = await client.list_rollouts(run_id=one.run_id, task_id="email_ops_002")
    assert by_task.total == 2 and {r.task_id for r in by_task.rollouts} == {"email_ops_002"}
    across_runs = await client.list_rollouts(scenario_id=SCENARIO, task_id="email_ops_002")
    assert {one.run_id, two.run_id} <= {r.run_id for r in across_runs.rollouts}
    completed = await client.list_rollouts(run_id=one.run_id, status=RolloutStatus.COMPLETED)
    assert completed.total == 4
    assert (await client.list_rollouts(run_id=one.run_id, status="failed")).total == 0
    assert (await client.list_rollouts(scenario_id="unknown:0")).total == 0

    rollout = await client.get_rollout(by_run.rollouts[0].rollout_id)
    assert rollout.rollout_id == by_run.rollouts[0].rollout_id and rollout.status == RolloutStatus.COMPLETED


async def test_unknown_rollout_is_404(client: EvaluationClient) -> None:
    with pytest.raises(NotFound):
        await client.get_rollout("ro_missing")
    with pytest.raises(NotFound):
        await client.get_artifacts("ro_missing")


async def test_artifacts_are_404_while_running_and_current_step_shows(
    client: EvaluationClient, scripted: tuple[Script, str]
) -> None:
    script, url = scripted
    script.replies = [
        tool_call_reply("email__list_emails", {}),
        {"sleep": 1.0, "then": text_reply("all done")},
    ]
    launched = await client.launch_run(launch(["email_ops_001"], scripted_model(url)))
    rollout_id = launched.rollouts[0].rollout_id
    for _ in range(600):
        rollout = await client.get_rollout(rollout_id)
        if rollout.current_step == 1:
            break
        await asyncio.sleep(0.02)
    assert rollout.status == RolloutStatus.RUNNING and rollout.phase == RolloutPhase.AGENT_RUNNING
    assert rollout.current_step == 1
    with pytest.raises(NotFound) as in_progress:
        await client.get_artifacts(rollout_id)
    assert "not available yet" in str(in_progress.value.detail)

    await client.wait_for_run(launched.run_id, deadline_seconds=60, poll_interval=0.05)
    done = await client.get_rollout(rollout_id)
    assert done.status == RolloutStatus.COMPLETED and done.current_step is None
    artifacts = (await client.get_artifacts(rollout_id)).artifacts
    assert artifacts.final_observation == "all done"


async def test_redact_tool_calls_removes_tool_traffic_from_messages(client: EvaluationClient) -> None:
    launched = await client.launch_run(launch(["email_ops_004"]))
    await client.wait_for_run(launched.run_id, deadline_seconds=60, poll_interval=0.1)
    rollout_id = launched.rollouts[0].rollout_id

    full = (await client.get_artifacts(rollout_id)).artifacts
    roles = [m["role"] for m in full.messages]
    assert "tool" in roles and any(m.get("tool_calls") for m in full.messages)

    redacted = await client.get_artifacts(rollout_id, redact_tool_calls=True)
    assert redacted.rollout_id == rollout_id
    messages = redacted.artifacts.messages
    assert messages and all(m["role"] != "tool" and "tool_calls" not in m for m in messages)
    assert [m for m in full.messages if m["role"] in ("system", "user")] == [
        m for m in messages if m["role"] in ("system", "user")
    ]
    assert messages[-1]["content"] == full.final_observation
