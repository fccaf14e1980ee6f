"""The NPC persona prompt and the offline SIMULATED NPC model that reads it (served as model `sim-npc`).

The persona prompt is the contract between the chat tool server (which writes it from an NPC profile and the
task's secret) and whatever model plays the NPC. It reads naturally for a real model, and every fact sits on
its own labelled line, with the secret and its topics JSON-encoded, so the simulated NPC can parse it back
without guessing.

`sim_npc_persona` is deterministic: it reveals the secret only when the colleague's latest message names
one of the reveal topics (case-insensitive, whole words, plural allowed), and otherwise answers politely
without it. Register it with `create_sim_app(book, personas={SIM_NPC: sim_npc_persona})`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from eval_pipelines.llm.types import ChatRequest

SIM_NPC = "sim-npc"

_INTRO = "You are role-playing a colleague on the company's team chat."
_NAME = "Name: "
_ROLE = "Role: "
_EMAIL = "Email: "
_ABOUT = "About you: "
_COLLEAGUE = "You are chatting with: "
_PART = "Your part here: "
_TRAITS = "Personality: "
_SITUATION = "Situation: "
_STYLE = "Communication style: "
_SECRET = "Confidential information you know: "
_REVEAL = "Share it only if your colleague asks about one of these topics: "
_REVEAL_TAIL = ". Otherwise never mention it, and never hint that you know it."
#: A secret with no reveal topics (SimLab's plain-text `secret`) is one the NPC acts on but never tells.
_NEVER_TOLD = "Let it guide what you say and do, but never tell it to anyone, and never hint that you know it."

UNKNOWN_PERSONA_REPLY = "Sorry, I think this message reached the wrong person."


@dataclass(frozen=True)
class NpcPersona:
    """Who the NPC is, who it talks to, and what it keeps to itself until asked."""

    name: str
    occupation: str = ""
    email: str = ""
    public_info: str = ""
    colleague: str = ""
    secret: str | None = None
    reveal_when: tuple[str, ...] = ()
    #: the task's personality of the NPC (SimLab's NPC chat: role, traits, context, quirks)
    part: str = ""
    traits: str = ""
    situation: str = ""
    style: str = ""

    @property
    def first_name(self) -> str:
        return self.name.split()[0] if self.name.split() else self.name


def _one_line(text: str) -> str:
    # Each fact must stay on its labelled line, or the parser would read the rest as instructions.
    return " ".join(text.split())


def persona_system_prompt(persona: NpcPersona) -> str:
    """The system prompt that makes any chat model play `persona`."""
    name = _one_line(persona.name)
    lines = [_INTRO, f"{_NAME}{name}"]
    if persona.occupation.strip():
        lines.append(f"{_ROLE}{_one_line(persona.occupation)}")
    if persona.email.strip():
        lines.append(f"{_EMAIL}{_one_line(persona.email)}")
    if persona.public_info.strip():
        lines.append(f"{_ABOUT}{_one_line(persona.public_info)}")
    if persona.colleague.strip():
        lines.append(f"{_COLLEAGUE}{_one_line(persona.colleague)}")
    for label, value in ((_PART, persona.part), (_TRAITS, persona.traits), (_SITUATION, persona.situation)):
        if value.strip():
            lines.append(f"{label}{_one_line(value)}")
    if persona.style.strip():
        lines.append(f"{_STYLE}{_one_line(persona.style)}")
    lines.append(
        f"Reply as {name} would: briefly, in plain text, in the first person. Stay in character and never say "
        "that you are an AI, a model or a simulation."
    )
    if persona.secret is not None:
        lines += ["", f"{_SECRET}{json.dumps(persona.secret, ensure_ascii=False)}"]
        if persona.reveal_when:
            lines.append(f"{_REVEAL}{json.dumps(list(persona.reveal_when), ensure_ascii=False)}{_REVEAL_TAIL}")
        else:
            lines.append(_NEVER_TOLD)
    return "\n".join(lines)


def _labelled(lines: list[str], label: str) -> str | None:
    for line in lines:
        if line.startswith(label):
            return line[len(label) :].strip()
    return None


def parse_persona_prompt(text: str) -> NpcPersona | None:
    """The persona written by `persona_system_prompt`, or None when `text` is not such a prompt."""
    lines = text.splitlines()
    name = _labelled(lines, _NAME)
    if not name or _INTRO not in lines:
        return None
    secret: str | None = None
    reveal_when: tuple[str, ...] = ()
    raw_secret = _labelled(lines, _SECRET)
    raw_reveal = _labelled(lines, _REVEAL)
    if raw_secret is not None and raw_reveal is not None and raw_reveal.endswith(_REVEAL_TAIL):
        try:
            value = json.loads(raw_secret)
            topics = json.loads(raw_reveal[: -len(_REVEAL_TAIL)])
        except ValueError:
            value, topics = None, None
        if isinstance(value, str) and isinstance(topics, list) and all(isinstance(t, str) for t in topics):
            secret, reveal_when = value, tuple(topics)
    elif raw_secret is not None and _NEVER_TOLD in lines:
        secret = _json_text(raw_secret)
    return NpcPersona(
        name=name,
        occupation=_labelled(lines, _ROLE) or "",
        email=_labelled(lines, _EMAIL) or "",
        public_info=_labelled(lines, _ABOUT) or "",
        colleague=_labelled(lines, _COLLEAGUE) or "",
        secret=secret,
        reveal_when=reveal_when,
        part=_labelled(lines, _PART) or "",
        traits=_labelled(lines, _TRAITS) or "",
        situation=_labelled(lines, _SITUATION) or "",
        style=_labelled(lines, _STYLE) or "",
    )


def _json_text(raw: str) -> str | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def matched_topic(message: str, topics: tuple[str, ...] | list[str]) -> str | None:
    """The first topic `message` names: case-insensitive, whole words, whitespace-insensitive, plural allowed."""
    haystack = " ".join(message.split())
    for topic in topics:
        words = topic.split()
        if not words:
            continue
        pattern = r"\s+".join(re.escape(w) for w in words)
        if re.search(rf"(?<![0-9A-Za-z]){pattern}(?:s|es)?(?![0-9A-Za-z])", haystack, re.IGNORECASE):
            return " ".join(words)
    return None


def sim_npc_persona(request: ChatRequest) -> str:
    """A simulated NPC's reply to the latest colleague message in `request` (deterministic)."""
    system = next((m.content for m in request.messages if m.role == "system" and m.content), None)
    persona = parse_persona_prompt(system) if system else None
    if persona is None:
        return UNKNOWN_PERSONA_REPLY
    last = next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "")
    if not last.strip():
        return f"Hi, {persona.first_name} here. What can I do for you?"
    if persona.secret is not None:
        topic = matched_topic(last, persona.reveal_when)
        if topic is not None:
            return f"Sure. Since you're asking about the {topic}: {persona.secret}. Please keep it to yourself."
    if "?" in last:
        return (
            f"Hi, {persona.first_name} here. Good question, but I'm afraid I can't help with that one. "
            "Is there anything else you need?"
        )
    return f"Thanks, {persona.first_name} here. Noted!"


__all__ = [
    "SIM_NPC",
    "UNKNOWN_PERSONA_REPLY",
    "NpcPersona",
    "matched_topic",
    "parse_persona_prompt",
    "persona_system_prompt",
    "sim_npc_persona",
]
