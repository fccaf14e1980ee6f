"""The tool server's shortcut for the routes every rollout calls answers exactly as its FastAPI routes do, steps
aside for anything it does not handle, and is what answers a well-formed rollout's requests."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from eval_pipelines.schemas.limits import MAX_TOOL_SERVER_REQUEST_BYTES
from eval_pipelines.toolservers import EmailServer, create_app
from eval_pipelines.toolservers.app import ToolServerApp

from ._helpers import SEED

JSON = {"content-type": "application/json"}
TEXT = {"content-type": "text/plain"}
BAD = {"to": 3}
W1, W1_STEP, W1_SNAPSHOT = "/workspaces/w1", "/workspaces/w1/step", "/workspaces/w1/snapshot"
SEND = {"action": {"tool_name": "send_email", "parameters": {"to": "a@b.com", "subject": "s", "body": "b"}}}

#: (method, path, body, headers): a sequence run on a fresh server, after a workspace `w1` seeded with SEED.
Request = tuple[str, str, bytes | dict[str, Any] | None, dict[str, str]]
CASES: dict[str, list[Request]] = {
    "create with an id and a seed": [("POST", "/workspaces", {"workspace_id": "w2", "seed": [SEED]}, {})],
    "create a duplicate": [("POST", "/workspaces", {"workspace_id": "w1"}, {})],
    "create with a bad seed": [("POST", "/workspaces", {"workspace_id": "w2", "seed": ["not an object"]}, {})],
    "create from a state": [("POST", "/workspaces", {"workspace_id": "w2", "state": {"emails": []}}, {})],
    "create with a seed and a state": [("POST", "/workspaces", {"seed": [SEED], "state": {}}, {})],
    "create with an unknown field": [("POST", "/workspaces", {"workspace_id": "w2", "sed": []}, {})],
    "create with a bad id": [("POST", "/workspaces", {"workspace_id": "no/slash"}, {})],
    "create with JSON null": [("POST", "/workspaces", b"null", JSON)],
    "create with a body that is not JSON": [("POST", "/workspaces", b"{not json", JSON)],
    "create with a body of another type": [("POST", "/workspaces", b'{"workspace_id": "w2"}', TEXT)],
    "a step that changes the state": [("POST", "/workspaces/w1/step", SEND, {}), ("GET", W1_SNAPSHOT, None, {})],
    "a read-only step": [("POST", "/workspaces/w1/step", {"action": {"tool_name": "list_emails"}}, {})],
    "a step of an unknown tool": [("POST", "/workspaces/w1/step", {"action": {"tool_name": "nope"}}, {})],
    "a step with bad arguments": [("POST", W1_STEP, {"action": {"tool_name": "send_email", "parameters": BAD}}, {})],
    "a step without an action": [("POST", "/workspaces/w1/step", {"tool_name": "list_emails"}, {})],
    "a step whose body is not JSON": [("POST", "/workspaces/w1/step", b"[", JSON)],
    "a step in an unknown workspace": [("POST", "/workspaces/nope/step", SEND, {})],
    "a step in a workspace with an invalid id": [("POST", "/workspaces/bad$id/step", SEND, {})],
    "a snapshot without its text": [("GET", "/workspaces/w1/snapshot?text=false", None, {})],
    "a snapshot with its text": [("GET", "/workspaces/w1/snapshot?text=true", None, {})],
    "a snapshot with another spelling of false": [("GET", "/workspaces/w1/snapshot?text=0", None, {})],
    "a snapshot with a bad query": [("GET", "/workspaces/w1/snapshot?text=maybe", None, {})],
    "a snapshot of an unknown workspace": [("GET", "/workspaces/nope/snapshot", None, {})],
    "a delete, then a step in the gone workspace": [("DELETE", W1, None, {}), ("POST", W1_STEP, SEND, {})],
    "a delete of an unknown workspace": [("DELETE", "/workspaces/nope", None, {})],
    "a tool listing": [("GET", "/workspaces/w1/tools", None, {})],
    "a tool listing with a query": [("GET", "/workspaces/w1/tools?x=1", None, {})],
    "a tool listing of an unknown workspace": [("GET", "/workspaces/nope/tools", None, {})],
    "a tool listing of an invalid id": [("GET", "/workspaces/bad$id/tools", None, {})],
    "a tool listing after a delete": [("DELETE", W1, None, {}), ("GET", "/workspaces/w1/tools", None, {})],
    "a tool listing posted": [("POST", "/workspaces/w1/tools", SEND, {})],
    "a method the route does not have": [("PUT", "/workspaces/w1/step", SEND, {})],
    "a path with a trailing slash": [("GET", "/workspaces/w1/snapshot/", None, {})],
}  # fmt: skip


async def _answers(app: Any, requests: list[Request]) -> list[tuple[int, Any]]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tool.test") as client:
        seeded = await client.post("/workspaces", json={"workspace_id": "w1", "seed": [copy.deepcopy(SEED)]})
        assert seeded.status_code == 201
        answers = []
        for method, path, body, headers in requests:
            if isinstance(body, dict):
                response = await client.request(method, path, json=body, headers=headers)
            else:
                response = await client.request(method, path, content=body, headers=headers)
            kind = response.headers.get("content-type", "")
            answers.append((response.status_code, response.json() if "json" in kind else response.text))
        return answers


def _comparable(value: Any) -> Any:
    """The answer with the clock's readings and new workspace ids blanked: two servers stamp a sent email a moment
    apart, and name a workspace created without an id at random."""
    if isinstance(value, dict):
        return {
            k: "<varies>" if k in ("timestamp", "workspace_id", "path") else _comparable(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_comparable(v) for v in value]
    return value


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_shortcut_answers_as_the_fastapi_routes_do(case: str) -> None:
    with_shortcut = ToolServerApp(EmailServer())
    fastapi_only = ToolServerApp(EmailServer()).api
    ours = await _answers(with_shortcut, CASES[case])
    theirs = await _answers(fastapi_only, CASES[case])
    assert _comparable(ours) == _comparable(theirs)


async def test_a_rollout_s_requests_never_reach_fastapi_and_the_rest_do() -> None:
    app = ToolServerApp(EmailServer())
    reached: list[str] = []
    api = app.api

    async def recording(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(f"{scope.get('method', scope['type'])} {scope.get('path', '')}")
        await api(scope, receive, send)

    app.api = recording  # type: ignore[assignment]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tool.test") as client:
        created = await client.post("/workspaces", json={"seed": [copy.deepcopy(SEED)]})
        path = created.json()["path"]
        assert (await client.post(f"{path}/step", json=SEND)).json()["state_diff"]["tool_name"] == "send_email"
        assert (await client.get(f"{path}/snapshot?text=false")).json()["state"]["emails"]
        assert "send_email" in {tool["name"] for tool in (await client.get(f"{path}/tools")).json()["tools"]}
        assert (await client.delete(path)).json() == {"workspace_id": path.rsplit("/", 1)[1], "deleted": True}
        assert reached == []
        assert (await client.get(f"{path}/health")).status_code == 404
        assert (await client.post(f"{path}/step", json={"tool_name": "x"})).status_code == 422
    assert reached == [f"GET {path}/health", f"POST {path}/step"]


async def test_a_body_over_the_limit_is_refused_before_it_is_read() -> None:
    transport = httpx.ASGITransport(app=create_app(EmailServer()))
    async with httpx.AsyncClient(transport=transport, base_url="http://tool.test") as client:
        huge = b'{"workspace_id": "w", "seed": ["' + b"x" * MAX_TOOL_SERVER_REQUEST_BYTES + b'"]}'
        response = await client.post("/workspaces", content=huge, headers=JSON)
        assert response.status_code == 413
        assert response.json() == {"detail": f"request body larger than {MAX_TOOL_SERVER_REQUEST_BYTES} bytes"}
        assert (await client.get("/workspaces/w/snapshot")).status_code == 404


async def test_a_body_nested_past_any_parser_s_depth_is_a_400_with_detail() -> None:
    transport = httpx.ASGITransport(app=create_app(EmailServer()), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://tool.test") as client:
        assert (await client.post("/workspaces", json={"workspace_id": "w"})).status_code == 201
        nested = b'{"action": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        response = await client.post("/workspaces/w/step", content=nested, headers=JSON)
        assert response.status_code == 400 and response.json()["detail"]
        assert (await client.get("/workspaces/w/snapshot?text=false")).json()["state"]["emails"] == {}
