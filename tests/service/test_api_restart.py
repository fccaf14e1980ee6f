"""Kill the server (SIGKILL) in the middle of a run, restart it: nothing stays running, and the run resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.clients.evaluation import EvaluationClient, EvaluationClientSync
from eval_pipelines.lib.serving import free_port
from eval_pipelines.schemas.runs import Rollout, RolloutStatus, TerminationReason
from tests.service.eval_service_support import KEYS_ENV, WRITE_KEY, launch, scripted_model
from tests.support.scripted_llm import Script, text_reply

pytestmark = pytest.mark.slow


class ServerProcess:
    def __init__(self, data_dir: Path, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eval_pipelines.service.serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
                "--log-level",
                "warning",
            ],
            env={**os.environ, **KEYS_ENV},
        )
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, "the service exited during startup"
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the service did not start within 60s"
            time.sleep(0.1)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def processes() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for process in started:
        process.stop()


def test_killed_server_restarts_without_running_rollouts_and_the_run_resumes(
    tmp_path: Path, scripted: tuple[Script, str], processes: list[ServerProcess]
) -> None:
    script, model_url = scripted
    script.replies = [{"sleep": 1.5, "then": text_reply("done")}]  # slow enough to be killed mid-rollout
    data_dir, port = tmp_path / "data", free_port()
    request = launch(["email_ops_001", "email_ops_002"], scripted_model(model_url), rollout_count=2, max_parallel=2)

    first = ServerProcess(data_dir, port)
    processes.append(first)
    with EvaluationClientSync(EvaluationClient(first.url, WRITE_KEY)) as client:
        run_id = client.launch_run(request).run_id
        deadline = time.monotonic() + 60
        while client.get_run(run_id).running < 1:
            assert time.monotonic() < deadline, "no rollout started"
            time.sleep(0.05)
    first.kill()

    script.replies = [text_reply("done")]
    second = ServerProcess(data_dir, port)
    processes.append(second)
    with EvaluationClientSync(EvaluationClient(second.url, WRITE_KEY)) as client:
        after_restart = client.list_rollouts(run_id=run_id).rollouts
        assert all(r.status != RolloutStatus.RUNNING for r in after_restart)
        interrupted = [r for r in after_restart if r.termination_reason == TerminationReason.SERVER_RESTART.value]
        assert interrupted, "the rollouts running at the kill must be failed on restart"
        for rollout in interrupted:
            assert rollout.status == RolloutStatus.FAILED and rollout.result is not None
            assert "restarted" in rollout.result.message
        run = client.get_run(run_id)
        assert run.running == 0 and run.pending + run.failed + run.completed == 4

    # The pipeline's http backend resumes the run (the key came back with the request) and waits for it.
    finished: list[Rollout] = []
    backend = EvaluationBackend(EvaluationClientSync(EvaluationClient(second.url, WRITE_KEY)), poll_interval=0.1)
    try:
        done = backend.complete_run(run_id, request, timeout_seconds=60, progress=finished.append)
        assert (done.total, done.completed, done.failed) == (4, 4, 0)
        rollouts = backend.list_rollouts(run_id)
        assert {r.rollout_id for r in rollouts} == {r.rollout_id for r in after_restart}  # same slots, no new ones
        assert {r.rollout_id for r in finished} == {r.rollout_id for r in after_restart if r.status != "completed"}
        for rollout in rollouts:
            assert rollout.status == RolloutStatus.COMPLETED
            assert backend.get_artifacts(rollout.rollout_id).task_id == rollout.task_id
    finally:
        backend.close()
