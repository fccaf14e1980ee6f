"""What a rollout asks of its tool servers: the workspace is created with its seed (and answers with the
initial state), a server's tool listing is read once per engine, and finished workspaces are deleted even
when the deletion runs in the background."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutSpec
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.artifacts import META_STATE
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import RolloutStatus
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.toolservers.app import ToolServerApp, create_app
from eval_pipelines.toolservers.email import EmailServer
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.support.scripted_llm import Script, create_scripted_app, text_reply, tool_call_reply

SCENARIO = ScenarioCatalog().get("email_ops:1.0.0")
TASK = SCENARIO.task("email_ops_001")


def _route(method: str, path: str) -> str:
    parts = path.strip("/").split("/")
    if len(parts) == 3 and parts[0] == "workspaces":
        return f"{method} workspace/{parts[2]}"
    if len(parts) == 2 and parts[0] == "workspaces":
        return f"{method} workspace"
    return f"{method} {path}"


def rewrite_json(app: Any, applies: Callable[[Any], bool], rewrite: Callable[[dict[str, Any]], None]) -> Any:
    """The app, with the JSON answers of the requests `applies` picks changed in place by `rewrite`."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not applies(scope):
            await app(scope, receive, send)
            return
        start: dict[str, Any] = {}
        body = bytearray()

        async def capture(message: Any) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            else:
                body.extend(message.get("body", b""))

        await app(scope, receive, capture)
        payload = json.loads(bytes(body))
        rewrite(payload)
        encoded = json.dumps(payload).encode()
        headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
        await send({**start, "headers": [*headers, (b"content-length", str(len(encoded)).encode())]})
        await send({"type": "http.response.body", "body": encoded})

    return wrapped


def counting(app: Any, counts: Counter[str], drop_state_from_create: bool = False) -> Callable[..., Any]:
    """Count requests by route; optionally answer `POST /workspaces` without the state, as an external server
    following only the protocol's minimum would."""
    if drop_state_from_create:
        app = rewrite_json(app, lambda scope: _route(scope["method"], scope["path"]) == "POST /workspaces", _drop_state)

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            counts[_route(scope["method"], scope["path"])] += 1
        await app(scope, receive, send)

    return wrapped


def _drop_state(payload: dict[str, Any]) -> None:
    payload.pop("state", None)


def _spec(model_url: str, email_url: str, index: int) -> RolloutSpec:
    return RolloutSpec(
        rollout_id=f"ro_{index}",
        run_id="run_requests",
        scenario_id=SCENARIO.scenario_id,
        task=TASK,
        model_config=ModelConfig(model="scripted", api_key="k", base_url=f"{model_url}/v1", max_steps=10),
        tool_server_urls={"email": email_url},
        seed={"email": SCENARIO.seed_payload(TASK, "email")},
        verifiers=load_verifier_package(SCENARIO.verifiers_dir),
    )


def _script() -> Script:
    calls = [
        tool_call_reply(f"{a.tool_server}__{a.tool_name}", a.parameters, f"call_{i}")
        for i, a in enumerate(TASK.reference_actions)
    ]
    return Script([*calls, text_reply(TASK.reference_answer or "done")])


async def _three_rollouts(
    serve: Any, counts: Counter[str], *, background: bool, drop_state: bool = False, app: Any = None
) -> list[Any]:
    email = serve(counting(app or create_app(EmailServer()), counts, drop_state_from_create=drop_state))
    outcomes = []
    engine = RolloutEngine(ChatClientPool(), ToolServerAdmin(), background_cleanup=background)
    try:
        for index in range(3):
            model = serve(create_scripted_app(_script()))
            outcomes.append(await engine.execute(_spec(model.url, f"{email.url}", index)))
        await engine.drain()
    finally:
        await engine.clients.aclose()
        await engine.admin.aclose()
    return outcomes


async def test_seed_travels_with_the_create_and_tools_are_listed_once(serve: Any) -> None:
    counts: Counter[str] = Counter()
    app = create_app(EmailServer())
    outcomes = await _three_rollouts(serve, counts, background=True, app=app)
    assert all(o.status == RolloutStatus.COMPLETED and o.result.success for o in outcomes)
    steps = len(TASK.reference_actions)
    assert counts["POST /workspaces"] == 3
    assert counts["GET workspace/tools"] == 1  # the first rollout's listing served the other two
    assert counts["POST workspace/seed"] == 0
    assert counts["GET workspace/snapshot"] == 3  # the final state only: the initial came with the create
    assert counts["POST workspace/step"] == 3 * steps
    # The background deletions go in batches (`POST /workspaces/batch-delete`), all awaited by drain().
    assert counts["DELETE workspace"] == 0
    assert 1 <= counts["POST workspace"] <= 3
    assert workspaces_of(app) == {}
    # The initial state recorded in the artifacts is the seeded one.
    initial = outcomes[0].artifacts.metadata[META_STATE]["email"]["initial"]
    assert initial["emails"] and initial != outcomes[0].artifacts.metadata[META_STATE]["email"]["final"]


async def test_a_server_that_does_not_return_state_is_snapshotted(serve: Any) -> None:
    counts: Counter[str] = Counter()
    outcomes = await _three_rollouts(serve, counts, background=False, drop_state=True)
    assert all(o.status == RolloutStatus.COMPLETED and o.result.success for o in outcomes)
    assert counts["GET workspace/snapshot"] == 6  # initial and final, for each rollout
    assert counts["DELETE workspace"] == 3
    assert outcomes[0].artifacts.metadata[META_STATE]["email"]["initial"]["emails"]


def without_listing_scope(app: Any) -> Callable[..., Any]:
    """The server's answers, with `listing_scope` taken out of tool listings (a server that does not say)."""

    def drop_scope(payload: dict[str, Any]) -> None:
        assert payload.pop("listing_scope") == "server"

    return rewrite_json(app, lambda scope: scope["path"].endswith("/tools"), drop_scope)


async def _rollouts_of_distinct_tasks(serve: Any, app: Any) -> list[Any]:
    email = serve(app)
    engine = RolloutEngine(ChatClientPool(), ToolServerAdmin(), background_cleanup=False)
    outcomes = []
    try:
        for index in range(3):
            model = serve(create_scripted_app(_script()))
            task = TASK.model_copy(update={"task_id": f"{TASK.task_id}_copy_{index}"})
            spec = dataclasses.replace(_spec(model.url, email.url, index), task=task)
            outcomes.append(await engine.execute(spec))
    finally:
        await engine.clients.aclose()
        await engine.admin.aclose()
    return outcomes


async def test_a_server_wide_listing_serves_every_task(serve: Any) -> None:
    counts: Counter[str] = Counter()
    outcomes = await _rollouts_of_distinct_tasks(serve, counting(create_app(EmailServer()), counts))
    assert all(o.status == RolloutStatus.COMPLETED and o.result.success for o in outcomes)
    assert counts["GET workspace/tools"] == 1  # the server said every workspace lists the same tools


async def test_without_a_scope_each_task_lists_its_own_tools(serve: Any) -> None:
    counts: Counter[str] = Counter()
    app = counting(without_listing_scope(create_app(EmailServer())), counts)
    outcomes = await _rollouts_of_distinct_tasks(serve, app)
    assert all(o.status == RolloutStatus.COMPLETED and o.result.success for o in outcomes)
    assert counts["GET workspace/tools"] == 3


async def test_a_server_wide_listing_is_kept_once_however_many_tasks(serve: Any) -> None:
    email = serve(create_app(EmailServer()))
    engine = RolloutEngine(ChatClientPool(), ToolServerAdmin(), background_cleanup=False)
    try:
        for index in range(4):
            model = serve(create_scripted_app(_script()))
            task = TASK.model_copy(update={"task_id": f"{TASK.task_id}_kept_{index}"})
            await engine.execute(dataclasses.replace(_spec(model.url, email.url, index), task=task))
    finally:
        await engine.clients.aclose()
        await engine.admin.aclose()
    assert len(engine._tool_listings) == 1


def workspaces_of(app: Any) -> dict[str, Any]:
    """The workspaces a built-in server's app (`create_app`) holds now."""
    server_app = app.app
    assert isinstance(server_app, ToolServerApp)
    return server_app.store.workspaces
