"""A model reply past the cap is an endpoint error naming the cap, read no further: four 64 MB replies once
took a sweep to 1.13 GB."""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncIterator, Iterator

import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.errors import LLMResponseError
from eval_pipelines.llm.types import ChatRequest
from eval_pipelines.schemas.limits import MAX_MODEL_REPLY_BYTES

HUGE = 64 << 20
CHUNK = b"x" * (1 << 20)


def _huge_app() -> FastAPI:
    app = FastAPI()

    async def body() -> AsyncIterator[bytes]:
        yield b'{"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "'
        for _ in range(HUGE // len(CHUNK)):
            yield CHUNK

    @app.post("/v1/chat/completions")
    async def complete() -> StreamingResponse:
        return StreamingResponse(body(), media_type="application/json")

    return app


@pytest.fixture
def huge_endpoint() -> Iterator[str]:
    server = BackgroundServer(_huge_app()).start()
    yield f"{server.url}/v1"
    server.stop()


async def test_a_64_mb_reply_is_a_labelled_error_in_bounded_memory(huge_endpoint: str) -> None:
    request = ChatRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    tracemalloc.start()
    try:
        async with ChatClient(huge_endpoint, "k") as client:
            with pytest.raises(LLMResponseError) as raised:
                await client.complete(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f"larger than the {MAX_MODEL_REPLY_BYTES}-byte cap" in str(raised.value)
    assert peak < 3 * MAX_MODEL_REPLY_BYTES, f"peak {peak >> 20} MiB while refusing a {HUGE >> 20} MiB reply"
