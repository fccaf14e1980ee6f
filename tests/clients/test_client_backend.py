"""The sync client and the `http` pipeline backend against the real local service; the pipeline's steps give
the same tables on the `http` backend as on the embedded one."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.clients.errors import Conflict, NotFound
from eval_pipelines.clients.evaluation import EvaluationClient, EvaluationClientSync
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.pipeline.steps import run_and_collect, verify_partition
from eval_pipelines.schemas.runs import Rollout, RolloutList, RolloutStatus, RunLaunchRequest
from eval_pipelines.warehouse.rows import RolloutContext
from eval_pipelines.warehouse.store import Warehouse
from tests.service.eval_service_support import SCENARIO, WRITE_KEY, RunningService, launch
from tests.support.scripted_llm import slow_text_model


@pytest.fixture
def backend(eval_service: RunningService) -> Iterator[EvaluationBackend]:
    created = EvaluationBackend(EvaluationClientSync(EvaluationClient(eval_service.url, WRITE_KEY)), poll_interval=0.05)
    yield created
    created.close()


def test_sync_client_is_usable_from_several_threads(eval_service: RunningService) -> None:
    errors: list[BaseException] = []
    with EvaluationClientSync(EvaluationClient(eval_service.url, WRITE_KEY)) as client:
        assert "EvaluationClientSync" in repr(client) and WRITE_KEY not in repr(client)

        def read() -> None:
            try:
                for _ in range(5):
                    assert client.list_tasks(SCENARIO).scenario_id == SCENARIO
                    assert client.list_seed_data(SCENARIO).files
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        with pytest.raises(NotFound):
            client.get_run("run_missing")
    with pytest.raises(RuntimeError):
        client.list_scenarios()  # closed


def test_backend_launches_completes_and_relaunch_resumes(backend: EvaluationBackend) -> None:
    request = launch(["email_ops_001", "email_ops_002"], rollout_count=2, run_name=f"backend-{uuid.uuid4().hex}")
    run_id = backend.launch_or_resume(request)
    finished: list[Rollout] = []
    run = backend.complete_run(run_id, request, timeout_seconds=60, progress=finished.append)
    assert (run.total, run.completed) == (4, 4)
    assert sorted(r.rollout_id for r in finished) == sorted(r.rollout_id for r in backend.list_rollouts(run_id))
    found = backend.find_run(request.run_name or "")
    assert found is not None and found.run_id == run_id

    # The same partition again: the 409 is turned into a resume of the same run, nothing is duplicated.
    with pytest.raises(Conflict):
        backend.client.launch_run(request)
    assert backend.launch_or_resume(request) == run_id
    again: list[Rollout] = []
    rerun = backend.complete_run(run_id, request, timeout_seconds=60, progress=again.append)
    assert (rerun.total, rerun.completed) == (4, 4) and again == []
    rollouts = backend.list_rollouts(run_id)
    assert all(r.status == RolloutStatus.COMPLETED for r in rollouts)
    assert backend.get_artifacts(rollouts[0].rollout_id).task_id == rollouts[0].task_id
    assert backend.find_run(f"never-{uuid.uuid4().hex}") is None


def test_progress_hears_of_each_rollout_once_asking_only_for_what_finished_since(
    backend: EvaluationBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a run goes on, each listing asks for the rollouts completed since the newest one seen (less a
    margin), not for the whole run again; the listing after the run finished reads it all, a page at a time."""
    monkeypatch.setattr("eval_pipelines.clients.backend.PROGRESS_LIST_SECONDS", 0.0)
    monkeypatch.setattr("eval_pipelines.clients.backend.PAGE_SIZE", 2)
    asked: list[dict[str, object]] = []
    listed = backend.client.list_rollouts

    def spy(**kwargs: object) -> object:
        asked.append(kwargs)
        return listed(**kwargs)

    monkeypatch.setattr(backend.client, "list_rollouts", spy)
    finished: list[Rollout] = []
    # One rollout at a time, each waiting 0.2 s on its model: completions are far apart next to the 0.05 s polls,
    # so listings happen between them whatever the machine's speed.
    with slow_text_model(0.2) as url:
        model = {"model": "scripted", "base_url": url, "api_key": "scripted-key-123456"}
        request = launch(["email_ops_001", "email_ops_002", "email_ops_003"], model, rollout_count=2,
                         max_parallel=1, run_name=f"since-{uuid.uuid4().hex}")  # fmt: skip
        run_id = backend.launch_or_resume(request)
        run = backend.complete_run(run_id, request, timeout_seconds=60, progress=finished.append)

    assert run.total == 6 and run.pending == run.running == 0
    assert sorted(r.rollout_id for r in finished) == sorted(r.rollout_id for r in listed(run_id=run_id).rollouts)
    since = [a["completed_after"] for a in asked if a.get("completed_after")]
    assert since, "no listing during the run asked for the newly completed rollouts only"
    assert all(a["limit"] == 2 for a in asked)  # every listing is paged
    assert all(a["status_events"] is False for a in asked)  # nothing here reads a rollout's history
    assert asked[-1].get("completed_after") is None  # the last one reads the whole finished run


def test_completion_times_in_another_form_mean_listing_the_whole_run_not_a_crash(
    backend: EvaluationBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service we did not write may give times without an offset, or not in ISO 8601 at all: the client then
    asks without the filter (which such a service would not know anyway) and still reports every rollout."""
    monkeypatch.setattr("eval_pipelines.clients.backend.PROGRESS_LIST_SECONDS", 0.0)
    asked: list[object] = []
    listed = backend.client.list_rollouts
    forms = iter(["2026-11-26 01:00:00", "yesterday"] * 100)

    def other_service(**kwargs: object) -> RolloutList:
        asked.append(kwargs.get("completed_after"))
        answer = listed(**kwargs)
        for rollout in answer.rollouts:
            if rollout.completed_at:
                rollout.completed_at = next(forms)  # naive, then not a time at all
        return answer

    monkeypatch.setattr(backend.client, "list_rollouts", other_service)
    request = launch(["email_ops_001", "email_ops_002"], rollout_count=2, max_parallel=1,
                     run_name=f"forms-{uuid.uuid4().hex}")  # fmt: skip
    run_id = backend.launch_or_resume(request)
    finished: list[Rollout] = []
    run = backend.complete_run(run_id, request, timeout_seconds=60, progress=finished.append)

    assert run.completed == 4
    assert len(finished) == 4 and len({r.rollout_id for r in finished}) == 4
    assert asked and all(since is None for since in asked)


def _collect(backend: object, request: RunLaunchRequest, root: Path, name: str) -> tuple[Path, int]:
    scenario = ScenarioCatalog().get(SCENARIO)
    ctx = RolloutContext(
        sweep_id="sweep-test",
        run_name=request.run_name or "",
        model_key="sim-oracle",
        scenario_key=scenario.key,
        model_name="sim-oracle",
        is_simulated=True,
        base_url="sim://local",
    )
    warehouse = Warehouse(root / name / "warehouse")
    summary = run_and_collect(
        backend,  # type: ignore[arg-type]
        request,
        ctx,
        scenario,
        warehouse,
        root / name / "traces",
        timeout_seconds=60,
    )
    verified = verify_partition(warehouse, scenario, ctx.model_key, ctx.scenario_key)
    assert verified.rollouts_verified == summary.rollouts and verified.passed == summary.rollouts
    return warehouse.table_dir("rollouts"), summary.rollouts


def test_pipeline_steps_write_the_same_tables_on_http_and_embedded(
    backend: EvaluationBackend, tmp_path: Path, local_backend: Callable[..., EvaluationBackend]
) -> None:
    request = launch(["email_ops_001", "email_ops_003"], rollout_count=2, run_name=f"pipe-{uuid.uuid4().hex}")
    over_http, http_rows = _collect(backend, request, tmp_path, "http")
    embedded = local_backend(tmp_path / "embedded-data")
    in_process, embedded_rows = _collect(embedded, request, tmp_path, "embedded")
    assert http_rows == embedded_rows == 4
    http_table = pq.read_table(next(over_http.rglob("*.parquet")))
    embedded_table = pq.read_table(next(in_process.rglob("*.parquet")))
    assert http_table.schema.equals(embedded_table.schema)
    assert sorted(http_table.column("task_id").to_pylist()) == sorted(embedded_table.column("task_id").to_pylist())
    assert all(http_table.column("success").to_pylist())
