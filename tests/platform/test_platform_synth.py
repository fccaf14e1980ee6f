"""Synthetic-data generation: row counts, structure, determinism and the streamed (chunked) body."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from eval_pipelines.clients.platform import PlatformClient, PlatformResponseError, PlatformValidationError
from eval_pipelines.platform import SIM_SYNTH_MODEL_ID
from eval_pipelines.schemas.platform import SynthDataRequest
from tests.platform.conftest import NO_RETRY, Platform

EXAMPLES: list[dict[str, Any]] = [
    {
        "conv_prefix": [{"role": "user", "content": "Please send the invoice to Dana by tomorrow."}],
        "response": {"role": "assistant", "content": "I have sent the invoice to Dana."},
        "context": "billing",
    },
    {
        "conv_prefix": [
            {"role": "system", "content": "You manage a calendar."},
            {"role": "user", "content": "Can you schedule a meeting with Lee on Friday?"},
        ],
        "response": {"role": "assistant", "content": "The meeting with Lee is scheduled for Friday."},
        "context": "calendar",
    },
    {"question": "What is the capital of France?", "answer": "Paris is the capital.", "ground_truth": 1},
]
PROMPT = "Rewrite each example as a new request of the same kind."


def _request(multiplier: int = 4, examples: list[dict[str, Any]] | None = None) -> SynthDataRequest:
    return SynthDataRequest(
        model_id=uuid.UUID(SIM_SYNTH_MODEL_ID), multiplier=multiplier, examples=examples or EXAMPLES, prompt=PROMPT
    )


def _same_shape(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and set(a) == set(b) and all(_same_shape(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same_shape(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b)


async def test_three_examples_times_four_give_twelve_rows_with_the_examples_keys(client: PlatformClient) -> None:
    rows = await client.generate_synthetic(_request(4))
    assert len(rows) == 12
    assert [r.original for r in rows] == [e for e in EXAMPLES for _ in range(4)]
    for row in rows:
        assert json.loads(row.generated) == row.data
        assert set(row.data) == set(row.original)
        assert _same_shape(row.original, row.data)
        assert row.data != row.original
    # Roles, labels and identifiers are kept; only prose changes.
    assert rows[4].data["conv_prefix"][0]["role"] == "system" and rows[4].data["context"] == "calendar"
    assert all(r.data["ground_truth"] == 1 for r in rows[8:])
    # Variants of one example differ from each other.
    assert len({json.dumps(r.data, sort_keys=True) for r in rows[:4]}) > 1


async def test_generation_is_deterministic(client: PlatformClient) -> None:
    first = await client.generate_synthetic(_request(2))
    second = await client.generate_synthetic(_request(2))
    assert [r.generated for r in first] == [r.generated for r in second]


async def test_platform_streams_the_array_in_several_chunks(platform: Platform) -> None:
    chunks: list[bytes] = []
    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream(
            "POST",
            platform.url + "/api/v1/synth_data/generate",
            headers={"Authorization": f"Bearer {platform.token}"},
            json=_request(4).model_dump(mode="json"),
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers.get("transfer-encoding") == "chunked"
        async for chunk in response.aiter_raw():
            chunks.append(chunk)
    assert len(chunks) > 1
    body = json.loads(b"".join(chunks))
    assert len(body) == 12 and all(item["simulated"] is True for item in body)
    assert all(isinstance(item["generated"], str) for item in body)


async def test_unknown_generator_and_oversized_requests_are_422(client: PlatformClient) -> None:
    with pytest.raises(PlatformValidationError) as unknown:
        await client.generate_synthetic(_request(1).model_copy(update={"model_id": uuid.uuid4()}))
    assert unknown.value.issues[0].loc == ("body", "model_id")
    with pytest.raises(PlatformValidationError) as too_many:
        await client.generate_synthetic(_request(400))
    assert too_many.value.issues[0].loc == ("body", "multiplier")


def _chunked_app(body: bytes, chunk_size: int) -> FastAPI:
    """A stand-in platform that trickles a fixed body in tiny chunks, cutting through tokens and strings."""
    app = FastAPI()

    @app.post("/api/v1/synth_data/generate")
    async def generate() -> StreamingResponse:
        async def trickle() -> AsyncIterator[bytes]:
            for start in range(0, len(body), chunk_size):
                yield body[start : start + chunk_size]
                await asyncio.sleep(0.001)

        return StreamingResponse(trickle(), media_type="application/json")

    return app


async def test_client_buffers_a_body_served_in_many_chunks(serve: Any) -> None:
    items = [
        {"original": {"q": "a"}, "generated": json.dumps({"q": "a, rewritten"})},
        {"original": {"q": "b"}, "generated": {"q": "b as an object, as a variant sends it"}},
    ]
    server = serve(_chunked_app(json.dumps(items).encode(), chunk_size=7))
    async with PlatformClient(server.url, "any-token", retry=NO_RETRY) as client:
        rows = await client.generate_synthetic(_request(1, [{"q": "a"}]))
    assert [r.data for r in rows] == [{"q": "a, rewritten"}, {"q": "b as an object, as a variant sends it"}]
    assert json.loads(rows[1].generated) == rows[1].data


async def test_client_rejects_truncated_or_non_json_generated(serve: Any) -> None:
    truncated = serve(_chunked_app(b'[{"original": {"q": "a"}, "generated": "{\\"q\\"', chunk_size=5))
    async with PlatformClient(truncated.url, "t", retry=NO_RETRY) as client:
        with pytest.raises(PlatformResponseError, match="not JSON"):
            await client.generate_synthetic(_request(1))
    not_object = serve(_chunked_app(json.dumps([{"original": {}, "generated": "plain text"}]).encode(), 4))
    async with PlatformClient(not_object.url, "t", retry=NO_RETRY) as client:
        with pytest.raises(PlatformResponseError, match="row 0"):
            await client.generate_synthetic(_request(1))
