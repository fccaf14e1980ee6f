"""Runs over real HTTP: launch validation, lifecycle, list filters, cancel, delete, resume, 503."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from pathlib import Path

import httpx
import pytest

from eval_pipelines.clients.errors import (
    BadRequest,
    Conflict,
    NotFound,
    ServiceUnavailable,
    ValidationFailed,
)
from eval_pipelines.clients.evaluation import EvaluationClient
from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.runs import RolloutStatus, TerminationReason
from tests.service.eval_service_support import (
    SCENARIO,
    SIM_ORACLE,
    WRITE_KEY,
    RunningService,
    launch,
    running_service,
    scripted_model,
)
from tests.support.scripted_llm import Script, text_reply
from tests.support.stored_files import plain_bytes

TASKS = ["email_ops_001", "email_ops_002", "email_ops_003"]
PHASES_IN_ORDER = [
    "pending",
    "running",
    "phase:building_environment",
    "phase:seeding",
    "phase:agent_running",
    "phase:verifying",
    "phase:completed",
    "completed",
]


def _collapsed(statuses: list[str]) -> list[str]:
    """One entry per phase: `phase:agent_running` repeats once per agent step."""
    out: list[str] = []
    for status in statuses:
        if not out or out[-1] != status:
            out.append(status)
    return out


async def test_run_goes_pending_running_completed_with_phases_and_artifacts(client: EvaluationClient) -> None:
    launched = await client.launch_run(launch(TASKS, rollout_count=3, run_name=f"lifecycle-{uuid.uuid4().hex}"))
    assert launched.run_status.total == 9 and len(launched.rollouts) == 9
    assert {r.status for r in launched.rollouts} == {RolloutStatus.PENDING}
    assert sorted({r.task_id for r in launched.rollouts}) == TASKS

    seen: list[tuple[int, int, int]] = []
    run = await client.wait_for_run(
        launched.run_id,
        deadline_seconds=120,
        poll_interval=0.05,
        on_update=lambda r: seen.append((r.pending, r.running, r.completed)),
    )
    assert (run.total, run.completed, run.failed, run.pending, run.running) == (9, 9, 0, 0, 0)
    assert seen[0][2] < 9  # the run was observed before it completed

    rollouts = (await client.list_rollouts(run_id=launched.run_id)).rollouts
    assert len(rollouts) == 9
    for rollout in rollouts:
        statuses = [e.status for e in rollout.status_events]
        assert _collapsed(statuses) == PHASES_IN_ORDER, statuses
        assert rollout.started_at and rollout.completed_at and rollout.phase == "completed"
        assert rollout.result is not None and rollout.result.success and rollout.result.reward == 1.0
        assert rollout.result.verifiers and rollout.result.steps_taken >= 1
        assert rollout.termination_reason == TerminationReason.FINAL_RESPONSE.value
        assert rollout.model_config_ is not None and rollout.model_config_.model == "sim-oracle"
        artifacts = (await client.get_artifacts(rollout.rollout_id)).artifacts
        assert isinstance(artifacts, RunArtifacts)
        RunArtifacts.model_validate(artifacts.model_dump(mode="json"))
        assert artifacts.task_id == rollout.task_id and artifacts.tool_calls


async def test_a_finished_run_leaves_its_rows_in_the_store_and_no_write_ahead_log(
    client: EvaluationClient, eval_service: RunningService
) -> None:
    """Every rollout writes a few transactions of whole pages to SQLite's log; a finished run checkpoints it,
    so what a run leaves on disk is its rows, not a log of up to 4 MB."""
    launched = await client.launch_run(launch(TASKS, rollout_count=2, run_name=f"wal-{uuid.uuid4().hex}"))
    run = await client.wait_for_run(launched.run_id, deadline_seconds=120, poll_interval=0.05)
    assert run.completed == 6
    wal = eval_service.service.store.path.with_name(eval_service.service.store.path.name + "-wal")
    # The checkpoint follows the last rollout's status by a moment: the run reads done before it happened.
    for _ in range(100):
        if wal.stat().st_size == 0:
            break
        await asyncio.sleep(0.05)
    assert wal.stat().st_size == 0
    rollouts = (await client.list_rollouts(run_id=launched.run_id)).rollouts
    assert [r.status for r in rollouts] == [RolloutStatus.COMPLETED] * 6


async def test_rollouts_completed_after_a_time_are_listed_alone(client: EvaluationClient) -> None:
    launched = await client.launch_run(launch(TASKS, rollout_count=2, run_name=f"since-{uuid.uuid4().hex}"))
    await client.wait_for_run(launched.run_id, deadline_seconds=120, poll_interval=0.05)
    every = (await client.list_rollouts(run_id=launched.run_id)).rollouts
    times = sorted(r.completed_at or "" for r in every)
    middle = times[3]

    later = await client.list_rollouts(run_id=launched.run_id, completed_after=middle, limit=10)

    expected = {r.rollout_id for r in every if (r.completed_at or "") >= middle}
    assert {r.rollout_id for r in later.rollouts} == expected and later.total == len(expected)
    assert 0 < len(expected) < 6
    # Another offset names the same instant.
    shifted = dt.datetime.fromisoformat(middle).astimezone(dt.timezone(dt.timedelta(hours=2))).isoformat()
    again = await client.list_rollouts(run_id=launched.run_id, completed_after=shifted)
    assert {r.rollout_id for r in again.rollouts} == expected
    with pytest.raises(ValidationFailed, match="completed_after"):
        await client.list_rollouts(run_id=launched.run_id, completed_after="2026-01-01T00:00:00")  # no offset


async def test_a_listing_without_status_events_leaves_only_the_history_out(client: EvaluationClient) -> None:
    launched = await client.launch_run(launch(TASKS[:2], run_name=f"history-{uuid.uuid4().hex}"))
    await client.wait_for_run(launched.run_id, deadline_seconds=120, poll_interval=0.05)

    full = (await client.list_rollouts(run_id=launched.run_id)).rollouts
    light = (await client.list_rollouts(run_id=launched.run_id, status_events=False)).rollouts

    assert all(len(r.status_events) >= 3 for r in full)
    assert all(r.status_events == [] for r in light)
    assert [r.model_copy(update={"status_events": []}) for r in full] == light


async def test_rollout_json_never_carries_the_api_key(eval_service: RunningService) -> None:
    secret = "sk-never-echo-this-key-0123456789"
    body = {"scenario_id": SCENARIO, "task_ids": ["email_ops_001"], "model_config": {**SIM_ORACLE, "api_key": secret}}
    async with httpx.AsyncClient(base_url=eval_service.url, headers={"API-Key": WRITE_KEY}, timeout=30) as http:
        launched = (await http.post("/runs", json=body)).json()
        listed = await http.get("/rollouts", params={"run_id": launched["run_id"]})
        assert secret not in listed.text and "api_key" not in listed.text
        assert "model_config" in listed.json()["rollouts"][0]
        # A validation error must not echo the body (the default FastAPI 422 would include the key).
        bad = await http.post("/runs", json={**body, "task_overrides": {"other": {}}})
        assert bad.status_code == 422 and secret not in bad.text
        assert {"loc", "msg", "type"} <= set(bad.json()["detail"][0])


async def test_launch_validation_status_codes(client: EvaluationClient) -> None:
    with pytest.raises(NotFound) as unknown_scenario:
        await client.launch_run(launch(["t"], scenario_id="nope:1.0.0"))
    assert "nope:1.0.0" in str(unknown_scenario.value.detail)
    with pytest.raises(BadRequest) as unknown_task:
        await client.launch_run(launch(["email_ops_001", "no_such_task"]))
    assert "no_such_task" in str(unknown_task.value.detail)
    with pytest.raises(BadRequest):  # a task_json override that is not a task
        await client.launch_run(launch(["email_ops_001"], task_overrides={"email_ops_001": {"task_json": {"x": 1}}}))
    with pytest.raises(BadRequest):
        await client.launch_run(launch(["email_ops_001"], model_config={**SIM_ORACLE, "base_url": "ftp://x"}))


@pytest.mark.parametrize("seed", ["/etc/hostname", "../../../etc/hostname", "inbox/../../template.json"])
async def test_an_override_naming_a_seed_outside_the_scenario_is_400_at_launch(
    client: EvaluationClient, seed: str
) -> None:
    """Not a retried tool-server error at provisioning: the launch itself is refused, naming the field."""
    task_json = {"name": "n", "description": "d", "seed_data": {"email": [seed]}}
    with pytest.raises(BadRequest) as refused:
        await client.launch_run(launch(["email_ops_001"], task_overrides={"email_ops_001": {"task_json": task_json}}))
    detail = str(refused.value.detail)
    assert "task_overrides.email_ops_001.task_json.seed_data.email[0]" in detail and "is not inside" in detail


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"task_ids": []}, "task_ids"),
        ({"rollout_count": 0}, "rollout_count"),
        ({"task_overrides": {"email_ops_002": {"name": "x"}}}, "task_overrides"),
        ({"model_config": {**SIM_ORACLE, "temperature": 2.5}}, "temperature"),
        ({"model_config": {**SIM_ORACLE, "max_steps": 0}}, "max_steps"),
        ({"model_config": {**SIM_ORACLE, "context_stride": 0}}, "context_stride"),
        ({"model_config": {"model": "m", "base_url": "sim://local"}}, "api_key"),
    ],
)
async def test_launch_rejects_out_of_range_fields_with_422(
    eval_service: RunningService, change: dict[str, object], field: str
) -> None:
    body = {"scenario_id": SCENARIO, "task_ids": ["email_ops_001"], "model_config": SIM_ORACLE, **change}
    async with httpx.AsyncClient(base_url=eval_service.url, headers={"API-Key": WRITE_KEY}, timeout=30) as http:
        response = await http.post("/runs", json=body)
    assert response.status_code == 422
    errors = response.json()["detail"]
    assert any(field in [str(p) for p in e["loc"]] or field in e["msg"] for e in errors), errors


async def test_duplicate_run_name_is_409_naming_the_run(client: EvaluationClient) -> None:
    name = f"dup-{uuid.uuid4().hex}"
    first = await client.launch_run(launch(["email_ops_001"], run_name=name))
    with pytest.raises(Conflict) as conflict:
        await client.launch_run(launch(["email_ops_002"], run_name=name))
    assert conflict.value.status == 409 and first.run_id in str(conflict.value.detail)
    assert conflict.value.existing_run_id == first.run_id
    found = await client.find_run_by_name(name)
    assert found is not None and found.run_id == first.run_id
    await client.wait_for_run(first.run_id, deadline_seconds=60, poll_interval=0.1)


async def test_list_runs_filters_pages_and_expands(client: EvaluationClient) -> None:
    tag = uuid.uuid4().hex
    a = await client.launch_run(launch(["email_ops_001"], run_name=f"list-a-{tag}"))
    b = await client.launch_run(launch(["email_ops_001", "email_ops_002"], run_name=f"list-b-{tag}"))
    editor = await client.launch_run(launch(["email_ops_001"], run_name=f"list-c-{tag}", source="task-editor"))
    for run_id in (a.run_id, b.run_id, editor.run_id):
        await client.wait_for_run(run_id, deadline_seconds=60, poll_interval=0.1)

    default = await client.list_runs(scenario_id=SCENARIO, limit=200)
    ids = {r.run_id for r in default.runs}
    assert {a.run_id, b.run_id} <= ids and editor.run_id not in ids  # default source is rl-gym
    assert all(r.rollout_ids == [] for r in default.runs)
    everything = await client.list_runs(scenario_id=SCENARIO, source="all", limit=200)
    assert editor.run_id in {r.run_id for r in everything.runs} and everything.total == default.total + 1
    assert (await client.list_runs(source="task-editor", run_name=f"list-c-{tag}")).runs[0].run_id == editor.run_id
    assert (await client.list_runs(scenario_id="other:1.0.0")).total == 0

    page_one = await client.list_runs(source="all", limit=1, offset=0)
    page_two = await client.list_runs(source="all", limit=1, offset=1)
    assert len(page_one.runs) == len(page_two.runs) == 1 and page_one.runs[0].run_id != page_two.runs[0].run_id

    expanded = await client.list_runs(run_name=f"list-b-{tag}", expand_rollouts=True)
    assert len(expanded.runs[0].rollout_ids) == 2
    assert set(expanded.runs[0].rollout_ids) == {r.rollout_id for r in b.rollouts}


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 201}, {"offset": -1}, {"source": "bogus"}])
async def test_list_runs_rejects_bad_query_with_422(eval_service: RunningService, params: dict[str, object]) -> None:
    async with httpx.AsyncClient(base_url=eval_service.url, headers={"API-Key": WRITE_KEY}, timeout=30) as http:
        response = await http.get("/runs", params=params)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"][0] == "query"


async def test_unknown_run_is_404_everywhere(client: EvaluationClient) -> None:
    for call in (
        client.get_run("run_missing"),
        client.cancel_run("run_missing"),
        client.delete_run("run_missing"),
        client.resume_run("run_missing", launch(["x"]).model_config_),
    ):
        with pytest.raises(NotFound):
            await call


async def test_delete_removes_run_rollouts_and_artifacts(
    client: EvaluationClient, eval_service: RunningService
) -> None:
    launched = await client.launch_run(launch(["email_ops_001", "email_ops_002"], rollout_count=2))
    await client.wait_for_run(launched.run_id, deadline_seconds=60, poll_interval=0.1)
    artifacts_dir = eval_service.service.executor.artifacts_dir / launched.run_id
    assert artifacts_dir.is_dir()
    deleted = await client.delete_run(launched.run_id)
    assert (deleted.run_id, deleted.deleted_rollouts) == (launched.run_id, 4)
    with pytest.raises(NotFound):
        await client.get_run(launched.run_id)
    with pytest.raises(NotFound):
        await client.get_rollout(launched.rollouts[0].rollout_id)
    assert (await client.list_rollouts(run_id=launched.run_id)).total == 0
    assert not artifacts_dir.exists()


async def _wait_until(predicate_coro: object, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        if await predicate_coro():  # type: ignore[operator]
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_cancel_mid_run_counts_add_up_and_keeps_completed_results(
    client: EvaluationClient, scripted: tuple[Script, str]
) -> None:
    script, url = scripted
    # Every model call takes a while, so the run is caught with rollouts completed, running and pending.
    script.replies = [{"sleep": 0.6, "then": text_reply("done")}]
    launched = await client.launch_run(launch(TASKS, scripted_model(url), rollout_count=2, max_parallel=2))
    run_id = launched.run_id

    async def some_completed_and_more_running() -> bool:
        run = await client.get_run(run_id)
        return run.completed >= 1 and run.running >= 1 and run.pending >= 1

    await _wait_until(some_completed_and_more_running)
    before = {r.rollout_id: r for r in (await client.list_rollouts(run_id=run_id, status="completed")).rollouts}
    cancelled = await client.cancel_run(run_id)
    assert cancelled.run_id == run_id and cancelled.cancelled_rollouts >= 2

    run = await client.wait_for_run(run_id, deadline_seconds=60, poll_interval=0.05)
    rollouts = (await client.list_rollouts(run_id=run_id)).rollouts
    assert run.total == 6 == run.completed + run.failed and run.pending == run.running == 0
    assert all(r.status != RolloutStatus.RUNNING for r in rollouts)
    cancelled_rollouts = [r for r in rollouts if r.termination_reason == TerminationReason.CANCELLED.value]
    assert len(cancelled_rollouts) == cancelled.cancelled_rollouts
    for rollout in cancelled_rollouts:
        assert rollout.status == RolloutStatus.FAILED and rollout.result is not None
        assert rollout.result.message == "Cancelled"
    never_started = [r for r in cancelled_rollouts if "running" not in [e.status for e in r.status_events]]
    assert never_started, "pending rollouts must be cancelled without ever starting"
    for rollout_id, earlier in before.items():
        now = next(r for r in rollouts if r.rollout_id == rollout_id)
        assert now.status == RolloutStatus.COMPLETED and now.result == earlier.result

    # Resuming re-runs exactly the cancelled slots; completed ones are not touched.
    script.replies = [text_reply("done")]
    resumed = await client.resume_run(run_id, launch(["x"], scripted_model(url)).model_config_)
    assert resumed.requeued_rollouts == len(cancelled_rollouts)
    final = await client.wait_for_run(run_id, deadline_seconds=60, poll_interval=0.05)
    assert (final.total, final.completed, final.failed) == (6, 6, 0)
    resumed_ids = {r.rollout_id for r in (await client.list_rollouts(run_id=run_id)).rollouts}
    assert resumed_ids == {r.rollout_id for r in rollouts}


async def test_resume_rejects_another_model_and_is_idempotent(client: EvaluationClient) -> None:
    launched = await client.launch_run(launch(["email_ops_001"]))
    await client.wait_for_run(launched.run_id, deadline_seconds=60, poll_interval=0.1)
    with pytest.raises(Conflict):
        await client.resume_run(launched.run_id, launch(["x"], {**SIM_ORACLE, "model": "sim-noop"}).model_config_)
    again = await client.resume_run(launched.run_id, launch(["x"]).model_config_)
    assert again.requeued_rollouts == 0 and not again.active and again.run_status.completed == 1


async def test_503_with_retry_after_when_full_or_draining(data_dir: Path, scripted: tuple[Script, str]) -> None:
    script, url = scripted
    script.replies = [{"sleep": 1.0, "then": text_reply("done")}]
    no_retry = RetryPolicy(max_attempts=1)
    with running_service(data_dir, max_active_runs=1, retry_after_seconds=1) as running:
        async with EvaluationClient(running.url, WRITE_KEY, retry=no_retry) as client:
            first = await client.launch_run(launch(["email_ops_001"], scripted_model(url)))
            with pytest.raises(ServiceUnavailable) as full:
                await client.launch_run(launch(["email_ops_002"], scripted_model(url)))
            assert full.value.status == 503 and full.value.retry_after == 1.0

            # A client that retries, honouring Retry-After, gets in once the first run is done.
            patient = RetryPolicy(max_attempts=30, base_delay=0.1, max_delay=2.0)
            async with EvaluationClient(running.url, WRITE_KEY, retry=patient) as retrying:
                second = await retrying.launch_run(launch(["email_ops_002"], scripted_model(url)))
            assert (await client.get_run(first.run_id)).is_finished
            await client.wait_for_run(second.run_id, deadline_seconds=60, poll_interval=0.1)

            running.service.begin_drain()
            with pytest.raises(ServiceUnavailable) as draining:
                await client.launch_run(launch(["email_ops_003"], scripted_model(url)))
            assert "shutting down" in str(draining.value.detail)
            assert (await client.health())["status"] == "draining"
            assert (await client.get_run(first.run_id)).completed == 1  # reads still work while draining


async def test_task_override_reaches_the_rollout(client: EvaluationClient) -> None:
    launched = await client.launch_run(
        launch(
            ["email_ops_001"],
            task_overrides={"email_ops_001": {"name": "renamed", "client_context": {"ticket": "T-1"}}},
        )
    )
    await client.wait_for_run(launched.run_id, deadline_seconds=60, poll_interval=0.1)
    artifacts = (await client.get_artifacts(launched.rollouts[0].rollout_id)).artifacts
    assert artifacts.metadata["client_context"] == {"ticket": "T-1"}


async def test_resuming_a_run_that_is_executing_changes_nothing(
    client: EvaluationClient, scripted: tuple[Script, str]
) -> None:
    script, url = scripted
    script.replies = [{"sleep": 0.3, "then": text_reply("done")}]
    config = launch(["x"], scripted_model(url)).model_config_
    launched = await client.launch_run(launch(["email_ops_001", "email_ops_002"], scripted_model(url)))
    resumed = await client.resume_run(launched.run_id, config)
    assert resumed.requeued_rollouts == 0 and resumed.active
    run = await client.wait_for_run(launched.run_id, deadline_seconds=60, poll_interval=0.05)
    assert (run.total, run.completed + run.failed) == (2, 2)
    events = [e.status for r in (await client.list_rollouts(run_id=launched.run_id)).rollouts for e in r.status_events]
    assert events.count("pending") == 2  # created once, never re-queued


async def test_a_credentialed_base_url_is_used_stored_redacted_and_resumes(
    data_dir: Path, scripted: tuple[Script, str]
) -> None:
    """Credentials in a base_url reach the endpoint, never the store or the echo; a resume with the same
    configuration is the same model (the comparison is made on the redacted URL the store keeps)."""
    _, url = scripted
    host = url.removeprefix("http://")
    secret_base = f"http://proxyuser:url-secret-4411@{host}/v1?key=query-secret-9922"
    config = {**scripted_model(url), "base_url": secret_base}
    with running_service(data_dir) as running:
        async with EvaluationClient(running.url, WRITE_KEY) as client:
            launched = await client.launch_run(launch(["email_ops_001"], config))
            run = await client.wait_for_run(launched.run_id, deadline_seconds=60, poll_interval=0.05)
            assert (run.completed, run.failed) == (1, 0)
            [rollout] = (await client.list_rollouts(run_id=launched.run_id)).rollouts
            echoed = rollout.model_config_.base_url if rollout.model_config_ else None
            assert echoed == f"http://{host}/v1"
            resumed = await client.resume_run(launched.run_id, launch(["x"], config).model_config_)
            assert resumed.requeued_rollouts == 0
    stored = b"".join(plain_bytes(p) for p in data_dir.rglob("*") if p.is_file())
    assert b"url-secret-4411" not in stored and b"query-secret-9922" not in stored


async def test_a_spec_minimal_model_config_is_launched_and_an_unroutable_one_is_a_400(
    eval_service: RunningService,
) -> None:
    """`{model, api_key}` takes the spec's defaults (provider custom, base_url null): a model name that names its
    provider is launched; one that names none is refused at launch with the field named, not in every rollout."""
    body = {"scenario_id": SCENARIO, "task_ids": ["email_ops_001"]}
    async with httpx.AsyncClient(base_url=eval_service.url, headers={"API-Key": WRITE_KEY}, timeout=30) as http:
        launched = await http.post("/runs", json={**body, "model_config": {"model": "gpt-4o-mini", "api_key": "k"}})
        assert launched.status_code == 200, launched.text
        run_id = launched.json()["run_id"]
        assert (await http.post(f"/runs/{run_id}/cancel")).status_code == 200
        unroutable = await http.post("/runs", json={**body, "model_config": {"model": "llama3.1", "api_key": "k"}})
    assert unroutable.status_code == 400
    assert "model_config.base_url" in unroutable.json()["detail"] and "llama3.1" in unroutable.json()["detail"]
