"""The evaluation client's transport behaviour: retries honouring Retry-After, no retry on other 4xx, typed
errors, key hygiene and the hosted product's variants.

The server here is a stand-in for the hosted service (a third party), scripted per test; the client is also
tested against the real local service in tests/service and test_client_backend.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from eval_pipelines.clients.errors import (
    BadRequest,
    Conflict,
    NotFound,
    RateLimited,
    ServiceConnectionError,
    ServiceUnavailable,
    UnexpectedResponse,
    ValidationFailed,
    WaitTimeout,
)
from eval_pipelines.clients.evaluation import EvaluationClient
from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.lib.serving import BackgroundServer, free_port
from tests.service.eval_service_support import launch

KEY = "sk-client-test-key-abcdef0123456789"
RUN = {"run_id": "run_1", "scenario_id": "email_ops:1.0.0", "total": 1, "pending": 1}


@dataclass
class Replies:
    """Per path: the (status, body, headers) answers in order; the last one repeats."""

    by_path: dict[str, list[tuple[int, Any, dict[str, str]]]] = field(default_factory=dict)
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    def count(self, path: str) -> int:
        return sum(1 for _, p, _ in self.seen if p == path)


@pytest.fixture
def stand_in() -> Iterator[tuple[Replies, str]]:
    replies = Replies()
    app = FastAPI()

    @app.api_route("/{path:path}", methods=["GET", "POST", "DELETE"])
    async def answer(path: str, request: Request) -> JSONResponse:
        full = "/" + path
        replies.seen.append((request.method, full, dict(request.headers)))
        queue = replies.by_path.get(full) or [(404, {"detail": "Not Found"}, {})]
        status, body, headers = queue.pop(0) if len(queue) > 1 else queue[0]
        return JSONResponse(body, status_code=status, headers=headers)

    with BackgroundServer(app) as server:
        yield replies, server.url


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def _client(url: str, sleep: RecordingSleep, attempts: int = 4) -> EvaluationClient:
    return EvaluationClient(url, KEY, retry=RetryPolicy(max_attempts=attempts, base_delay=0.01), sleep=sleep)


async def test_503_and_429_are_retried_honouring_retry_after(stand_in: tuple[Replies, str]) -> None:
    replies, url = stand_in
    replies.by_path["/runs/run_1"] = [
        (503, {"detail": "draining"}, {"Retry-After": "2"}),
        (429, {"detail": "slow down"}, {"Retry-After": "3"}),
        (200, RUN, {}),
    ]
    sleep = RecordingSleep()
    async with _client(url, sleep) as client:
        run = await client.get_run("run_1")
    assert run.run_id == "run_1" and replies.count("/runs/run_1") == 3
    assert sleep.delays == [2.0, 3.0]
    assert all(headers["api-key"] == KEY for _, _, headers in replies.seen)


async def test_retries_run_out_into_typed_errors(stand_in: tuple[Replies, str]) -> None:
    replies, url = stand_in
    replies.by_path["/runs/run_1"] = [(503, {"detail": "busy"}, {"Retry-After": "1"})]
    replies.by_path["/runs"] = [(429, {"detail": "too many"}, {"Retry-After": "1"})]
    sleep = RecordingSleep()
    async with _client(url, sleep, attempts=3) as client:
        with pytest.raises(ServiceUnavailable) as unavailable:
            await client.get_run("run_1")
        assert unavailable.value.status == 503 and unavailable.value.detail == "busy"
        assert unavailable.value.retry_after == 1.0 and replies.count("/runs/run_1") == 3
        with pytest.raises(RateLimited):
            await client.launch_run(launch(["email_ops_001"]))
        assert replies.count("/runs") == 3


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, BadRequest), (404, NotFound), (409, Conflict), (422, ValidationFailed)],
)
async def test_other_4xx_are_never_retried(stand_in: tuple[Replies, str], status: int, error: type[Exception]) -> None:
    replies, url = stand_in
    detail: Any = [{"loc": ["body"], "msg": "bad", "type": "x"}] if status == 422 else f"no ({status})"
    replies.by_path["/runs"] = [(status, {"detail": detail}, {"Retry-After": "1"})]
    sleep = RecordingSleep()
    async with _client(url, sleep) as client:
        with pytest.raises(error) as raised:
            await client.launch_run(launch(["email_ops_001"]))
    assert replies.count("/runs") == 1 and sleep.delays == []
    assert raised.value.status == status and raised.value.detail == detail  # type: ignore[attr-defined]
    assert "POST /runs" in str(raised.value)


async def test_connection_errors_are_retried_then_typed(stand_in: tuple[Replies, str]) -> None:
    sleep = RecordingSleep()
    async with _client(f"http://127.0.0.1:{free_port()}", sleep, attempts=3) as client:
        with pytest.raises(ServiceConnectionError) as unreachable:
            await client.list_scenarios()
    assert len(sleep.delays) == 2 and unreachable.value.status is None
    assert KEY not in str(unreachable.value) and KEY not in repr(client)


async def test_an_echoed_key_is_scrubbed_from_errors(stand_in: tuple[Replies, str]) -> None:
    replies, url = stand_in
    replies.by_path["/runs/run_1"] = [(400, {"detail": f"bad key {KEY}"}, {})]
    async with _client(url, RecordingSleep()) as client:
        with pytest.raises(BadRequest) as raised:
            await client.get_run("run_1")
    assert KEY not in str(raised.value) and KEY not in repr(raised.value) and "[REDACTED]" in str(raised.value)


async def test_hosted_variants_are_accepted(stand_in: tuple[Replies, str]) -> None:
    replies, url = stand_in
    template = {"scenario_id": "human_resource:1.0.0", "name": "HR", "extra_field": 1}
    replies.by_path["/scenarios"] = [(200, {"scenarios": [template]}, {})]
    rollout = {
        "rollout_id": "ro_1",
        "scenario_id": "human_resource:1.0.0",
        "task_id": "t1",
        "run_id": "run_1",
        "status": "completed",
        "model_config_data": {"model": "m", "provider": "openai", "log_prob": True, "context_stride": 5},
        "status_events": [{"status": "pending", "timestamp": "2026-01-01T00:00:00Z"}],
        "result": {"success": True, "message": "ok", "judge": {"verdict": "PASS"}},
    }
    replies.by_path["/rollouts/ro_1"] = [(200, rollout, {})]
    async with _client(f"{url}/v1/", RecordingSleep()) as client:  # a base_url ending in /v1 works too
        templates = await client.list_scenarios()
        got = await client.get_rollout("ro_1")
    assert templates[0].scenario_id == "human_resource:1.0.0"
    assert got.model_config_ is not None and got.model_config_.provider == "openai"
    assert got.model_config_.log_prob and got.model_config_.context_stride == 5
    assert got.status_events[0].detail is None


async def test_a_body_that_is_not_the_resource_is_unexpected(stand_in: tuple[Replies, str]) -> None:
    replies, url = stand_in
    replies.by_path["/runs/run_1"] = [(200, {"hello": "world"}, {})]
    async with _client(url, RecordingSleep()) as client:
        with pytest.raises(UnexpectedResponse):
            await client.get_run("run_1")


async def test_wait_for_run_gives_up_at_the_deadline(stand_in: tuple[Replies, str]) -> None:
    replies, url = stand_in
    replies.by_path["/runs/run_1"] = [(200, {**RUN, "running": 1, "pending": 0}, {})]
    sleep = RecordingSleep()
    async with _client(url, sleep) as client:
        with pytest.raises(WaitTimeout) as timeout:
            await client.wait_for_run("run_1", deadline_seconds=0.2, poll_interval=0.05)
    assert timeout.value.last is not None and timeout.value.last.running == 1
    assert sleep.delays and all(d <= 0.05 for d in sleep.delays)
