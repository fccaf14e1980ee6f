"""The rollout's model proxy (`agents/model_proxy.py`) against a hostile agent and a failing endpoint: every request
gets an HTTP answer that says what was wrong (never a connection that just closes), an endpoint that hangs, refuses
or sends garbage is a 502 kept in `endpoint_errors` (the endpoint's failure, not the agent's), and the model's key is
in no answer."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from eval_pipelines.agents.model_proxy import MAX_HEADER_LINES, ModelProxy
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.llm.deadline import RolloutDeadline
from eval_pipelines.llm.errors import LLMConnectionError, LLMResponseError, LLMTimeoutError
from eval_pipelines.schemas.agent_environment import MAX_AGENT_PROXY_REQUEST_BYTES
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import ErrorClass, RolloutStatus
from tests.agents.stand_in_agents import AGENTS_MODULE, SOURCE
from tests.agents.test_agent_environment import CANARY as SPEC_KEY
from tests.agents.test_agent_environment import Captured, _own_python, _spec
from tests.support.scripted_llm import Script, create_scripted_app

CANARY = "sk-canary-proxy-hostile-93b1"
BODY = {"model": "anything", "messages": [{"role": "user", "content": "hello"}]}

Serve = Callable[[Any], Any]


@pytest.fixture
async def proxy_for(serve: Serve) -> AsyncIterator[Callable[..., Any]]:
    """proxy_for(replies | base_url, deadline=None) -> a serving ModelProxy; closed at the end of the test."""
    opened: list[tuple[ModelProxy, Any]] = []

    async def start(replies: list[dict[str, Any]] | str, deadline: RolloutDeadline | None = None) -> ModelProxy:
        base_url = replies if isinstance(replies, str) else f"{serve(create_scripted_app(Script(replies))).url}/v1"
        config = ModelConfig(model="m", api_key=CANARY, base_url=base_url)
        client = ChatClientPool().for_model(config)
        proxy = ModelProxy(client, config, "ro_hostile", deadline=deadline)
        await proxy.__aenter__()
        opened.append((proxy, client))
        return proxy

    yield start
    for proxy, client in opened:
        await proxy.aclose()
        await client.aclose()


async def _raw(proxy: ModelProxy, data: bytes) -> tuple[int, dict[str, Any]]:
    """Send `data` as it is and read the one answer; (status, JSON body)."""
    port = int(proxy.base_url.rsplit(":", 1)[1].split("/", 1)[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)  # every answer here closes the connection or is read whole
    finally:
        writer.close()
    assert answer, "the proxy closed the connection without answering"
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def _request(proxy: ModelProxy, body: bytes, *, authorization: bytes | None = None, extra: bytes = b"") -> bytes:
    auth = authorization if authorization is not None else f"Bearer {proxy.token}".encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nConnection: close\r\nAuthorization: "
        + auth
        + b"\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


async def test_malformed_requests_are_answered_with_what_was_wrong(proxy_for: Callable[..., Any]) -> None:
    proxy: ModelProxy = await proxy_for([{"status": 500}])
    body = json.dumps(BODY).encode()
    # a key that is not ASCII is an unknown key, not a dropped connection
    status, answer = await _raw(proxy, _request(proxy, body, authorization=b"Bearer \xe9\xe9"))
    assert status == 401 and answer["error"]["type"] == "authentication_error"
    deep = b"[" * 100_000 + b"]" * 100_000
    status, answer = await _raw(proxy, _request(proxy, deep))
    assert status == 400 and "nests too deeply" in answer["error"]["message"]
    status, answer = await _raw(proxy, b"GARBAGE\r\n\r\n")
    assert status == 400 and "request line" in answer["error"]["message"]
    status, answer = await _raw(proxy, _request(proxy, b"{}").replace(b"Content-Length: 2", b"Content-Length: -2"))
    assert status == 400 and "Content-Length" in answer["error"]["message"]
    status, answer = await _raw(proxy, b"GET /" + b"x" * (70 << 10) + b" HTTP/1.1\r\n\r\n")
    assert status == 414
    status, answer = await _raw(proxy, _request(proxy, body, extra=b"X-Long: " + b"y" * (70 << 10) + b"\r\n"))
    assert status == 431
    many = b"".join(b"X-Filler-%d: y\r\n" % n for n in range(MAX_HEADER_LINES + 1))
    status, answer = await _raw(proxy, _request(proxy, body, extra=many))
    assert status == 431
    huge = _request(proxy, b"").replace(
        b"Content-Length: 0", b"Content-Length: %d" % (MAX_AGENT_PROXY_REQUEST_BYTES + 1)
    )
    status, answer = await _raw(proxy, huge)  # answered before any of the body is read
    assert status == 413
    chunked = _request(proxy, b"").replace(b"Content-Length: 0", b"Transfer-Encoding: chunked")
    status, answer = await _raw(proxy, chunked)
    assert status == 411
    status, answer = await _raw(proxy, _request(proxy, b"\xff\xfe not utf-8"))
    assert status == 400 and "not a chat-completions request" in answer["error"]["message"]
    # none of these reached the endpoint
    assert proxy.requests == 0 and proxy.endpoint_errors == []


async def test_an_endpoint_that_hangs_refuses_or_sends_garbage_is_a_502_kept_as_the_endpoint_s(
    proxy_for: Callable[..., Any],
) -> None:
    auth = {"Authorization": "Bearer {}"}

    async def ask(proxy: ModelProxy) -> httpx.Response:
        headers = {"Authorization": auth["Authorization"].format(proxy.token)}
        async with httpx.AsyncClient(base_url=proxy.base_url, timeout=30) as http:
            return await http.post("/chat/completions", json=BODY, headers=headers)

    # a reply nested deeper than the JSON parser goes
    garbage: ModelProxy = await proxy_for([{"raw": "[" * 5000 + "]" * 5000}])
    answer = await ask(garbage)
    assert answer.status_code == 502 and answer.json()["error"]["type"] == "upstream_error"
    assert [type(e) for e in garbage.endpoint_errors] == [LLMResponseError]
    # the rollout's deadline runs out while the endpoint hangs
    hanging: ModelProxy = await proxy_for([{"sleep": 30}], deadline=RolloutDeadline(0.5))
    answer = await ask(hanging)
    assert answer.status_code == 502 and "time limit" in answer.json()["error"]["message"]
    assert [type(e) for e in hanging.endpoint_errors] == [LLMTimeoutError]
    # nothing listens at the endpoint
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    refused: ModelProxy = await proxy_for(f"http://127.0.0.1:{free_port}/v1", deadline=RolloutDeadline(5))
    answer = await ask(refused)
    assert answer.status_code == 502
    assert refused.endpoint_errors and isinstance(refused.endpoint_errors[-1], LLMConnectionError | LLMTimeoutError)
    for proxy in (garbage, hanging, refused):
        assert all(CANARY not in str(error) for error in proxy.endpoint_errors)
    assert CANARY not in answer.text


async def test_an_endpoint_that_echoes_the_key_in_its_error_does_not_pass_it_to_the_agent(
    serve: Serve, proxy_for: Callable[..., Any]
) -> None:
    echoing = FastAPI()

    @echoing.post("/v1/chat/completions")
    async def refuse(request: Request) -> JSONResponse:
        said = f"Incorrect API key provided: {request.headers.get('authorization')}"
        return JSONResponse({"error": {"message": said}}, status_code=401)

    proxy: ModelProxy = await proxy_for(f"{serve(echoing).url}/v1")
    async with httpx.AsyncClient(base_url=proxy.base_url, timeout=30) as http:
        answer = await http.post("/chat/completions", json=BODY, headers={"Authorization": f"Bearer {proxy.token}"})
    assert answer.status_code == 502 and "Incorrect API key provided" in answer.text
    assert CANARY not in answer.text and all(CANARY not in str(error) for error in proxy.endpoint_errors)


async def test_a_remote_agent_whose_endpoint_hangs_past_the_deadline_ends_in_the_endpoint_s_error(
    serve: Serve, tool_host: Any, tmp_path: Path
) -> None:
    (tmp_path / f"{AGENTS_MODULE}.py").write_text(SOURCE)
    hanging = serve(create_scripted_app(Script([{"sleep": 60}])))
    spec = _spec(hanging.url, tool_host, f"{AGENTS_MODULE}:ChatLoopAgent", _own_python(tmp_path), timeout=4.0)
    outcome = await Captured().execute(spec)
    # the agent waited on the proxy the whole time: nothing was learned about it
    assert outcome.status == RolloutStatus.FAILED and outcome.error_class == ErrorClass.MODEL_ENDPOINT
    assert "unanswered" in outcome.result.message and SPEC_KEY not in outcome.result.message
