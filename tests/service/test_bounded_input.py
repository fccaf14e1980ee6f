"""Bounded input on the evaluation service: oversized bodies, names, filenames and pages get a 4xx with a
`detail`, never a 5xx, and are never stored."""

from __future__ import annotations

import time

import httpx

from eval_pipelines.schemas.limits import MAX_NAME_CHARS, MAX_SERVICE_REQUEST_BYTES
from tests.service.eval_service_support import WRITE_KEY, RunningService

HEADERS = {"API-Key": WRITE_KEY, "content-type": "application/json"}
LAUNCH = {
    "scenario_id": "email_ops:1.0.0",
    "task_ids": ["email_ops_001"],
    "model_config": {"model": "sim-oracle", "base_url": "sim://local", "api_key": "x"},
}


def test_a_50_mb_body_is_refused_413_before_it_is_read(eval_service: RunningService) -> None:
    body = b'{"run_name": "' + b"x" * (50 << 20) + b'"}'
    started = time.monotonic()
    answer = httpx.post(f"{eval_service.url}/v1/runs", content=body, headers=HEADERS, timeout=60)
    assert answer.status_code == 413, answer.text[:300]
    assert f"larger than {MAX_SERVICE_REQUEST_BYTES} bytes" in answer.json()["detail"]
    assert time.monotonic() - started < 30
    # A chunked body (no Content-Length) is counted as it arrives.
    chunks = (b"x" * (1 << 20) for _ in range(50))
    streamed = httpx.post(f"{eval_service.url}/v1/runs", content=chunks, headers=HEADERS, timeout=60)
    assert streamed.status_code == 413


def test_an_overlong_run_name_is_refused_422_and_not_stored(eval_service: RunningService) -> None:
    name = "n" * (MAX_NAME_CHARS + 1)
    answer = httpx.post(f"{eval_service.url}/v1/runs", json={**LAUNCH, "run_name": name}, headers=HEADERS)
    assert answer.status_code == 422 and "run_name" in answer.text
    runs = httpx.get(f"{eval_service.url}/v1/runs", params={"limit": 200}, headers=HEADERS).json()
    assert all(r.get("run_name") != name for r in runs["runs"])


def test_filenames_the_filesystem_cannot_take_are_400(eval_service: RunningService) -> None:
    for length in (3_000, 20_000):
        answer = httpx.get(
            f"{eval_service.url}/v1/scenarios/email_ops:1.0.0/seed_data/{'a' * length}.json", headers=HEADERS
        )
        assert 400 <= answer.status_code < 500, (length, answer.status_code, answer.text[:200])
        assert "detail" in answer.json()


def test_rollout_listing_pages_with_limit_and_offset(eval_service: RunningService) -> None:
    launched = httpx.post(
        f"{eval_service.url}/v1/runs",
        json={**LAUNCH, "task_ids": ["email_ops_001", "email_ops_002"], "rollout_count": 2},
        headers=HEADERS,
    ).json()
    run_id = launched["run_id"]
    everything = httpx.get(f"{eval_service.url}/v1/rollouts", params={"run_id": run_id}, headers=HEADERS).json()
    ids = [r["rollout_id"] for r in everything["rollouts"]]
    assert everything["total"] == len(ids) == 4
    page = httpx.get(
        f"{eval_service.url}/v1/rollouts", params={"run_id": run_id, "limit": 2, "offset": 1}, headers=HEADERS
    ).json()
    assert page["total"] == 4 and [r["rollout_id"] for r in page["rollouts"]] == ids[1:3]
    too_big = httpx.get(f"{eval_service.url}/v1/rollouts", params={"limit": 10**6}, headers=HEADERS)
    assert too_big.status_code == 422
