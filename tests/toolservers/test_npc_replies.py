"""NPCs answering in real time over real HTTP: the simulated `sim-npc` endpoint, any OpenAI-compatible model
(a scripted third-party stand-in), failures, transcripts, and the per-workspace NPC model settings."""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.model_config import ModelConfig, Provider
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.sim.npc import SIM_NPC, sim_npc_persona
from eval_pipelines.toolservers.admin import ToolServerAdmin, WorkspaceError
from eval_pipelines.toolservers.app import create_app
from eval_pipelines.toolservers.base import BuiltinToolServer, ToolContext, ToolError
from eval_pipelines.toolservers.chat import RUNTIME_NPC_RESPONDER, ChatServer
from eval_pipelines.toolservers.email import EmailServer
from eval_pipelines.toolservers.npc import (
    ChatModelNpcResponder,
    NpcConfigError,
    NpcModelSettings,
    npc_configure_settings,
    npc_seed_item,
    npc_transcripts,
    parse_npc_settings,
)
from tests.support.scripted_llm import Script, create_scripted_app, text_reply

from ._helpers import new_workspace, state, step

KEY = "sk-npc-test-0123456789abcdefXYZ"
SECRET = "4827#"
PRIYA = {
    "profile_id": "priya",
    "first_name": "Priya",
    "last_name": "Raman",
    "email": "priya.raman@example.com",
    "occupation": "Lab Manager",
    "public_info": "Runs the hardware lab.",
}
JONAS = {"profile_id": "jonas", "first_name": "Jonas", "last_name": "Weber", "email": "jonas.weber@example.com"}
SECRETS = {"priya": {"value": SECRET, "reveal_when": ["door code", "keypad"]}}
SEED = [npc_seed_item([PRIYA, JONAS], SECRETS)]

needs_framework_patch = pytest.mark.skipif(
    not hasattr(BuiltinToolServer, "aexecute"),
    reason="needs the tool-server framework patch (acall + configure): /tmp/npc_app_patch.diff",
)


def _settings(base_url: str, model: str = SIM_NPC, **extra: Any) -> NpcModelSettings:
    return NpcModelSettings(base_url=f"{base_url}/v1", model=model, api_key=KEY, **extra)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with BackgroundServer(create_sim_app(ReferenceBook(), personas={SIM_NPC: sim_npc_persona})) as server:
        yield server.url


@pytest.fixture(scope="module")
def npc_chat_url(sim_url: str) -> Iterator[str]:
    """A chat server whose NPCs are played by `sim-npc` over HTTP."""
    server = ChatServer(responder=ChatModelNpcResponder(_settings(sim_url)))
    with BackgroundServer(create_app(server)) as background:
        yield background.url


def _chat_app_with_model(serve: Any, script: Script, **extra: Any) -> str:
    model = serve(create_scripted_app(script))
    chat = serve(create_app(ChatServer(responder=ChatModelNpcResponder(_settings(model.url, "any-model", **extra)))))
    return str(chat.url)


# -- the simulated NPC over HTTP --------------------------------------------------------------------------------


def test_sim_npc_reveals_the_secret_only_when_asked(client: httpx.Client, npc_chat_url: str) -> None:
    url = new_workspace(client, npc_chat_url, copy.deepcopy(SEED))
    for message in (
        "Hi Priya! How are you?",
        "Sam starts Monday in the lab. Can you help him get in?",
        "What is the code?",
        "Thanks a lot.",
    ):
        body = step(client, url, "send_dm", room_id="dm-priya", message=message)
        assert "is_error" not in body and "Priya Raman replied" in body["observation"]
        assert SECRET not in str(body)
    asked = step(client, url, "npc_send_message", to="Priya", message="And the lab's Door Code, please?")
    assert asked["observation"].endswith(
        f"Priya Raman replied [msg-0010]: Sure. Since you're asking about the door code: {SECRET}. "
        "Please keep it to yourself."
    )
    jonas = step(client, url, "send_dm", room_id="dm-jonas", message="What's the door code?")
    assert SECRET not in jonas["observation"]  # the secret belongs to Priya only

    snapshot = client.get(f"{url}/snapshot").json()
    transcripts = npc_transcripts(snapshot["state"])
    assert set(transcripts) == {"priya", "jonas"}
    priya = transcripts["priya"]
    assert [t["role"] for t in priya] == ["agent", "npc"] * 5
    assert priya[0] == {"role": "agent", "content": "Hi Priya! How are you?", "timestamp": "2025-01-06T09:00:00Z"}
    assert [SECRET in t["content"] for t in priya] == [False] * 9 + [True]
    assert transcripts["jonas"][0]["content"] == "What's the door code?"
    # The engine's shapes give the same transcripts: a /snapshot body and the {"initial", "final"} pair.
    assert npc_transcripts(snapshot) == transcripts
    assert npc_transcripts({"initial": {}, "final": snapshot["state"]}) == transcripts
    assert npc_transcripts({}) == {}


def test_transcripts_list_every_npc(client: httpx.Client, npc_chat_url: str) -> None:
    url = new_workspace(client, npc_chat_url, copy.deepcopy(SEED))
    assert npc_transcripts(state(client, url)) == {"jonas": [], "priya": []}


# -- any OpenAI-compatible model -----------------------------------------------------------------------------


def test_any_openai_compatible_model_plays_the_npc(serve: Any, client: httpx.Client) -> None:
    script = Script([text_reply("  Hey! Sure, it is 4827#.  ")])
    chat_url = _chat_app_with_model(serve, script, temperature=0.2)
    history = [
        {"with": "priya", "from": "priya" if i % 2 else "agent@example.com", "text": f"old {i}"} for i in range(30)
    ]
    url = new_workspace(client, chat_url, [*copy.deepcopy(SEED), {"direct_messages": history}])
    body = step(client, url, "send_dm", room_id="Priya Raman", message="Door code?")
    assert body["observation"] == (
        "Message sent to Priya Raman in dm-priya [msg-0031].\nPriya Raman replied [msg-0032]: Hey! Sure, it is 4827#."
    )
    [request] = script.requests
    assert request["model"] == "any-model" and request["temperature"] == 0.2
    messages = request["messages"]
    system = messages[0]
    assert system["role"] == "system"
    for fact in (
        "Name: Priya Raman",
        "Role: Lab Manager",
        "About you: Runs the hardware lab.",
        "You are chatting with: agent@example.com",
        f'Confidential information you know: "{SECRET}"',
        '["door code", "keypad"]',
    ):
        assert fact in system["content"]
    # Capped memory: 19 remembered messages and the new one.
    assert len(messages) == 1 + 20
    assert [m["content"] for m in messages[1:3]] == ["old 11", "old 12"]
    assert [m["role"] for m in messages[1:3]] == ["assistant", "user"]
    assert messages[-1] == {"role": "user", "content": "Door code?"}
    assert KEY not in str(state(client, url)) and KEY not in str(body)


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        ({"status": 401}, "refused (HTTP 401)"),
        (text_reply("   "), "empty reply"),
        ({"raw": "<html>oops</html>"}, "not JSON"),
        ({"sleep": 1.0}, "within 0.4s"),
    ],
)
def test_npc_model_failures_are_error_observations(
    serve: Any, client: httpx.Client, reply: dict[str, Any], fragment: str
) -> None:
    chat_url = _chat_app_with_model(serve, Script([reply]), timeout_seconds=0.4)
    url = new_workspace(client, chat_url, copy.deepcopy(SEED))
    before = state(client, url)
    body = step(client, url, "send_dm", room_id="dm-priya", message="door code?")
    assert body["is_error"] is True and "state_diff" not in body
    assert body["observation"].startswith("Priya Raman did not reply (")
    assert body["observation"].endswith("); your message was not sent, try again later")
    assert fragment in body["observation"]
    assert KEY not in body["observation"] and SECRET not in body["observation"]
    assert state(client, url) == before


# -- settings, configure and the async path -------------------------------------------------------------------


def test_model_settings_hide_the_key_and_validate() -> None:
    config = ModelConfig(model="gpt-4o-mini", provider=Provider.OPENAI, api_key=KEY, temperature=0.3)
    body = npc_configure_settings(config)
    assert body == {
        "npc_model": {
            "base_url": "https://api.openai.com/v1",
            "model": "gpt-4o-mini",
            "temperature": 0.3,
            "timeout_seconds": 20.0,
            "api_key": KEY,
        }
    }
    settings = parse_npc_settings(body["npc_model"])
    assert settings.api_key is not None and settings.api_key.get_secret_value() == KEY
    assert KEY not in repr(settings) and KEY not in str(settings.public()) and KEY not in str(settings.model_dump())
    assert KEY not in repr(ChatModelNpcResponder(settings))
    for bad, fragment in [
        ({**body["npc_model"], "temperature": 9}, "npc_model: temperature"),
        ({**body["npc_model"], "base_url": "ftp://x"}, "npc_model: base_url"),
        ({**body["npc_model"], "extra": 1}, "npc_model: extra"),
        ({"api_key": KEY}, "npc_model: base_url: Field required"),
        ("just a string", "expected an object"),
    ]:
        with pytest.raises(NpcConfigError, match=fragment) as caught:
            parse_npc_settings(bad)
        assert KEY not in str(caught.value)


def test_chat_server_configure_keeps_settings_in_runtime_only(sim_url: str) -> None:
    server = ChatServer()
    runtime: dict[str, Any] = {}
    echo = server.configure(runtime, {"npc_model": {"base_url": f"{sim_url}/v1", "model": "m", "api_key": KEY}})
    assert echo == {
        "npc_model": {"base_url": f"{sim_url}/v1", "model": "m", "temperature": 0.7, "timeout_seconds": 20.0}
    }
    assert isinstance(runtime[RUNTIME_NPC_RESPONDER], ChatModelNpcResponder) and KEY not in repr(runtime)
    assert server.configure(runtime, {"npc_model": None}) == {"npc_model": {"model": SIM_NPC, "default": True}}
    assert runtime == {}
    refused: list[tuple[dict[str, Any], str]] = [
        ({}, "nothing to configure"),
        ({"npc_model": None, "theme": "dark"}, "unknown setting(s) ['theme']"),
        ({"npc_model": {"model": "m", "api_key": KEY}}, "base_url"),
    ]
    for settings, fragment in refused:
        with pytest.raises(ValueError, match=re.escape(fragment)) as caught:
            server.configure(runtime, settings)
        assert KEY not in str(caught.value)
    assert runtime == {}


async def test_acall_awaits_the_model_without_blocking_the_loop(serve: Any) -> None:
    script = Script([{"sleep": 0.6, "then": text_reply("Sure: 4827#")}])
    model = serve(create_scripted_app(script))
    server = ChatServer(responder=ChatModelNpcResponder(_settings(model.url, "slow-model")))
    ctx = ToolContext(workspace_id="w", state=server.new_state())
    server.seed(ctx.state, copy.deepcopy(SEED))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    ticking = asyncio.ensure_future(ticker())
    try:
        observation = await server.acall(ctx, "send_dm", {"room_id": "dm-priya", "message": "door code?"})
    finally:
        ticking.cancel()
    assert observation.endswith("Priya Raman replied [msg-0002]: Sure: 4827#")
    assert ticks >= 5  # the loop kept running while the NPC model was thinking
    assert [m["sender"] for m in ctx.state["messages"].values()] == ["agent@example.com", "priya.raman@example.com"]
    server.seed(ctx.state, [{"channels": [{"name": "general"}]}])
    with pytest.raises(ToolError, match="is a channel"):
        await server.acall(ctx, "send_dm", {"room_id": "#general", "message": "hi"})
    read = await server.acall(ctx, "get_dm_room", {"user": "priya"})
    assert "2 message(s) so far" in read


# -- the framework patch: per-workspace configure over HTTP, awaited NPC replies ------------------------------


@needs_framework_patch
def test_configure_route_sets_the_npc_model_per_workspace(serve: Any, client: httpx.Client, sim_url: str) -> None:
    script = Script([text_reply("Configured model speaking.")])
    model = serve(create_scripted_app(script))
    chat = serve(create_app(ChatServer()))
    configured = new_workspace(client, chat.url, copy.deepcopy(SEED))
    plain = new_workspace(client, chat.url, copy.deepcopy(SEED))
    settings = {"npc_model": {"base_url": f"{model.url}/v1", "model": "custom", "api_key": KEY, "temperature": 0}}
    response = client.post(f"{configured}/configure", json=settings)
    assert response.status_code == 200, response.text
    assert response.json()["configured"]["npc_model"]["model"] == "custom" and KEY not in response.text
    assert (
        "Configured model speaking."
        in step(client, configured, "send_dm", room_id="priya", message="hi")["observation"]
    )
    assert "Thanks, Priya here" in step(client, plain, "send_dm", room_id="priya", message="hi")["observation"]
    assert script.requests[0]["model"] == "custom" and len(script.requests) == 1
    assert KEY not in client.get(f"{configured}/snapshot").text
    reset = client.post(f"{configured}/configure", json={"npc_model": None})
    assert reset.json()["configured"] == {"npc_model": {"model": SIM_NPC, "default": True}}
    assert "Thanks, Priya here" in step(client, configured, "send_dm", room_id="priya", message="ok")["observation"]


@needs_framework_patch
def test_configure_route_rejects_bad_input_without_echoing_it(serve: Any, client: httpx.Client) -> None:
    chat = serve(create_app(ChatServer()))
    url = new_workspace(client, chat.url, copy.deepcopy(SEED))
    for body, fragment in [
        ([KEY], "must be a JSON object"),
        ({"npc_model": {"base_url": "nope", "model": "m", "api_key": KEY}}, "base_url"),
        ({"npc_model": {"base_url": "http://x/v1", "model": "m", "api_key": KEY, "temperature": 7}}, "temperature"),
        ({"colour": KEY}, "unknown setting"),
    ]:
        response = client.post(f"{url}/configure", json=body)
        assert response.status_code == 400, response.text
        assert fragment in response.json()["detail"] and KEY not in response.text
    raw = client.post(f"{url}/configure", content=b"{not json", headers={"content-type": "application/json"})
    assert raw.status_code == 400
    assert client.post(f"{chat.url}/workspaces/nope/configure", json={}).status_code == 404
    email = serve(create_app(EmailServer()))
    email_ws = new_workspace(client, email.url)
    refused = client.post(f"{email_ws}/configure", json={"npc_model": None})
    assert refused.status_code == 400 and "has no runtime settings" in refused.json()["detail"]


@needs_framework_patch
async def test_admin_configure_and_engine_settings(serve: Any, sim_url: str) -> None:
    chat = serve(create_app(ChatServer()))
    config = ModelConfig(model=SIM_NPC, api_key=KEY, base_url=f"{sim_url}/v1")
    async with ToolServerAdmin() as admin:
        url = await admin.create_workspace(chat.url, seed=copy.deepcopy(SEED))
        applied = await admin.configure(url, npc_configure_settings(config))
        assert applied["npc_model"]["model"] == SIM_NPC and KEY not in str(applied)
        with pytest.raises(WorkspaceError) as caught:
            await admin.configure(url, {"npc_model": {"model": "m", "api_key": KEY}})
        assert caught.value.status_code == 400 and KEY not in str(caught.value)
        async with httpx.AsyncClient() as http:
            body = {"action": {"tool_name": "send_dm", "parameters": {"room_id": "priya", "message": "Door code?"}}}
            reply = (await http.post(f"{url}/step", json=body)).json()
        assert SECRET in reply["observation"]
        assert KEY not in str(await admin.snapshot(url))


@needs_framework_patch
async def test_a_slow_npc_does_not_hold_up_other_workspaces(serve: Any) -> None:
    chat_url = _chat_app_with_model(serve, Script([{"sleep": 1.5, "then": text_reply("finally")}]))
    async with httpx.AsyncClient(timeout=20) as http:
        urls = []
        for _ in range(2):
            created = await http.post(f"{chat_url}/workspaces", json={"seed": copy.deepcopy(SEED)})
            urls.append(f"{chat_url}{created.json()['path']}")
        slow_body = {"action": {"tool_name": "send_dm", "parameters": {"room_id": "priya", "message": "hi"}}}
        slow = asyncio.ensure_future(http.post(f"{urls[0]}/step", json=slow_body))
        await asyncio.sleep(0.2)
        quick = await http.post(f"{urls[1]}/step", json={"action": {"tool_name": "npc_list_contacts"}})
        assert quick.status_code == 200 and "Priya Raman" in quick.json()["observation"]
        assert not slow.done()  # the other workspace was served while this NPC was still thinking
        pending = (await http.get(f"{urls[0]}/snapshot")).json()["state"]
        assert pending["messages"] == {}  # a snapshot answers meanwhile, and never shows half a call
        assert (await slow).json()["observation"].endswith("replied [msg-0002]: finally")
