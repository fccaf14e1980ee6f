"""An NPC's per-task personality (SimLab's NPC chat: role, traits, context, quirks), its chat handle and a secret
with no reveal topics: kept in the chat state, written into the prompt that plays the NPC, and acted on."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from eval_pipelines.sim.npc import parse_persona_prompt
from eval_pipelines.toolservers.base import ToolContext
from eval_pipelines.toolservers.chat import ChatServer
from eval_pipelines.toolservers.npc import npc_seed_item, withheld_secrets
from tests.support.npc_responder import RecordingResponder

SARAH = {
    "profile_id": "sarah_chen",
    "first_name": "Sarah",
    "last_name": "Chen",
    "email": "sarah_chen@example.com",
    "occupation": "Customer",
    "username": "sarah.chen",
}
PERSONALITY = {
    "role": "frustrated_customer",
    "traits": "impatient, detail-oriented",
    "context": "Her laptop order #4411 is three weeks late.",
    "quirks": "writes in short bursts",
}
PREFERENCE = "prefers mornings"


def _seeded(seed: list[Any]) -> tuple[ChatServer, RecordingResponder, ToolContext]:
    responder = RecordingResponder()
    server = ChatServer(responder=responder)
    state = server.new_state()
    server.seed(state, copy.deepcopy(seed))
    return server, responder, ToolContext(workspace_id="w", state=state)


def _seed() -> list[Any]:
    # a task's chat seed file holds the NPC with its personality; the engine's item (profiles and secrets) is last
    return [
        {"npcs": [{**SARAH, "personality": PERSONALITY}]},
        npc_seed_item([{k: v for k, v in SARAH.items()}], {"sarah_chen": {"value": PREFERENCE}}),
    ]


def test_the_personality_and_a_topicless_secret_reach_the_prompt_that_plays_the_npc() -> None:
    server, responder, ctx = _seeded(_seed())
    npc = ctx.state["npcs"]["sarah_chen"]
    assert npc["personality"] == PERSONALITY and npc["username"] == "sarah.chen"
    assert npc["secret"] == {"value": PREFERENCE, "reveal_when": None}

    ask = f"Is it true you {PREFERENCE.replace('prefers', 'prefer')}? When would suit you?"
    reply = server.call(ctx, "npc_send_message", {"to": "Sarah Chen", "message": ask})
    [prompt] = responder.prompts
    system = prompt[0].content or ""
    persona = parse_persona_prompt(system)
    assert persona is not None
    assert (persona.part, persona.traits, persona.situation, persona.style) == (
        "frustrated_customer",
        "impatient, detail-oriented",
        "Her laptop order #4411 is three weeks late.",
        "writes in short bursts",
    )
    assert persona.secret == PREFERENCE and persona.reveal_when == ()
    assert "never tell it to anyone" in system
    # a secret no topic unlocks is never told, even asked about it word for word
    said = reply.partition("Sarah Chen replied")[2]
    assert said and "mornings" not in said
    assert withheld_secrets(ctx.state) == []


def test_a_later_item_without_a_personality_does_not_erase_it() -> None:
    _, _, ctx = _seeded([{"npcs": [{**SARAH, "personality": PERSONALITY}]}, {"npcs": [SARAH]}])
    assert ctx.state["npcs"]["sarah_chen"]["personality"] == PERSONALITY


def test_the_agent_may_address_an_npc_by_its_chat_handle() -> None:
    server, responder, ctx = _seeded(_seed())
    reply = server.call(ctx, "npc_send_message", {"to": "@sarah.chen", "message": "Hello"})
    assert "Sarah Chen replied" in reply and len(responder.prompts) == 1
    contacts = server.call(ctx, "npc_list_contacts", {})
    assert "@sarah.chen" in contacts
    # the context is the NPC's own: the agent's contact list does not show it
    assert "4411" not in contacts


def test_an_npc_without_personality_or_handle_keeps_the_state_shape() -> None:
    plain = {k: v for k, v in SARAH.items() if k != "username"}
    _, _, ctx = _seeded([npc_seed_item([plain])])
    assert set(ctx.state["npcs"]["sarah_chen"]) == {
        "profile_id",
        "first_name",
        "last_name",
        "email",
        "occupation",
        "public_info",
        "secret",
    }


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        ([{"npcs": [{**SARAH, "personality": {"mood": "sad"}}]}], "npcs[0]: personality: mood"),
        ([{"npcs": [{**SARAH, "personality": {"traits": ["curt"]}}]}], "npcs[0]: personality: traits"),
        (
            [{"npcs": [SARAH, {**SARAH, "profile_id": "other", "email": "other@example.com"}]}],
            "username 'sarah.chen' already belongs to NPC 'sarah_chen'",
        ),
        ([{"npcs": [SARAH], "npc_secrets": {"sarah_chen": {"value": "v", "reveal_when": []}}}], "reveal_when"),
    ],
)
def test_a_bad_personality_or_handle_is_refused_naming_the_field(seed: list[Any], message: str) -> None:
    server = ChatServer()
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        server.seed(server.new_state(), seed)
