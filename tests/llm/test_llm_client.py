"""ChatClient and send_with_retries against a misbehaving OpenAI-compatible server started in the test.

Back-off delays are observed through an injected `sleep` recorder, never through the wall clock.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from eval_pipelines.lib.retry import RetryPolicy, send_with_retries
from eval_pipelines.lib.serving import BackgroundServer, free_port
from eval_pipelines.llm import (
    ChatClient,
    ChatMessage,
    ChatRequest,
    LLMAuthError,
    LLMBadRequestError,
    LLMConnectionError,
    LLMError,
    LLMInvalidModelError,
    LLMRateLimitError,
    LLMResponseError,
    LLMTimeoutError,
    ToolSpec,
)

CANARY = "sk-canary-" + uuid.uuid4().hex
REQUEST = ChatRequest(model="test-model", messages=[ChatMessage.user("Say hello.")])


def _completion(content: str = "hello") -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


def _error(status: int, message: str, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "test_error", **extra}}, status, headers=headers)


class FlakyState:
    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.authorization: dict[str, str | None] = {}
        self.bodies: dict[str, Any] = {}
        self.in_flight = 0
        self.max_in_flight = 0


def create_flaky_app(state: FlakyState) -> FastAPI:
    app = FastAPI()

    @app.post("/{mode}/{tag}/v1/chat/completions")
    async def chat(mode: str, tag: str, request: Request) -> Response:
        key = f"{mode}/{tag}"
        state.hits[key] += 1
        hit = state.hits[key]
        authorization = request.headers.get("authorization")
        state.authorization[key] = authorization
        state.bodies[key] = await request.json()
        if mode == "ok":
            return JSONResponse(_completion("present" if authorization else "absent"))
        if mode == "ratelimit2":
            if hit <= 2:
                return _error(429, "Rate limit reached for requests", {"Retry-After": "0.1"})
            return JSONResponse(_completion())
        if mode == "ratelimit-date":
            if hit == 1:
                when = format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True)
                return _error(429, "slow down", {"Retry-After": when})
            return JSONResponse(_completion())
        if mode == "always429":
            return _error(429, "quota exceeded", {"Retry-After": "7"})
        if mode == "error500":
            return _error(500, "internal error") if hit == 1 else JSONResponse(_completion())
        if mode == "always503":
            return _error(503, "overloaded")
        if mode == "bad400":
            return _error(400, "temperature must be at most 2")
        if mode == "nomodel400":
            return _error(400, "The model `gpt-x` does not exist or you do not have access to it.")
        if mode == "nomodel404":
            return _error(404, "model 'gpt-x' not found", code="model_not_found")
        if mode == "auth401":
            # Real providers have echoed (parts of) the key back; the client must scrub it.
            return _error(401, f"Incorrect API key provided: {(authorization or '').removeprefix('Bearer ')}.")
        if mode == "forbidden403":
            return JSONResponse({"detail": f"forbidden for {authorization}"}, 403)
        if mode == "garbage":
            return PlainTextResponse("<html><body>upstream exploded</body></html>")
        if mode == "truncated":
            return Response('{"id": "x", "choices": [{"message": {"role": "assis', media_type="application/json")
        if mode == "nochoices":
            return JSONResponse({"id": "x", "object": "chat.completion", "choices": []})
        if mode == "notcompletion":
            return JSONResponse({"choices": [{"message": "just a string"}]})
        if mode == "embedded429":
            return JSONResponse({"error": {"code": 429, "message": "upstream provider is rate limited"}})
        if mode == "slow":
            for _ in range(200):  # gives up after ~10 s; returns early once the client has gone
                if await request.is_disconnected():
                    break
                await asyncio.sleep(0.05)
            return JSONResponse(_completion())
        if mode == "concurrency":
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
            try:
                await asyncio.sleep(0.05)
            finally:
                state.in_flight -= 1
            return JSONResponse(_completion())
        return _error(500, f"unknown test mode {mode}")

    return app


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture(scope="module")
def flaky_state() -> FlakyState:
    return FlakyState()


@pytest.fixture(scope="module")
def flaky_server(flaky_state: FlakyState) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_flaky_app(flaky_state)) as server:
        yield server


class Target:
    """One test's private endpoint on the shared flaky server (its own hit counter)."""

    def __init__(self, server: BackgroundServer, state: FlakyState, mode: str) -> None:
        self.key = f"{mode}/{uuid.uuid4().hex[:8]}"
        self.base_url = f"{server.url}/{self.key}/v1"
        self._state = state
        self.sleep = SleepRecorder()

    @property
    def hits(self) -> int:
        return self._state.hits[self.key]

    def client(self, api_key: str | None = CANARY, **kwargs: Any) -> ChatClient:
        kwargs.setdefault("retry", RetryPolicy.for_llm(max_attempts=4, base_delay=0.01))
        return ChatClient(self.base_url, api_key, sleep=self.sleep, **kwargs)


@pytest.fixture
def target(flaky_server: BackgroundServer, flaky_state: FlakyState) -> Any:
    return lambda mode: Target(flaky_server, flaky_state, mode)


async def test_success_sends_bearer_key_and_wire_body(target: Any, flaky_state: FlakyState) -> None:
    t = target("ok")
    tools = [ToolSpec.for_tool("email", "send_email", "Send an email", {"type": "object", "properties": {}})]
    request = ChatRequest(
        model="test-model", messages=REQUEST.messages, tools=tools, temperature=0.2, user="rollout-9", seed=7
    )
    async with t.client() as client:
        completion = await client.complete(request)
    assert completion.text == "present"
    assert flaky_state.authorization[t.key] == f"Bearer {CANARY}"
    body = flaky_state.bodies[t.key]
    assert body["model"] == "test-model" and body["user"] == "rollout-9" and body["seed"] == 7
    assert body["tools"][0]["function"]["name"] == "email__send_email"
    assert body["messages"] == [{"role": "user", "content": "Say hello."}]
    assert "logprobs" not in body and "max_tokens" not in body


@pytest.mark.parametrize("key", [None, ""])
async def test_no_key_means_no_authorization_header(target: Any, flaky_state: FlakyState, key: str | None) -> None:
    t = target("ok")
    async with t.client(api_key=key) as client:
        completion = await client.complete(REQUEST)
    assert completion.text == "absent"
    assert flaky_state.authorization[t.key] is None


async def test_429_with_retry_after_is_retried_and_the_delay_honoured(
    target: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="eval_pipelines.lib.retry")
    t = target("ratelimit2")
    async with t.client() as client:
        completion = await client.complete(REQUEST)
    assert completion.text == "hello"
    assert t.hits == 3
    assert t.sleep.delays == [0.1, 0.1]
    retries = [r for r in caplog.records if r.name == "eval_pipelines.lib.retry"]
    assert len(retries) == 2 and all(r.levelno == logging.INFO and "429" in r.getMessage() for r in retries)


async def test_retry_after_as_http_date(target: Any) -> None:
    t = target("ratelimit-date")
    async with t.client() as client:
        await client.complete(REQUEST)
    assert t.hits == 2
    assert len(t.sleep.delays) == 1 and 0.0 <= t.sleep.delays[0] <= 2.5


async def test_500_is_retried_for_llm_endpoints(target: Any) -> None:
    t = target("error500")
    async with t.client() as client:
        assert (await client.complete(REQUEST)).text == "hello"
    assert t.hits == 2 and len(t.sleep.delays) == 1


async def test_429_after_all_attempts_is_a_rate_limit_error(target: Any) -> None:
    t = target("always429")
    async with t.client(retry=RetryPolicy.for_llm(max_attempts=3, max_delay=5.0)) as client:
        with pytest.raises(LLMRateLimitError) as info:
            await client.complete(REQUEST)
    assert t.hits == 3
    assert t.sleep.delays == [5.0, 5.0]  # Retry-After: 7 capped by max_delay
    assert info.value.status == 429 and info.value.error_type.value == "rate_limit"
    assert info.value.retry_after == 5.0
    assert "quota exceeded" in str(info.value)


async def test_5xx_after_all_attempts_is_a_response_error(target: Any) -> None:
    t = target("always503")
    async with t.client(retry=RetryPolicy.for_llm(max_attempts=2)) as client:
        with pytest.raises(LLMResponseError) as info:
            await client.complete(REQUEST)
    assert t.hits == 2 and info.value.status == 503 and "overloaded" in str(info.value)


async def test_400_is_a_bad_request_without_retry(target: Any) -> None:
    t = target("bad400")
    async with t.client() as client:
        with pytest.raises(LLMBadRequestError) as info:
            await client.complete(REQUEST)
    assert t.hits == 1 and t.sleep.delays == []
    assert info.value.status == 400 and info.value.error_type.value == "bad_request"
    assert "temperature must be at most 2" in str(info.value)


@pytest.mark.parametrize("mode", ["nomodel400", "nomodel404"])
async def test_unknown_model_answers_are_invalid_model_errors(target: Any, mode: str) -> None:
    t = target(mode)
    async with t.client() as client:
        with pytest.raises(LLMInvalidModelError) as info:
            await client.complete(REQUEST)
    assert t.hits == 1 and info.value.error_type.value == "invalid_model"


@pytest.mark.parametrize("mode", ["auth401", "forbidden403"])
async def test_auth_failures_are_auth_errors_with_the_key_scrubbed(target: Any, mode: str) -> None:
    t = target(mode)
    async with t.client() as client:
        with pytest.raises(LLMAuthError) as info:
            await client.complete(REQUEST)
    assert t.hits == 1 and info.value.error_type.value == "authentication_error"
    assert info.value.status in (401, 403)
    assert CANARY not in str(info.value) and CANARY not in repr(info.value)
    assert "[REDACTED]" in str(info.value)  # the server did echo it: scrubbed, not merely absent


@pytest.mark.parametrize("mode", ["garbage", "truncated", "nochoices", "notcompletion"])
async def test_unusable_2xx_bodies_are_response_errors(target: Any, mode: str) -> None:
    t = target(mode)
    async with t.client() as client:
        with pytest.raises(LLMResponseError) as info:
            await client.complete(REQUEST)
    assert t.hits == 1 and info.value.status == 200


async def test_error_inside_a_200_body_is_mapped_by_its_code(target: Any) -> None:
    t = target("embedded429")
    async with t.client() as client:
        with pytest.raises(LLMRateLimitError, match="upstream provider is rate limited"):
            await client.complete(REQUEST)


async def test_slow_server_is_a_timeout_error_after_retries(target: Any) -> None:
    t = target("slow")
    async with t.client(timeout_seconds=0.3, retry=RetryPolicy.for_llm(max_attempts=2)) as client:
        with pytest.raises(LLMTimeoutError) as info:
            await client.complete(REQUEST)
    assert t.hits == 2 and len(t.sleep.delays) == 1
    assert info.value.status is None and info.value.error_type.value == "timeout"


async def test_connection_refused_is_a_connection_error_after_retries() -> None:
    sleep = SleepRecorder()
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    async with ChatClient(base_url, CANARY, retry=RetryPolicy.for_llm(max_attempts=3), sleep=sleep) as client:
        with pytest.raises(LLMConnectionError) as info:
            await client.complete(REQUEST)
    assert len(sleep.delays) == 2
    assert info.value.error_type.value == "connection_error"
    assert info.value.__cause__ is None  # the httpx error (which holds the request headers) is not chained


async def test_concurrency_is_bounded(target: Any, flaky_state: FlakyState) -> None:
    t = target("concurrency")
    async with t.client(max_concurrency=3) as client:
        results = await asyncio.gather(*(client.complete(REQUEST) for _ in range(12)))
    assert len(results) == 12 and t.hits == 12
    assert 1 <= flaky_state.max_in_flight <= 3


async def test_the_api_key_never_appears_in_errors_or_logs(
    target: Any, flaky_server: BackgroundServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[LLMError] = []
    modes = ["auth401", "forbidden403", "bad400", "nomodel400", "always429", "always503", "garbage", "truncated"]
    for mode in [*modes, "slow"]:
        t = target(mode)
        timeout = 0.3 if mode == "slow" else 60.0
        async with t.client(timeout_seconds=timeout, retry=RetryPolicy.for_llm(max_attempts=2)) as client:
            assert CANARY not in repr(client) and CANARY not in str(client)
            with pytest.raises(LLMError) as info:
                await client.complete(REQUEST)
            errors.append(info.value)
    refused = ChatClient(f"http://127.0.0.1:{free_port()}/v1", CANARY, sleep=SleepRecorder())
    with pytest.raises(LLMConnectionError) as info:
        await refused.complete(REQUEST)
    errors.append(info.value)
    await refused.aclose()

    assert len(errors) == len(modes) + 2
    for error in errors:
        rendered = "".join(traceback.format_exception(error))
        assert CANARY not in str(error) and CANARY not in repr(error) and CANARY not in rendered
    assert caplog.records, "expected retry logs to be captured"
    for record in caplog.records:
        assert CANARY not in record.getMessage()
    assert CANARY not in caplog.text


async def test_send_with_retries_with_a_request_factory(target: Any) -> None:
    t = target("ratelimit2")
    built: list[httpx.Request] = []
    async with httpx.AsyncClient() as http:

        def factory() -> httpx.Request:
            request = http.build_request("POST", t.base_url + "/chat/completions", json={"model": "m"})
            built.append(request)
            return request

        response = await send_with_retries(
            http, request_factory=factory, policy=RetryPolicy(max_attempts=3), sleep=t.sleep
        )
    assert response.status_code == 200 and len(built) == 3 and t.sleep.delays == [0.1, 0.1]


async def test_send_with_retries_returns_the_last_response_when_attempts_run_out(target: Any) -> None:
    t = target("always503")
    async with httpx.AsyncClient() as http:
        response = await send_with_retries(
            http, "POST", t.base_url + "/chat/completions", json={}, policy=RetryPolicy(max_attempts=3), sleep=t.sleep
        )
    assert response.status_code == 503 and t.hits == 3 and len(t.sleep.delays) == 2
    assert response.json()["error"]["message"] == "overloaded"


async def test_send_with_retries_does_not_retry_500_by_default_or_permanent_errors(target: Any) -> None:
    t = target("always503")
    t500 = target("error500")
    async with httpx.AsyncClient() as http:
        first = await send_with_retries(http, "POST", t500.base_url + "/chat/completions", json={}, sleep=t500.sleep)
        assert first.status_code == 500 and t500.hits == 1 and t500.sleep.delays == []

        with pytest.raises(httpx.UnsupportedProtocol):
            await send_with_retries(http, "GET", "ftp://127.0.0.1/x", sleep=t.sleep)
        assert t.sleep.delays == []

        with pytest.raises(TypeError):
            await send_with_retries(http, "GET", sleep=t.sleep)
