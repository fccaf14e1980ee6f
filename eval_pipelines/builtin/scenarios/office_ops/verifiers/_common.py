"""Helpers shared by the office_ops verifiers.

Standard library only, and imported relatively, so the package works from a verifier bundle without
eval_pipelines installed. Verifiers judge the tool servers' STATE the engine recorded
(`metadata["state"][<server>] = {"initial": ..., "final": ...}`), never the transcript.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

ACCOUNT = "agent@example.com"

Item = dict[str, Any]
State = dict[str, Any]
#: (initial, final) state of one tool server.
Pair = tuple[State, State]
Result = tuple[bool, str]


class StateMissing(Exception):
    pass


def _metadata(run_artifacts: Any) -> dict[str, Any]:
    if isinstance(run_artifacts, dict):
        metadata = run_artifacts.get("metadata")
    else:
        metadata = getattr(run_artifacts, "metadata", None)
    return metadata if isinstance(metadata, dict) else {}


def server_states(run_artifacts: Any, server: str) -> Pair:
    """(initial, final) state of one tool server, or StateMissing with the reason."""
    recorded = _metadata(run_artifacts).get("state") or {}
    server_state = recorded.get(server) if isinstance(recorded, dict) else None
    if not isinstance(server_state, dict):
        raise StateMissing(f"no {server} tool-server state recorded in run_artifacts.metadata['state']['{server}']")
    initial, final = server_state.get("initial"), server_state.get("final")
    if not isinstance(initial, dict) or not isinstance(final, dict):
        raise StateMissing(f"the {server} state needs both 'initial' and 'final' snapshots")
    return initial, final


def state_verifier(*servers: str) -> Callable[[Callable[..., Result]], Callable[[Any], Result]]:
    """Turn `check(pair_1, pair_2, ...)` (one (initial, final) pair per server, in order) into
    `verify(run_artifacts)`, which accepts a RunArtifacts or its dict form."""

    def wrap(check: Callable[..., Result]) -> Callable[[Any], Result]:
        def verify(run_artifacts: Any) -> Result:
            try:
                pairs = [server_states(run_artifacts, server) for server in servers]
            except StateMissing as exc:
                return False, str(exc)
            return check(*pairs)

        verify.__doc__ = check.__doc__
        return verify

    return wrap


# -- text ----------------------------------------------------------------------------------------------


def norm(text: Any) -> str:
    return re.sub(r"\s+", " ", str(text or "")).strip().lower()


def has_phrase(text: Any, phrase: str) -> bool:
    return norm(phrase) in norm(text)


def missing_phrases(text: Any, phrases: Iterable[str]) -> list[str]:
    return [p for p in phrases if not has_phrase(text, p)]


# -- collections -----------------------------------------------------------------------------------------


def items(state: State, collection: str) -> dict[str, Item]:
    found = state.get(collection)
    return found if isinstance(found, dict) else {}


def added(pair: Pair, collection: str) -> list[Item]:
    """Items of `collection` that exist only in the final state, in key order."""
    before, after = items(pair[0], collection), items(pair[1], collection)
    return [after[key] for key in sorted(after) if key not in before]


def collateral(pair: Pair, collection: str, noun: str, allowed: Iterable[str] = ()) -> str | None:
    """A message if a seeded item other than `allowed` was removed or changed."""
    permitted = set(allowed)
    after = items(pair[1], collection)
    for key, before in items(pair[0], collection).items():
        if key in permitted:
            continue
        if key not in after:
            return f"seeded {noun} {key} was removed but should have been left alone"
        if after[key] != before:
            changed = sorted(f for f in set(before) | set(after[key]) if before.get(f) != after[key].get(f))
            return f"seeded {noun} {key} was changed ({', '.join(changed)}) but should have been left alone"
    return None


def unchanged_except(before: Item, after: Item, fields: Iterable[str]) -> list[str]:
    """Fields other than `fields` (and the server-managed `updated_at`/`comments`) that differ."""
    skip = set(fields) | {"updated_at", "comments"}
    return sorted(f for f in set(before) | set(after) if f not in skip and before.get(f) != after.get(f))


# -- email -----------------------------------------------------------------------------------------------


def recipients(email: Item, fields: Iterable[str] = ("to", "cc")) -> set[str]:
    found: set[str] = set()
    for name in fields:
        value = email.get(name) or []
        found |= {norm(a) for a in ([value] if isinstance(value, str) else value)}
    return found


def new_sent(mailbox: Pair) -> list[Item]:
    """Emails the agent sent during the run, oldest first."""
    sent = [e for e in added(mailbox, "emails") if e.get("folder") == "sent" or norm(e.get("from")) == ACCOUNT]
    return sorted(sent, key=lambda e: (str(e.get("timestamp", "")), str(e.get("id", ""))))


def describe_sent(sent: list[Item]) -> str:
    if not sent:
        return "no emails were sent"
    parts = [f"[{e.get('id')}] to={','.join(sorted(recipients(e)))} subject={e.get('subject')!r}" for e in sent]
    return "sent: " + "; ".join(parts)


def mailbox_collateral(mailbox: Pair) -> str | None:
    """A message if a seeded email was deleted, moved or edited."""
    return collateral(mailbox, "emails", "email")


# -- records ---------------------------------------------------------------------------------------------


def new_comments(records: Pair, ticket_id: str) -> list[Item]:
    before = items(records[0], "tickets").get(ticket_id) or {}
    after = items(records[1], "tickets").get(ticket_id) or {}
    old = before.get("comments") or []
    now = after.get("comments") or []
    return list(now[len(old) :]) if now[: len(old)] == old else list(now)


# -- files -----------------------------------------------------------------------------------------------


def file_text(state: State, path: str) -> str | None:
    """The text content of a workspace file, or None if it is missing, binary or a symlink."""
    entry = items(state, "files").get(path)
    if not entry or entry.get("type") != "file":
        return None
    content = entry.get("content")
    return content if isinstance(content, str) else None


# --- substance, not just keywords ---------------------------------------------------------------------------
# Keyword checks let through messages that carry the words and say the opposite ("is not moving", "no longer
# due"). These read the sentence a key term stands in: a negation there inverts what the message says.

_NEGATION = re.compile(
    r"\b(?:not|no|never|cannot|unable|nobody|nothing|none|neither|nor|no longer)\b|n't\b", re.IGNORECASE
)


# A sign-off ("let me know if you have questions") ends a statement; it proposes or asks nothing.
_SIGN_OFF = re.compile(
    r"\bif you (?:have|need) (?:any )?(?:questions?|help|anything)\b|\bany (?:other |further |more )?questions\b"
    r"|\bdon't hesitate\b|\bfeel free\b|\bhappy to help\b",
    re.IGNORECASE,
)
_GREETING = re.compile(r"^(?:hi|hello|hey|dear)\b[^,]*,\s*", re.IGNORECASE)
_PROPOSAL = re.compile(
    r"^(?:could|can|would|will|shall|should|may|is|are|does|do|how|what)\b"
    r"|\b(?:propos\w*|suggest\w*|how about|what about)\b",
    re.IGNORECASE,
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


def proposes(text: Any, topics: Iterable[str]) -> bool:
    """Whether a sentence about one of `topics` proposes or asks ("could we move ...", "I suggest ...") rather
    than announcing; a sign-off after a statement does not count."""
    for sentence in sentences(text):
        sentence = _GREETING.sub("", sentence.strip())
        if _SIGN_OFF.search(sentence) or not any(has_phrase(sentence, t) for t in topics):
            continue
        if _PROPOSAL.search(sentence):
            return True
    return False


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


def repeated(found: list[Any], noun: str) -> str | None:
    """A message if the run made more than one of what the task asks for once (an email, a comment): the
    right thing done four times is a duplicate the recipient sees four times."""
    return f"{len(found)} {noun}: the task asks for exactly one" if len(found) > 1 else None
