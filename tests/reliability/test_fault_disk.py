"""The disk for artifacts cannot be written.

The tests run as root here, so `chmod 0o555` would stop nothing. Instead a path the pipeline must create is
made impossible without any privilege: a regular FILE sits where a folder must go (then every write below it
fails with NotADirectoryError), or a FOLDER sits where one rollout's artifact file must go (that one write fails
with IsADirectoryError). Both behave like a read-only or failing disk for exactly the paths chosen.

Two places are written: the service's artifact files (`<data>/service/artifacts/<run>/<rollout>.json.zst`, by the
executor; the pipeline reads them there, as it shares the local service's disk) and the Parquet files
(`<data>/warehouse/...`), by `run_and_collect`.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.runs import RolloutStatus, TerminationReason
from eval_pipelines.service.layout import rollout_artifacts_path, service_paths
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.sim.npc import SIM_NPC, sim_npc_persona
from tests.reliability.support_faults import ModelFactory
from tests.reliability.support_runs import (
    SCENARIO_ID,
    TARGET_TASK,
    TASK_IDS,
    collect,
    launch_request,
    model_config,
)


def _block(path: Path, *, as_file: bool) -> None:
    """Put a file where a folder must go (as_file) or a folder where a file must go."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if as_file:
        path.write_text("this is a file, so nothing can be created below it\n", encoding="utf-8")
    else:
        path.mkdir()


class GatedModel:
    """The simulated models, answering nothing until `opened` is set: a launched run waits at its first model
    call, so a test can act on the rollouts the launch created before any of them writes its artifacts."""

    def __init__(self, catalog: ScenarioCatalog) -> None:
        self.inner = create_sim_app(ReferenceBook.from_catalog(catalog), personas={SIM_NPC: sim_npc_persona})
        self.opened = threading.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            while not self.opened.is_set():
                await asyncio.sleep(0.01)
        await self.inner(scope, receive, send)


def test_one_unwritable_artifact_file_fails_only_that_rollout(
    backend: EvaluationBackend, catalog: ScenarioCatalog, data_dir: Path, serve: Any
) -> None:
    model = GatedModel(catalog)
    server = serve(model)
    request = launch_request(model_config(f"{server.url}/v1"))
    run_id = backend.launch_or_resume(request)  # the rollout ids exist from launch on, so one file can be blocked
    target = next(r for r in backend.list_rollouts(run_id) if r.task_id == TARGET_TASK)
    _block(rollout_artifacts_path(service_paths(data_dir)[1], run_id, target.rollout_id), as_file=False)
    model.opened.set()

    run = collect(backend, request, catalog.get(SCENARIO_ID), data_dir)  # finds the same run
    assert run.summary.run_id == run_id
    failed = run.rollouts[TARGET_TASK]
    assert (failed.status, failed.termination_reason) == (RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR)
    assert failed.result is not None and "artifacts" in failed.result.message
    for task_id in set(TASK_IDS) - {TARGET_TASK}:
        assert run.rollouts[task_id].status == RolloutStatus.COMPLETED
    rows = {t: found[0] for t, found in run.rows_by_task("rollouts").items()}
    assert {t: r["status"] for t, r in rows.items()} == {
        t: "failed" if t == TARGET_TASK else "completed" for t in TASK_IDS
    }


def test_unwritable_artifacts_folder_fails_every_rollout_with_a_reason(
    backend: EvaluationBackend, catalog: ScenarioCatalog, data_dir: Path
) -> None:
    _, artifacts_dir = service_paths(data_dir)
    _block(artifacts_dir, as_file=True)
    run = collect(backend, launch_request(model_config("sim://local")), catalog.get(SCENARIO_ID), data_dir)
    for task_id, rollout in run.rollouts.items():
        assert (rollout.status, rollout.termination_reason) == (
            RolloutStatus.FAILED,
            TerminationReason.INFRASTRUCTURE_ERROR,
        ), task_id
        assert rollout.result is not None and "artifacts" in rollout.result.message
    assert run.summary.by_status == {"failed": len(TASK_IDS)}


def test_unwritable_warehouse_loses_no_completed_rollout(
    faulty_model: ModelFactory,
    backend: EvaluationBackend,
    catalog: ScenarioCatalog,
    data_dir: Path,
) -> None:
    """The partition fails loudly, naming the path; the rollouts stay completed in the service; a re-run once the
    disk is back writes every row without running a single rollout (or model call) again."""
    recorder, server = faulty_model(None)
    request = launch_request(model_config(f"{server.url}/v1"))
    blocked = data_dir / "warehouse"
    _block(blocked, as_file=True)

    with pytest.raises(OSError) as raised:
        collect(backend, request, catalog.get(SCENARIO_ID), data_dir)
    assert str(blocked) in str(raised.value)
    run = backend.find_run(request.run_name or "")
    assert run is not None and run.total == len(TASK_IDS) and run.completed == len(TASK_IDS)
    calls = len(recorder.requests)
    assert calls > 0

    blocked.unlink()
    again = collect(backend, request, catalog.get(SCENARIO_ID), data_dir)
    assert again.summary.run_id == run.run_id
    assert len(recorder.requests) == calls, "a completed rollout was run again"
    assert again.summary.by_status == {"completed": len(TASK_IDS)}
    rows = again.rows_by_task("rollouts")
    assert set(rows) == set(TASK_IDS) and all(r[0]["success"] for r in rows.values())
    assert all(Path(r[0]["artifacts_path"]).is_file() for r in rows.values())
