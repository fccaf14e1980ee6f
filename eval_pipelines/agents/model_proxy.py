"""A loopback OpenAI-compatible endpoint for one rollout's agent worker: the agent's model calls, made through
our own chat client.

An agent in another interpreter (`agents/remote.py`) is given this proxy's URL and a per-rollout random token as
its base URL and API key, never the model's real endpoint and key. Each `POST /v1/chat/completions` (or
`/chat/completions`: litellm with `provider="openai"` and a base URL, like the openai client, appends
`/chat/completions` to the base URL it is given) is parsed as a chat request and sent by the rollout's `ChatClient`,
inside the rollout's usage meter and deadline: the engine's metering, retries, limiter and deadline see every call,
and so does the run's cost ceiling. The request goes to the sweep's model under the rollout's `user` tag (what the
simulated models read) whatever the agent named, and takes the sweep's temperature when it sets none, as the
reference agent's requests do.

An endpoint failure is answered 502 with the (already scrubbed) error, and kept in `endpoint_errors`: a rollout
whose agent then crashes ended in an endpoint error, not in the agent's failure.

The server is a few lines of HTTP/1.1 on asyncio streams (keep-alive, Content-Length bodies), on the rollout's
own event loop, where its chat client lives.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from http import HTTPStatus
from typing import Any

import pydantic_core
from pydantic import ValidationError

from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.deadline import RolloutDeadline, rollout_deadline
from eval_pipelines.llm.errors import LLMError
from eval_pipelines.llm.metering import UsageMeter, metering
from eval_pipelines.llm.types import ChatRequest
from eval_pipelines.schemas.agent_environment import MAX_AGENT_PROXY_REQUEST_BYTES
from eval_pipelines.schemas.model_config import ModelConfig

LOOPBACK = "127.0.0.1"
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODEL_LIST_PATHS = ("/v1/models", "/models")
#: Header lines one request may carry (each is at most the stream's line limit, 64 KiB).
MAX_HEADER_LINES = 100


def _error(status: HTTPStatus, message: str, kind: str = "invalid_request_error") -> tuple[int, dict[str, Any]]:
    return status.value, {"error": {"message": message, "type": kind, "code": status.value}}


class _Malformed(Exception):
    """A request that is not HTTP/1.1 as this server reads it: answered `status`, then the connection closes."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]] | None:
    """The next request's method, target and headers (lower-cased names); None when the client is done."""
    try:
        request_line = await reader.readline()
    except ValueError:  # longer than the stream's line limit
        raise _Malformed(HTTPStatus.REQUEST_URI_TOO_LONG, "the request line is over 64 KiB") from None
    if not request_line.strip():
        return None
    parts = request_line.decode("latin-1").split(" ", 2)
    if len(parts) != 3:
        raise _Malformed(HTTPStatus.BAD_REQUEST, "malformed request line: send METHOD TARGET HTTP/1.1")
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES + 1):
        try:
            line = await reader.readline()
        except ValueError:
            raise _Malformed(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "a header line is over 64 KiB") from None
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    else:
        raise _Malformed(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"more than {MAX_HEADER_LINES} header lines")
    length = headers.get("content-length", "0") or "0"
    if not length.isdigit() or not length.isascii():
        raise _Malformed(HTTPStatus.BAD_REQUEST, "the Content-Length header is not a byte count")
    return parts[0], parts[1], headers


async def _write(writer: asyncio.StreamWriter, status: int, payload: Any, *, keep_open: bool) -> None:
    data = pydantic_core.to_json(payload)
    reason = HTTPStatus(status).phrase
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    writer.write((head + ("" if keep_open else "Connection: close\r\n") + "\r\n").encode() + data)
    await writer.drain()


class ModelProxy:
    """`async with ModelProxy(client, config, user_tag) as proxy:` serves `proxy.base_url` for `proxy.token`."""

    def __init__(
        self,
        client: ChatClient,
        model_config: ModelConfig,
        user_tag: str,
        *,
        meter: UsageMeter | None = None,
        deadline: RolloutDeadline | None = None,
    ) -> None:
        self._client = client
        self._config = model_config
        self._user_tag = user_tag
        self._meter = meter
        self._deadline = deadline
        #: The agent's "API key": good for this proxy only, for this rollout only.
        self.token = secrets.token_urlsafe(32)
        self.endpoint_errors: list[LLMError] = []
        #: Chat requests answered (successfully or not).
        self.requests = 0
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the proxy is not serving"
        port = self._server.sockets[0].getsockname()[1]
        return f"http://{LOOPBACK}:{port}/v1"

    async def __aenter__(self) -> ModelProxy:
        self._server = await asyncio.start_server(self._serve, LOOPBACK, 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while await self._answer_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # a client that hangs up or speaks garbage loses its connection, nothing else
        except asyncio.CancelledError:
            pass  # `aclose` ends the connections of a finished rollout; the stream's callback must not log it
        finally:
            self._connections.discard(task)
            writer.close()

    async def _answer_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; whether the connection stays open."""
        try:
            head = await _read_head(reader)
        except _Malformed as exc:
            # Answered, so the agent reads what was wrong rather than a connection that just closed.
            await _write(writer, *_error(exc.status, exc.message), keep_open=False)
            return False
        if head is None:
            return False
        method, target, headers = head
        keep_open = headers.get("connection", "").lower() != "close"
        length = int(headers.get("content-length") or 0)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            status, payload = _error(HTTPStatus.LENGTH_REQUIRED, "send the body with a Content-Length")
            keep_open = False
        elif length > MAX_AGENT_PROXY_REQUEST_BYTES:
            status, payload = _error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the request body is too large")
            keep_open = False
        else:
            body = await reader.readexactly(length) if length else b""
            status, payload = await self._answer(method, target.split("?", 1)[0].rstrip("/"), headers, body)
        await _write(writer, status, payload, keep_open=keep_open)
        return keep_open

    async def _answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        # As bytes: the header is whatever the agent sent, and `compare_digest` refuses non-ASCII text.
        sent = headers.get("authorization", "").encode("latin-1")
        if not secrets.compare_digest(sent, f"Bearer {self.token}".encode()):
            return _error(HTTPStatus.UNAUTHORIZED, "unknown API key", "authentication_error")
        if method == "GET" and path in MODEL_LIST_PATHS:
            return 200, {"object": "list", "data": [{"id": self._config.model, "object": "model"}]}
        if method != "POST" or path not in CHAT_PATHS:
            return _error(HTTPStatus.NOT_FOUND, f"no route {method} {path}: this endpoint serves chat completions")
        try:
            data = json.loads(body)
            if not isinstance(data, dict):
                raise ValueError("the body is not a JSON object")
            if data.get("stream"):
                raise ValueError("streamed completions are not served: send stream=false")
            request = ChatRequest.model_validate(data)
        except RecursionError:
            return _error(HTTPStatus.BAD_REQUEST, "not a chat-completions request: the JSON nests too deeply")
        except (ValueError, ValidationError) as exc:
            return _error(HTTPStatus.BAD_REQUEST, f"not a chat-completions request: {str(exc)[:500]}")
        return await self._complete(request)

    async def _complete(self, request: ChatRequest) -> tuple[int, Any]:
        update: dict[str, Any] = {"model": self._config.model, "user": self._user_tag}
        if request.temperature is None:
            update["temperature"] = self._config.temperature
        self.requests += 1
        # The meter and the deadline are the rollout's: this connection's task was not started inside them.
        with contextlib.ExitStack() as scope:
            if self._meter is not None:
                scope.enter_context(metering(self._meter))
            if self._deadline is not None:
                scope.enter_context(rollout_deadline(self._deadline))
            try:
                completion = await self._client.complete(request.model_copy(update=update))
            except LLMError as exc:
                self.endpoint_errors.append(exc)
                return _error(HTTPStatus.BAD_GATEWAY, str(exc), "upstream_error")
        return 200, completion.model_dump(mode="json", exclude_none=True)
