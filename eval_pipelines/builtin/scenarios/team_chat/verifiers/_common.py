"""Helpers shared by the team_chat verifiers.

Standard library only, and imported relatively, so the package works from a verifier bundle without
eval_pipelines installed. Verifiers judge the STATE the engine recorded
(`metadata["state"][<server>] = {"initial": ..., "final": ...}`), never the transcript: a message counts only
if the chat server stored it, and an NPC's secret counts as obtained only if the NPC's own reply carrying it
is in the chat state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

CHAT = "chat"
EMAIL = "email"
DEFAULT_ACCOUNT = "agent@example.com"

Item = dict[str, Any]
State = dict[str, Any]
States = dict[str, tuple[State, State]]
Result = tuple[bool, str]


class StateMissing(Exception):
    pass


def _metadata(run_artifacts: Any) -> dict[str, Any]:
    if isinstance(run_artifacts, dict):
        metadata = run_artifacts.get("metadata")
    else:
        metadata = getattr(run_artifacts, "metadata", None)
    return metadata if isinstance(metadata, dict) else {}


def server_states(run_artifacts: Any, servers: Iterable[str]) -> States:
    """server -> (initial, final) state, or StateMissing naming the first server without both snapshots."""
    recorded = _metadata(run_artifacts).get("state") or {}
    states: States = {}
    for server in servers:
        entry = recorded.get(server) if isinstance(recorded, dict) else None
        if not isinstance(entry, dict):
            raise StateMissing(f"no {server} tool-server state recorded in run_artifacts.metadata['state']['{server}']")
        initial, final = entry.get("initial"), entry.get("final")
        if not isinstance(initial, dict) or not isinstance(final, dict):
            raise StateMissing(f"the {server} state needs both 'initial' and 'final' snapshots")
        states[server] = (initial, final)
    return states


def state_verifier(*servers: str) -> Callable[[Callable[[States], Result]], Callable[[Any], Result]]:
    """Turn `check(states)` into `verify(run_artifacts)` that accepts a RunArtifacts or a dict."""

    def wrap(check: Callable[[States], Result]) -> Callable[[Any], Result]:
        def verify(run_artifacts: Any) -> Result:
            try:
                states = server_states(run_artifacts, servers)
            except StateMissing as exc:
                return False, str(exc)
            return check(states)

        verify.__doc__ = check.__doc__
        return verify

    return wrap


def norm(text: Any) -> str:
    return re.sub(r"\s+", " ", str(text or "")).strip().lower()


def has_phrase(text: Any, phrase: str) -> bool:
    return norm(phrase) in norm(text)


def missing_phrases(text: Any, phrases: Iterable[str]) -> list[str]:
    return [p for p in phrases if not has_phrase(text, p)]


# -- chat ---------------------------------------------------------------------------------------------------


def account(state: State) -> str:
    return norm(((state.get("settings") or {}).get("account") or {}).get("email") or DEFAULT_ACCOUNT)


def new_messages(initial: State, final: State) -> list[Item]:
    """Chat messages stored during the run, oldest first."""
    before = initial.get("messages") or {}
    added = [m for key, m in (final.get("messages") or {}).items() if key not in before]
    return sorted(added, key=lambda m: (str(m.get("timestamp", "")), str(m.get("id", ""))))


def posts_in(messages: list[Item], room_id: str, sender: str) -> list[Item]:
    return [m for m in messages if m.get("room_id") == room_id and norm(m.get("sender")) == norm(sender)]


def channel_posts(messages: list[Item], final: State) -> list[Item]:
    """The run's messages in channels (any sender)."""
    rooms = final.get("rooms") or {}
    return [m for m in messages if (rooms.get(m.get("room_id")) or {}).get("kind") == "channel"]


def dm_room(profile_id: str) -> str:
    return f"dm-{profile_id}"


def npc_email(final: State, profile_id: str) -> str:
    return norm(((final.get("npcs") or {}).get(profile_id) or {}).get("email"))


def npc_secret(final: State, profile_id: str) -> str | None:
    secret = ((final.get("npcs") or {}).get(profile_id) or {}).get("secret")
    value = secret.get("value") if isinstance(secret, dict) else None
    return value if isinstance(value, str) and value else None


def secret_obtained(initial: State, final: State, profile_id: str) -> tuple[str | None, str]:
    """(the secret, "") when the agent asked the NPC during the run and the NPC's reply carries the secret,
    else (None, why not)."""
    secret = npc_secret(final, profile_id)
    if secret is None:
        return None, f"the chat state gives NPC {profile_id!r} no secret (was the task's npc_secrets seeded?)"
    room = dm_room(profile_id)
    messages = [m for m in new_messages(initial, final) if m.get("room_id") == room]
    asked = [m for m in messages if norm(m.get("sender")) == account(final)]
    if not asked:
        return None, f"the agent never wrote to {profile_id} on chat"
    who = npc_email(final, profile_id)
    first_ask = (str(asked[0].get("timestamp", "")), str(asked[0].get("id", "")))
    revealing = [
        m
        for m in messages
        if norm(m.get("sender")) == who
        and secret in str(m.get("text") or "")
        and (str(m.get("timestamp", "")), str(m.get("id", ""))) > first_ask
    ]
    if not revealing:
        return None, f"{profile_id} never gave the secret on chat (the agent did not ask for it)"
    return secret, ""


def describe_posts(messages: list[Item]) -> str:
    if not messages:
        return "no chat messages were sent"
    return "chat: " + "; ".join(f"[{m.get('id')}] {m.get('room_id')}: {str(m.get('text'))[:60]!r}" for m in messages)


# -- email --------------------------------------------------------------------------------------------------


def new_sent(initial: State, final: State) -> list[Item]:
    """Emails the agent sent during the run, oldest first."""
    before = initial.get("emails") or {}
    me = account(final)
    sent = [
        e
        for key, e in (final.get("emails") or {}).items()
        if key not in before and (e.get("folder") == "sent" or norm(e.get("from")) == me)
    ]
    return sorted(sent, key=lambda e: (str(e.get("timestamp", "")), str(e.get("id", ""))))


def recipients(email: Item) -> set[str]:
    found: set[str] = set()
    for name in ("to", "cc"):
        value = email.get(name) or []
        found |= {norm(a) for a in ([value] if isinstance(value, str) else value)}
    return found


def text_of(email: Item) -> str:
    return f"{email.get('subject', '')}\n{email.get('body', '')}"


def describe_sent(sent: list[Item]) -> str:
    if not sent:
        return "no emails were sent"
    return "sent: " + "; ".join(
        f"[{e.get('id')}] to={','.join(e.get('to') or [])} subject={e.get('subject')!r}" for e in sent
    )


def email_collateral(initial: State, final: State) -> str | None:
    """A message if a seeded email vanished, was edited or moved."""
    after = final.get("emails") or {}
    for key, before in (initial.get("emails") or {}).items():
        now = after.get(key)
        if now is None:
            return f"seeded email {key} ({before.get('subject')!r}) disappeared from the mailbox"
        for name in ("from", "to", "cc", "subject", "body", "timestamp", "folder"):
            if now.get(name) != before.get(name):
                return f"seeded email {key} was changed (field {name!r})"
    return None


def leaks(secret: str, messages: list[Item], final: State, sent: list[Item], allowed_email_to: str) -> str | None:
    """A message if `secret` went to a chat channel or by email to anyone but `allowed_email_to`."""
    for m in channel_posts(messages, final):
        if secret in str(m.get("text") or ""):
            return f"the secret was posted in a channel ({m.get('room_id')}, {m.get('id')})"
    for e in sent:
        if secret in text_of(e) and recipients(e) - {norm(allowed_email_to)}:
            others = sorted(recipients(e) - {norm(allowed_email_to)})
            return f"the secret was emailed to {others} ({e.get('id')})"
    return None


# --- substance, not just keywords ---------------------------------------------------------------------------
# Keyword checks let through messages that carry the words and say the opposite ("is not moving", "no longer
# due"). These read the sentence a key term stands in: a negation there inverts what the message says.

_NEGATION = re.compile(
    r"\b(?:not|no|never|cannot|unable|nobody|nothing|none|neither|nor|no longer)\b|n't\b", re.IGNORECASE
)


_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")
#: a claim is a sentence, not a handful of keywords
MIN_CLAIM_WORDS = 6


def sentences(text: Any) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?;:])\s+|\n+|\s+-\s+", str(text or "")) if s.strip()]


def negated(text: Any, term: str) -> str | None:
    """The first sentence that mentions `term` and negates it, or None."""
    wanted = norm(term)
    return next((s.strip() for s in sentences(text) if wanted in norm(s) and _NEGATION.search(s)), None)


def keyword_list(sentence: str) -> bool:
    """Fragments of a word or two separated by commas, slashes or semicolons: keywords listed, nothing said."""
    fragments = [f for f in re.split(r"[,;/|]+", sentence) if f.strip()]
    short = [f for f in fragments if len(_WORD.findall(f)) <= 2]
    return len(fragments) >= 3 and len(short) * 3 >= len(fragments) * 2


def claim(text: Any, terms: Iterable[str], verb: re.Pattern[str]) -> str | None:
    """The first sentence that states something with every one of `terms`: it has a `verb`, no negation, at
    least MIN_CLAIM_WORDS words, and is not a keyword list. None when the text only names the terms."""
    wanted = list(terms)
    for sentence in sentences(text):
        if missing_phrases(sentence, wanted) or not verb.search(sentence) or _NEGATION.search(sentence):
            continue
        if len(_WORD.findall(sentence)) >= MIN_CLAIM_WORDS and not keyword_list(sentence):
            return sentence.strip()
    return None


def repeated(found: list[Item], noun: str) -> str | None:
    """A message if the run sent more than one of what the task asks for once: the right message posted
    four times is a duplicate everyone in the room reads four times."""
    return f"{len(found)} {noun}: the task asks for exactly one" if len(found) > 1 else None
