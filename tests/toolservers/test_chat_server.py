"""The chat tool server over real HTTP: tools, validation, seeding, workspaces, snapshots and per-call diffs.

NPC replies here come from the server's default responder (the in-process simulated NPC); the NPC model over
HTTP is covered in test_npc_replies.py.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.tools import StateDiff, StepResponse, ToolDefinition
from eval_pipelines.sim.npc import SIM_NPC
from eval_pipelines.toolservers.app import create_app
from eval_pipelines.toolservers.chat import ChatServer

from ._helpers import new_workspace, state, step

EXPECTED_TOOLS = {
    "list_channels": False,
    "get_room_history": False,
    "send_channel_message": True,
    "get_dm_room": False,
    "send_dm": True,
    "npc_list_contacts": False,
    "npc_send_message": True,
}
SECRET = "K7-owl-9931"
PRIYA = {
    "profile_id": "priya",
    "first_name": "Priya",
    "last_name": "Raman",
    "email": "Priya.Raman@Example.com",
    "occupation": "Lab Manager",
    "public_info": "Runs the hardware lab.",
    "secret": {"value": SECRET, "reveal_when": ["door code"]},
}
JONAS = {
    "profile_id": "jonas",
    "first_name": "Jonas",
    "last_name": "Weber",
    "email": "jonas.weber@example.com",
    "occupation": "Release Manager",
}
SEED: dict[str, Any] = {
    "account": "ops@example.com",
    "npcs": [PRIYA, JONAS],
    "channels": [
        {
            "name": "#General",
            "topic": "Announcements",
            "messages": [
                {"from": "jonas", "text": "Code freeze on Wednesday.", "timestamp": "2025-03-10T09:00:00Z"},
                {
                    "from": "someone@partner.org",
                    "text": "Hello from a guest.",
                    "timestamp": "2025-03-10T08:00:00+00:00",
                },
            ],
        },
        {"name": "releases"},
    ],
    "direct_messages": [
        {
            "with": "priya",
            "from": "priya.raman@example.com",
            "text": "Welcome aboard!",
            "timestamp": "2025-03-09T12:00Z",
        }
    ],
}


@pytest.fixture(scope="module")
def chat_url() -> Iterator[str]:
    with BackgroundServer(create_app(ChatServer())) as server:
        yield server.url


@pytest.fixture
def seeded(client: httpx.Client, chat_url: str) -> str:
    return new_workspace(client, chat_url, [copy.deepcopy(SEED)])


def _ok(body: dict[str, Any]) -> str:
    assert "is_error" not in body, body
    return str(body["observation"])


def _error(body: dict[str, Any]) -> str:
    assert body.get("is_error") is True, body
    assert "state_diff" not in body
    return str(body["observation"])


# -- listing ------------------------------------------------------------------------------------------------


def test_tool_listing_shape(client: httpx.Client, chat_url: str, seeded: str) -> None:
    assert client.get(f"{chat_url}/health").json() == {"status": "healthy"}
    tools = client.get(f"{seeded}/tools").json()["tools"]
    assert client.get(f"{chat_url}/tools").json()["tools"] == tools
    assert {t["name"]: t["mutates_state"] for t in tools} == EXPECTED_TOOLS
    for tool in tools:
        ToolDefinition.model_validate(tool)
        assert tool["description"]
        params = tool["parameters"]
        Draft202012Validator.check_schema(params)
        assert set(params["required"]) <= set(params["properties"])
        assert all(p["type"] in {"string", "integer"} and p["description"] for p in params["properties"].values())
    by_name = {t["name"]: t["parameters"] for t in tools}
    assert by_name["send_dm"]["required"] == ["room_id", "message"]
    assert by_name["npc_send_message"]["required"] == ["to", "message"]
    assert by_name["get_room_history"]["properties"]["limit"]["maximum"] == 200


# -- seeding and snapshots ------------------------------------------------------------------------------------


def test_seed_builds_rooms_messages_and_hidden_secrets(client: httpx.Client, chat_url: str, seeded: str) -> None:
    snapshot = client.get(f"{seeded}/snapshot").json()
    assert snapshot["tool_server"] == "chat"
    current = snapshot["state"]
    assert set(current) == {"npcs", "rooms", "messages", "settings"}
    assert current["settings"] == {"account": {"email": "ops@example.com"}}
    assert current["npcs"]["priya"]["email"] == "priya.raman@example.com"
    assert current["npcs"]["priya"]["secret"] == {"value": SECRET, "reveal_when": ["door code"]}
    assert current["npcs"]["jonas"]["secret"] is None and current["npcs"]["jonas"]["public_info"] is None
    assert set(current["rooms"]) == {"ch-general", "ch-releases", "dm-priya", "dm-jonas"}
    assert current["rooms"]["ch-general"] == {
        "id": "ch-general",
        "kind": "channel",
        "name": "general",
        "topic": "Announcements",
        "npc": None,
    }
    assert current["rooms"]["dm-priya"]["kind"] == "dm" and current["rooms"]["dm-priya"]["npc"] == "priya"
    messages = current["messages"]
    assert sorted(messages) == ["msg-0001", "msg-0002", "msg-0003"]
    assert messages["msg-0001"] == {
        "id": "msg-0001",
        "room_id": "ch-general",
        "sender": "jonas.weber@example.com",  # given as a profile id, stored as the address
        "text": "Code freeze on Wednesday.",
        "timestamp": "2025-03-10T09:00:00Z",
    }
    assert messages["msg-0002"]["timestamp"] == "2025-03-10T08:00:00Z"
    assert messages["msg-0003"]["room_id"] == "dm-priya"
    text = snapshot["text"]
    assert "Account: ops@example.com" in text and "[holds a secret]" in text and "#general (ch-general)" in text
    assert SECRET not in text  # the human-readable text may be shown anywhere; the state keeps the value
    empty = state(client, new_workspace(client, chat_url))
    assert empty == {"npcs": {}, "rooms": {}, "messages": {}, "settings": {"account": {"email": "agent@example.com"}}}


def test_engine_item_appended_last_resolves_earlier_references(client: httpx.Client, chat_url: str) -> None:
    scenario_file = {
        "channels": [{"name": "general", "messages": [{"from": "priya", "text": "Lab closed Friday."}]}],
        "direct_messages": [{"with": "Priya Raman", "from": "ops@example.com", "text": "Hi Priya"}],
        "npcs": [{**PRIYA, "secret": None}],
    }
    engine_item = {
        # The catalog's task profiles carry no public_info: a blank field must not erase the seeded one.
        "npcs": [{k: v for k, v in PRIYA.items() if k not in {"public_info", "secret"}}],
        "npc_secrets": {"priya": {"value": "42", "reveal_when": ["answer"]}},
    }
    url = new_workspace(client, chat_url, [{"account": "ops@example.com"}, scenario_file, engine_item])
    current = state(client, url)
    assert current["npcs"]["priya"]["public_info"] == "Runs the hardware lab."
    assert current["npcs"]["priya"]["secret"] == {"value": "42", "reveal_when": ["answer"]}
    first, second = current["messages"]["msg-0001"], current["messages"]["msg-0002"]
    assert first["sender"] == "priya.raman@example.com" and first["timestamp"] == "2025-01-06T09:00:00Z"
    assert second["room_id"] == "dm-priya" and second["sender"] == "ops@example.com"
    assert second["timestamp"] == "2025-01-06T09:01:00Z"


@pytest.mark.parametrize(
    ("seed", "fragment"),
    [
        (["not an object"], "seed file 0"),
        ([{"people": []}], "unknown key(s) ['people']"),
        ([{"account": "me"}], "account"),
        ([{"npcs": {}}], "npcs: expected a list"),
        ([{"npcs": [{"profile_id": "x"}]}], "npcs[0]"),
        ([{"npcs": [{**JONAS, "profile_id": "a/b"}]}], "profile_id 'a/b'"),
        ([{"npcs": [JONAS, {**JONAS, "profile_id": "other"}]}], "already belongs to NPC 'jonas'"),
        ([{"npcs": [{**JONAS, "email": "nobody"}]}], "email"),
        ([{"npc_secrets": {"ghost": {"value": "v", "reveal_when": ["x"]}}}], "unknown NPC profile_id 'ghost'"),
        ([{"npcs": [JONAS], "npc_secrets": {"jonas": "plain text"}}], "npc_secrets.jonas"),
        ([{"npcs": [JONAS], "npc_secrets": {"jonas": {"value": "v", "reveal_when": []}}}], "reveal_when"),
        ([{"npcs": [JONAS], "npc_secrets": {"jonas": {"value": "v", "reveal_when": [" "]}}}], "blank"),
        ([{"npcs": [JONAS], "npc_secrets": []}], "npc_secrets: expected an object"),
        ([{"channels": [{"name": "Bad Name!"}]}], "channels[0]: name"),
        ([{"channels": [{"name": "ok", "members": []}]}], "unknown key(s) ['members']"),
        ([{"channels": [{"name": "ok", "messages": [{"from": "a@b.org"}]}]}], "messages[0]: text"),
        ([{"channels": [{"name": "ok", "messages": [{"from": "ghost", "text": "t"}]}]}], "'ghost' is not an email"),
        (
            [{"channels": [{"name": "ok", "messages": [{"from": "a@b.org", "text": "t", "timestamp": "soon"}]}]}],
            "ISO 8601",
        ),
        ([{"direct_messages": [{"with": "nobody", "from": "a@b.org", "text": "t"}]}], "is not a seeded NPC"),
        (
            [{"npcs": [JONAS], "direct_messages": [{"with": "jonas", "from": "x@y.org", "text": "t"}]}],
            "a direct message comes from",
        ),
    ],
)
def test_malformed_seed_is_400(client: httpx.Client, chat_url: str, seed: list[Any], fragment: str) -> None:
    response = client.post(f"{chat_url}/workspaces", json={"workspace_id": "bad-chat-seed", "seed": seed})
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert fragment in detail and "invalid seed for 'chat'" in detail
    assert "v', 'reveal_when" not in detail  # secrets are never echoed back
    assert client.get(f"{chat_url}/workspaces/bad-chat-seed/snapshot").status_code == 404


def test_secret_values_never_appear_in_seed_errors(client: httpx.Client, chat_url: str) -> None:
    seed = [{"npcs": [JONAS], "npc_secrets": {"jonas": {"value": "TOP-SECRET-77", "reveal_when": "door"}}}]
    response = client.post(f"{chat_url}/workspaces", json={"seed": seed})
    assert response.status_code == 400 and "reveal_when" in response.json()["detail"]
    assert "TOP-SECRET-77" not in response.text


def test_seeding_an_existing_workspace_merges_or_changes_nothing(client: httpx.Client, chat_url: str) -> None:
    url = new_workspace(client, chat_url, [{"npcs": [JONAS]}])
    extra = {"channels": [{"name": "random", "messages": [{"from": "jonas", "text": "cake!"}]}]}
    assert client.post(f"{url}/seed", json={"seed": [extra]}).status_code == 200
    before = state(client, url)
    assert before["messages"]["msg-0001"]["room_id"] == "ch-random"
    failed = client.post(f"{url}/seed", json={"seed": [{"channels": [{"name": "x"}]}, {"npc_secrets": {"z": {}}}]})
    assert failed.status_code == 400 and "seed file 1" in failed.json()["detail"]
    assert state(client, url) == before


# -- channels ---------------------------------------------------------------------------------------------


def test_list_channels(client: httpx.Client, chat_url: str, seeded: str) -> None:
    listing = _ok(step(client, seeded, "list_channels"))
    assert listing.splitlines() == [
        "2 channel(s):",
        "#general (ch-general) - Announcements; 2 message(s)",
        "#releases (ch-releases); 0 message(s)",
    ]
    empty = new_workspace(client, chat_url)
    assert step(client, empty, "list_channels")["observation"] == "There are no channels."


def test_get_room_history_resolves_rooms_and_limits(client: httpx.Client, seeded: str) -> None:
    full = _ok(step(client, seeded, "get_room_history", room_id="#general"))
    lines = full.splitlines()
    assert lines[0] == "#general (ch-general): 2 message(s); showing the last 2, oldest first:"
    assert lines[1] == "[msg-0002] 2025-03-10T08:00:00Z someone@partner.org: Hello from a guest."
    assert (
        lines[2] == "[msg-0001] 2025-03-10T09:00:00Z Jonas Weber <jonas.weber@example.com>: Code freeze on Wednesday."
    )
    for alias in ("general", "ch-general", " #GENERAL "):
        assert step(client, seeded, "get_room_history", room_id=alias)["observation"] == full
    last = step(client, seeded, "get_room_history", room_id="general", limit=1)["observation"]
    assert last.splitlines()[1:] == lines[2:]
    dm = _ok(step(client, seeded, "get_room_history", room_id="Priya"))
    assert dm.startswith("direct messages with Priya Raman (dm-priya): 1 message(s)")
    assert step(client, seeded, "get_room_history", room_id="dm-priya")["observation"] == dm
    empty = step(client, seeded, "get_room_history", room_id="releases")["observation"]
    assert empty == "No messages in #releases (ch-releases) yet."
    unknown = _error(step(client, seeded, "get_room_history", room_id="#nope"))
    assert unknown.startswith("Unknown room '#nope'. Channels: #general, #releases.")


def test_send_channel_message_reports_a_diff_and_is_deterministic(client: httpx.Client, chat_url: str) -> None:
    urls = [new_workspace(client, chat_url, [copy.deepcopy(SEED)]) for _ in range(2)]
    bodies = [
        step(client, url, "send_channel_message", channel="#releases", message="Ship it\non Friday") for url in urls
    ]
    assert bodies[0] == bodies[1]
    body = bodies[0]
    assert body["observation"] == "Message posted to #releases (ch-releases) [msg-0004]."
    diff = StateDiff.model_validate(body["state_diff"])
    assert diff.summary == "+1 message(s) added" and diff.tool_name == "send_channel_message" and diff.step_index == 0
    assert diff.after == {
        "messages": {
            "msg-0004": {
                "id": "msg-0004",
                "room_id": "ch-releases",
                "sender": "ops@example.com",
                "text": "Ship it\non Friday",
                "timestamp": "2025-03-10T09:01:00Z",
            }
        }
    }
    history = step(client, urls[0], "get_room_history", room_id="releases")["observation"]
    assert history.endswith("You (ops@example.com): Ship it\n    on Friday")
    assert state(client, urls[0]) == state(client, urls[1])


def test_send_channel_message_errors_change_nothing(client: httpx.Client, seeded: str) -> None:
    before = state(client, seeded)
    dm_room = _error(step(client, seeded, "send_channel_message", channel="dm-priya", message="hi"))
    assert "direct-message room, not a channel" in dm_room and "send_dm" in dm_room
    assert "Unknown room 'nope'" in _error(step(client, seeded, "send_channel_message", channel="nope", message="x"))
    blank = _error(step(client, seeded, "send_channel_message", channel="general", message="  \n "))
    assert blank == "The message is empty; write something to send"
    assert state(client, seeded) == before


# -- direct messages and NPCs -------------------------------------------------------------------------------


def test_get_dm_room_finds_colleagues_by_any_name(client: httpx.Client, seeded: str) -> None:
    expected = (
        "Direct-message room with Priya Raman (Lab Manager, priya.raman@example.com): dm-priya. 1 message(s) so far. "
        "Use send_dm with room_id 'dm-priya' to write to them."
    )
    for ref in ("priya", "PRIYA.RAMAN@example.com", "priya raman", "Priya", "@priya", "dm-priya"):
        assert step(client, seeded, "get_dm_room", user=ref)["observation"] == expected
    unknown = _error(step(client, seeded, "get_dm_room", user="Zed"))
    assert unknown == (
        "Unknown colleague 'Zed'. People you can message: Jonas Weber (jonas.weber@example.com), "
        "Priya Raman (priya.raman@example.com)"
    )


def test_ambiguous_first_name_is_refused(client: httpx.Client, chat_url: str) -> None:
    weber = {**JONAS, "profile_id": "jw"}
    berg = {**JONAS, "profile_id": "jb", "last_name": "Berg", "email": "jonas.berg@example.com"}
    url = new_workspace(client, chat_url, [{"npcs": [weber, berg]}])
    assert "Unknown colleague 'Jonas'" in _error(step(client, url, "send_dm", room_id="Jonas", message="hi"))
    assert "Unknown colleague 'jonas'" in _error(step(client, url, "get_dm_room", user="jonas"))
    assert "dm-jb" in step(client, url, "get_dm_room", user="Jonas Berg")["observation"]


def test_send_dm_stores_the_message_and_the_reply(client: httpx.Client, seeded: str) -> None:
    body = step(client, seeded, "send_dm", room_id="dm-jonas", message="Release notes are due Friday.")
    observation = _ok(body)
    assert observation == (
        "Message sent to Jonas Weber in dm-jonas [msg-0004].\n"
        "Jonas Weber replied [msg-0005]: Thanks, Jonas here. Noted!"
    )
    diff = StateDiff.model_validate(body["state_diff"])
    assert diff.summary == "+2 message(s) added" and not diff.before
    sent, reply = diff.after["messages"]["msg-0004"], diff.after["messages"]["msg-0005"]
    assert (sent["sender"], sent["room_id"], sent["timestamp"]) == (
        "ops@example.com",
        "dm-jonas",
        "2025-03-10T09:01:00Z",
    )
    assert (reply["sender"], reply["room_id"], reply["timestamp"]) == (
        "jonas.weber@example.com",
        "dm-jonas",
        "2025-03-10T09:02:00Z",
    )
    # The other colleague forms of the room id reach the same room.
    again = step(client, seeded, "send_dm", room_id="Jonas Weber", message="Any questions?")
    assert "in dm-jonas [msg-0006]" in again["observation"] and "Good question" in again["observation"]


def test_send_dm_errors_change_nothing(client: httpx.Client, seeded: str) -> None:
    before = state(client, seeded)
    channel = _error(step(client, seeded, "send_dm", room_id="#general", message="hi"))
    assert channel == "'#general' is a channel, not a colleague; use send_channel_message to post there"
    assert "is a channel" in _error(step(client, seeded, "send_dm", room_id="ch-general", message="hi"))
    assert "Unknown colleague 'dm-ghost'" in _error(step(client, seeded, "send_dm", room_id="dm-ghost", message="x"))
    assert "empty" in _error(step(client, seeded, "npc_send_message", to="priya", message="\t"))
    assert "Unknown colleague 'bob'" in _error(step(client, seeded, "npc_send_message", to="bob", message="x"))
    assert state(client, seeded) == before


def test_npc_list_contacts_and_npc_send_message(client: httpx.Client, chat_url: str, seeded: str) -> None:
    contacts = _ok(step(client, seeded, "npc_list_contacts"))
    assert contacts.splitlines() == [
        "2 colleague(s) you can message:",
        "Jonas Weber <jonas.weber@example.com> - Release Manager (id jonas, room dm-jonas).",
        "Priya Raman <priya.raman@example.com> - Lab Manager (id priya, room dm-priya). Runs the hardware lab.",
    ]
    sent = step(client, seeded, "npc_send_message", to="priya.raman@example.com", message="Hello!")
    assert sent["observation"].startswith("Message sent to Priya Raman in dm-priya [msg-0004].\nPriya Raman replied")
    assert sent["state_diff"]["summary"] == "+2 message(s) added"
    empty = new_workspace(client, chat_url)
    assert step(client, empty, "npc_list_contacts")["observation"] == "There is nobody to message."


def test_secret_stays_out_of_observations_until_asked_for(client: httpx.Client, seeded: str) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_channels", {}),
        ("npc_list_contacts", {}),
        ("get_dm_room", {"user": "priya"}),
        ("get_room_history", {"room_id": "dm-priya"}),
        ("send_dm", {"room_id": "dm-priya", "message": "Can you tell me the code for the lab?"}),
        ("npc_send_message", {"to": "priya", "message": "What is the secret?"}),
        ("send_channel_message", {"channel": "general", "message": "Who knows the lab code?"}),
        ("get_room_history", {"room_id": "dm-priya"}),
        ("send_dm", {"room_id": "nobody", "message": "x"}),
        ("nope", {}),
    ]
    for tool_name, parameters in calls:
        body = step(client, seeded, tool_name, **parameters)
        assert SECRET not in str(body), f"{tool_name} leaked the secret: {body}"
    asked = step(client, seeded, "send_dm", room_id="dm-priya", message="What is the lab's DOOR CODE, please?")
    assert (
        f"Priya Raman replied [msg-0010]: Sure. Since you're asking about the door code: {SECRET}."
        in (asked["observation"])
    )
    assert SECRET in step(client, seeded, "get_room_history", room_id="priya")["observation"]


# -- validation and workspaces ----------------------------------------------------------------------------------


def test_parameter_validation_names_tool_and_parameter(client: httpx.Client, seeded: str) -> None:
    missing = _error(step(client, seeded, "send_dm", room_id="dm-jonas"))
    assert missing == "Invalid parameters for send_dm: 'message' is a required property"
    wrong_type = _error(step(client, seeded, "get_room_history", room_id="general", limit="5"))
    assert wrong_type.startswith("Invalid parameters for get_room_history: parameter 'limit'")
    too_many = _error(step(client, seeded, "get_room_history", room_id="general", limit=201))
    assert "parameter 'limit'" in too_many
    extra = _error(step(client, seeded, "list_channels", verbose=True))
    assert "unexpected parameter(s) 'verbose'" in extra
    too_long = _error(step(client, seeded, "send_channel_message", channel="general", message="x" * 4001))
    assert "parameter 'message'" in too_long and "too long" in too_long
    assert _error(step(client, seeded, "post_message")).startswith("Unknown tool 'post_message' on tool server 'chat'")
    StepResponse.model_validate(step(client, seeded, "post_message"))


def test_workspace_lifecycle(client: httpx.Client, chat_url: str, seeded: str) -> None:
    root = step(client, chat_url, "list_channels")
    assert root == {"observation": "There are no channels."}  # the root `default` workspace starts empty
    assert client.delete(seeded).json()["deleted"] is True
    gone = client.post(f"{seeded}/step", json={"action": {"tool_name": "list_channels", "parameters": {}}})
    assert gone.status_code == 404


async def test_concurrent_workspaces_are_isolated(chat_url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:

        async def drive(n: int) -> tuple[int, dict[str, Any]]:
            created = await http.post(f"{chat_url}/workspaces", json={"seed": [copy.deepcopy(SEED)]})
            assert created.status_code == 201
            url = f"{chat_url}{created.json()['path']}"
            for k in range(3):
                for tool, params in (
                    ("send_dm", {"room_id": "dm-jonas", "message": f"w{n}-dm-{k}"}),
                    ("send_channel_message", {"channel": "releases", "message": f"w{n}-post-{k}"}),
                ):
                    body = {"action": {"tool_name": tool, "parameters": params}}
                    response = (await http.post(f"{url}/step", json=body)).json()
                    assert "is_error" not in response, response
            snapshot = (await http.get(f"{url}/snapshot")).json()["state"]
            await http.delete(url)
            return n, snapshot

        results = await asyncio.gather(*(drive(n) for n in range(8)))
    for n, snapshot in results:
        mine = {m["text"] for m in snapshot["messages"].values() if m["sender"] == "ops@example.com"}
        assert mine == {f"w{n}-{kind}-{k}" for kind in ("dm", "post") for k in range(3)}
        assert sorted(snapshot["messages"]) == [f"msg-{i:04d}" for i in range(1, 13)]


def test_default_server_plays_npcs_with_the_simulated_model() -> None:
    assert ChatServer().responder.model == SIM_NPC
