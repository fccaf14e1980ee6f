"""The persona prompt contract and the simulated NPC that reads it (pure functions, deterministic)."""

from __future__ import annotations

import pytest

from eval_pipelines.llm.types import ChatMessage, ChatRequest
from eval_pipelines.sim.npc import (
    SIM_NPC,
    UNKNOWN_PERSONA_REPLY,
    NpcPersona,
    matched_topic,
    parse_persona_prompt,
    persona_system_prompt,
    sim_npc_persona,
)
from eval_pipelines.toolservers.npc import persona_messages

PERSONA = NpcPersona(
    name="Priya Raman",
    occupation="Lab Manager, Hardware",
    email="priya.raman@example.com",
    public_info="Runs the lab.\nKnows everyone.",
    colleague="agent@example.com",
    secret='4827# "north"\ndoor',
    reveal_when=("door code", "keypad"),
)


def _ask(persona: NpcPersona, *turns: str) -> str:
    messages = [ChatMessage.system(persona_system_prompt(persona))]
    for index, text in enumerate(turns):
        messages.append(ChatMessage(role="user" if index % 2 == 0 else "assistant", content=text))
    return sim_npc_persona(ChatRequest(model=SIM_NPC, messages=messages))


def test_prompt_reads_naturally_and_round_trips() -> None:
    prompt = persona_system_prompt(PERSONA)
    assert "Name: Priya Raman\nRole: Lab Manager, Hardware\n" in prompt
    assert "About you: Runs the lab. Knows everyone." in prompt  # one fact, one line
    assert 'Share it only if your colleague asks about one of these topics: ["door code", "keypad"]' in prompt
    assert "never say that you are an AI" in prompt
    parsed = parse_persona_prompt(prompt)
    assert parsed == NpcPersona(
        name="Priya Raman",
        occupation="Lab Manager, Hardware",
        email="priya.raman@example.com",
        public_info="Runs the lab. Knows everyone.",
        colleague="agent@example.com",
        secret='4827# "north"\ndoor',
        reveal_when=("door code", "keypad"),
    )


def test_prompt_without_secret_mentions_none() -> None:
    plain = NpcPersona(name="Jonas Weber")
    prompt = persona_system_prompt(plain)
    assert "Confidential" not in prompt and "Role:" not in prompt
    assert parse_persona_prompt(prompt) == plain
    assert parse_persona_prompt("You are a helpful assistant.") is None
    assert parse_persona_prompt("Name: Someone") is None  # not our prompt without the introduction


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("What's the DOOR CODE?", "door code"),
        ("what are the door\n  codes for the lab", "door code"),
        ("Is the keypad working?", "keypad"),
        ("keypads everywhere", "keypad"),
        ("door-code please", None),
        ("the doorcode", None),
        ("the code of the door", None),
        ("my keypadlock", None),
        ("", None),
    ],
)
def test_matched_topic_is_case_insensitive_whole_words(message: str, expected: str | None) -> None:
    assert matched_topic(message, ("door code", "keypad")) == expected


def test_matched_topic_ignores_blank_topics_and_needs_word_boundaries() -> None:
    assert matched_topic("lab is available", ("  ", "lab")) == "lab"
    assert matched_topic("it is available", ("lab",)) is None


def test_sim_reveals_only_when_the_latest_message_asks() -> None:
    assert _ask(PERSONA, "Hi Priya, how are you?") == (
        "Hi, Priya here. Good question, but I'm afraid I can't help with that one. Is there anything else you need?"
    )
    assert _ask(PERSONA, "Thanks for the help.") == "Thanks, Priya here. Noted!"
    revealed = _ask(PERSONA, "Could you share the Door Code?")
    assert (
        revealed == 'Sure. Since you\'re asking about the door code: 4827# "north"\ndoor. Please keep it to yourself.'
    )
    # Only the latest message counts: an earlier question does not unlock a later, unrelated one.
    assert "4827#" not in _ask(PERSONA, "door code?", "Sure...", "And what about lunch?")
    assert _ask(PERSONA, "Could you share the Door Code?") == revealed  # deterministic


def test_sim_without_secret_or_persona() -> None:
    plain = NpcPersona(name="Jonas Weber", occupation="Release Manager")
    assert "Jonas here" in _ask(plain, "door code?")
    assert _ask(plain) == "Hi, Jonas here. What can I do for you?"
    unknown = ChatRequest(model=SIM_NPC, messages=[ChatMessage.system("Be nice."), ChatMessage.user("door code?")])
    assert sim_npc_persona(unknown) == UNKNOWN_PERSONA_REPLY


def test_persona_messages_map_roles_and_cap_memory() -> None:
    npc = {"first_name": "Priya", "last_name": "Raman", "email": "p@example.com", "occupation": "Lab Manager"}
    history = [{"sender": "p@example.com" if i % 2 else "agent@example.com", "text": f"m{i}"} for i in range(30)]
    messages = persona_messages(npc, "agent@example.com", history, "new")
    assert messages[0].role == "system" and "Name: Priya Raman" in (messages[0].content or "")
    assert len(messages) == 1 + 20  # the NPC remembers its 20 latest messages, the new one included
    assert [m.content for m in messages[1:3]] == ["m11", "m12"]
    assert [m.role for m in messages[1:3]] == ["assistant", "user"]
    assert messages[-1].role == "user" and messages[-1].content == "new"
    short = persona_messages(npc, "agent@example.com", history[:2], "new")
    assert [m.content for m in short[1:]] == ["m0", "m1", "new"]
