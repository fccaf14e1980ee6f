"""A scriptable OpenAI-compatible endpoint for tests: it replays a list of replies and records every request.

It stands in for a third-party model server (vLLM, a hosted provider), not for any of our own code.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse


def tool_call_reply(name: str, arguments: dict[str, Any] | str, call_id: str = "call_1") -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}],
    }


def text_reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


@dataclass
class Script:
    """Replies in order; the last one repeats. A reply may be {"status": 500} or {"sleep": seconds}."""

    replies: list[dict[str, Any]]
    requests: list[dict[str, Any]] = field(default_factory=list)


def create_scripted_app(script: Script) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Any:
        body = await request.json()
        script.requests.append(body)
        index = min(len(script.requests) - 1, len(script.replies) - 1)
        reply = script.replies[index]
        if "sleep" in reply:
            await asyncio.sleep(reply["sleep"])
            reply = reply.get("then", text_reply("late"))
        if "status" in reply:
            return JSONResponse({"error": {"message": "scripted failure"}}, status_code=reply["status"])
        if "raw" in reply:
            return PlainTextResponse(reply["raw"])
        return {
            "id": f"cmpl-{index}",
            "object": "chat.completion",
            "model": body.get("model", "scripted"),
            "choices": [
                {"index": 0, "message": reply, "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop"}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    return app


@contextmanager
def slow_text_model(seconds: float, text: str = "done") -> Iterator[str]:
    """A served model endpoint that answers every request with `text` after `seconds`; yields its base URL."""
    from eval_pipelines.lib.serving import BackgroundServer

    server = BackgroundServer(create_scripted_app(Script([{"sleep": seconds, "then": text_reply(text)}])))
    server.start()
    try:
        yield f"{server.url}/v1"
    finally:
        server.stop()
