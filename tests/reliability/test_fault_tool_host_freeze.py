"""A tool-server host that stops answering (SIGSTOP: the port still accepts, nothing answers) is found by its
health checks and replaced on the same socket: the rollouts it held end as tool_server errors, the later ones
succeed, and the frozen rollouts end when the host is replaced, not at their calls' timeout. (How much the
freeze costs in wall time is a figure for a benchmark, not a bound for this test: the bound here is only that no
rollout waited for a timeout, which is an order of magnitude away from what replacement costs.)"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.pipeline.steps import run_and_collect
from eval_pipelines.runtime.local import shared_runtime
from eval_pipelines.schemas.runs import ErrorClass, RunLaunchRequest
from eval_pipelines.warehouse.rows import RolloutContext
from eval_pipelines.warehouse.store import Warehouse
from tests.support.scripted_llm import slow_text_model

TASKS = [f"email_ops_{n:03d}" for n in range(1, 13)]
#: Per model reply: long enough that rollouts are in flight when the host freezes.
REPLY_SECONDS = 1.0
#: The run's own timeout: a frozen rollout that is not released by the monitor waits this long (or its tool
#: call's longer one), so finishing in half of it past the normal run's time means no rollout waited it out.
RUN_TIMEOUT_SECONDS = 60.0


@pytest.fixture
def slow_model() -> Iterator[str]:
    with slow_text_model(REPLY_SECONDS) as url:
        yield url


def _run(
    backend: EvaluationBackend, catalog: ScenarioCatalog, data_dir: Path, model_url: str, freeze_after: float | None
) -> tuple[float, list]:
    scenario = catalog.get("email_ops:1.0.0")
    request = RunLaunchRequest.model_validate(
        {
            "scenario_id": scenario.scenario_id,
            "task_ids": TASKS,
            "model_config": {"model": "slow", "base_url": model_url, "api_key": "k"},
            "max_parallel": 3,
            "run_name": f"freeze-{uuid.uuid4().hex[:8]}",
            "error_retries": 0,
        }
    )
    ctx = RolloutContext("freeze", request.run_name or "", "m", scenario.key, "m", is_simulated=False)
    if freeze_after is not None:
        pid = shared_runtime(catalog).tool_host_pid
        assert pid is not None
        threading.Thread(target=_freeze_when_running, args=(backend, request.run_name, pid, freeze_after)).start()
    started = time.monotonic()
    summary = run_and_collect(
        backend,
        request,
        ctx,
        scenario,
        Warehouse(data_dir / "warehouse"),
        data_dir / "traces",
        timeout_seconds=RUN_TIMEOUT_SECONDS,
    )
    return time.monotonic() - started, backend.list_rollouts(summary.run_id)


def _freeze_when_running(backend: EvaluationBackend, run_name: str | None, pid: int, after: float) -> None:
    """Stop the tool host `after` seconds once the run has rollouts running (they are then waiting on the slow
    model, and need the host again when it answers). A fixed delay from launch could fall before any rollout
    started on a slow machine, and then the new host served every one."""
    deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        run = backend.find_run(run_name or "")
        if run is not None and run.running:
            break
        time.sleep(0.05)
    time.sleep(after)
    os.kill(pid, signal.SIGSTOP)


@pytest.mark.slow
def test_a_frozen_tool_host_is_replaced_and_costs_only_its_rollouts(
    catalog: ScenarioCatalog, tmp_path: Path, slow_model: str, local_backend: Callable[..., EvaluationBackend]
) -> None:
    normal, healthy = _run(
        local_backend(tmp_path / "normal", catalog), catalog, tmp_path / "normal", slow_model, freeze_after=None
    )
    assert all(r.result is not None and r.result.error_class is None for r in healthy)
    frozen_pid = shared_runtime(catalog).tool_host_pid

    elapsed, rollouts = _run(
        local_backend(tmp_path / "frozen", catalog),
        catalog,
        tmp_path / "frozen",
        slow_model,
        freeze_after=REPLY_SECONDS * 0.5,
    )
    try:
        errors = [r for r in rollouts if r.result is not None and r.result.error_class is not None]
        assert errors, "the freeze hit no rollout"
        assert {r.result.error_class for r in errors if r.result} == {ErrorClass.TOOL_SERVER}
        later = [
            r for r in rollouts if r.started_at and errors and r.started_at > max(e.completed_at or "" for e in errors)
        ]
        assert later and all(r.result is not None and r.result.error_class is None for r in later), "nothing ran after"
        assert shared_runtime(catalog).tool_host_pid != frozen_pid, "the frozen host was not replaced"
        assert elapsed < normal + RUN_TIMEOUT_SECONDS / 2, f"{elapsed:.1f}s with a frozen host, {normal:.1f}s without"
    finally:
        if frozen_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(frozen_pid, signal.SIGKILL)
