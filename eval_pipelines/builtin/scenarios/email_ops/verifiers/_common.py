"""Helpers shared by the email_ops verifiers.

Standard library only, and imported relatively, so the package works from a verifier bundle without
eval_pipelines installed. Verifiers judge the mailbox STATE the engine recorded
(`metadata["state"]["email"] = {"initial": ..., "final": ...}`), never the transcript.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

SERVER = "email"
ACCOUNT = "agent@example.com"

Email = dict[str, Any]
State = dict[str, Any]
Result = tuple[bool, str]


class StateMissing(Exception):
    pass


def _metadata(run_artifacts: Any) -> dict[str, Any]:
    if isinstance(run_artifacts, dict):
        metadata = run_artifacts.get("metadata")
    else:
        metadata = getattr(run_artifacts, "metadata", None)
    return metadata if isinstance(metadata, dict) else {}


def mailbox_states(run_artifacts: Any) -> tuple[State, State]:
    """(initial, final) state of the email server, or StateMissing with the reason."""
    server_state = (_metadata(run_artifacts).get("state") or {}).get(SERVER)
    if not isinstance(server_state, dict):
        raise StateMissing("no email tool-server state recorded in run_artifacts.metadata['state']['email']")
    initial, final = server_state.get("initial"), server_state.get("final")
    if not isinstance(initial, dict) or not isinstance(final, dict):
        raise StateMissing("the email state needs both 'initial' and 'final' snapshots")
    return initial, final


def state_verifier(check: Callable[[State, State], Result]) -> Callable[[Any], Result]:
    """Turn `check(initial, final)` into `verify(run_artifacts)` that accepts a RunArtifacts or a dict."""

    def verify(run_artifacts: Any) -> Result:
        try:
            initial, final = mailbox_states(run_artifacts)
        except StateMissing as exc:
            return False, str(exc)
        return check(initial, final)

    verify.__doc__ = check.__doc__
    return verify


def emails(state: State) -> dict[str, Email]:
    return state.get("emails") or {}


def norm(text: Any) -> str:
    return re.sub(r"\s+", " ", str(text or "")).strip().lower()


def has_phrase(text: Any, phrase: str) -> bool:
    return norm(phrase) in norm(text)


def has_number(text: Any, number: str) -> bool:
    """`number` as a standalone token ("18" matches "18 pallets", not "2018" or "18.5")."""
    return re.search(rf"(?<![\d.]){re.escape(number)}(?![\d]|\.\d)", str(text or "")) is not None


def recipients(email: Email, fields: Iterable[str] = ("to", "cc")) -> set[str]:
    found: set[str] = set()
    for name in fields:
        value = email.get(name) or []
        found |= {norm(a) for a in ([value] if isinstance(value, str) else value)}
    return found


def text_of(email: Email) -> str:
    return f"{email.get('subject', '')}\n{email.get('body', '')}"


def new_sent(initial: State, final: State) -> list[Email]:
    """Emails the agent sent during the run, oldest first."""
    before = emails(initial)
    sent = [
        e
        for key, e in emails(final).items()
        if key not in before and (e.get("folder") == "sent" or norm(e.get("from")) == ACCOUNT)
    ]
    return sorted(sent, key=lambda e: (str(e.get("timestamp", "")), str(e.get("id", ""))))


def sent_to(sent: list[Email], address: str, fields: Iterable[str] = ("to",)) -> list[Email]:
    """The emails addressed to `address`: a task's addressee belongs in To (CC is for who is kept informed),
    so an email that only copies them does not count unless `fields` says so."""
    target = norm(address)
    field_list = list(fields)
    return [e for e in sent if target in recipients(e, field_list)]


def describe(sent: list[Email]) -> str:
    if not sent:
        return "no emails were sent"
    parts = []
    for e in sent:
        cc = f" cc={','.join(e.get('cc') or [])}" if e.get("cc") else ""
        parts.append(f"[{e.get('id')}] to={','.join(e.get('to') or [])}{cc} subject={e.get('subject')!r}")
    return "sent: " + "; ".join(parts)


def trashed(initial: State, final: State) -> set[str]:
    """Seeded emails that were moved to the trash during the run."""
    after = emails(final)
    return {
        key
        for key, e in emails(initial).items()
        if e.get("folder") != "trash" and (after.get(key) or {}).get("folder") == "trash"
    }


def collateral(initial: State, final: State, allowed_trash: Iterable[str] = ()) -> str | None:
    """A message if a seeded email vanished, was edited, or was trashed without being in `allowed_trash`."""
    allowed = set(allowed_trash)
    after = emails(final)
    for key, before in emails(initial).items():
        now = after.get(key)
        if now is None:
            return f"seeded email {key} ({before.get('subject')!r}) disappeared from the mailbox"
        for name in ("from", "to", "cc", "subject", "body", "timestamp"):
            if now.get(name) != before.get(name):
                return f"seeded email {key} was modified (field {name!r})"
        if key not in allowed and now.get("folder") != before.get("folder"):
            return (
                f"email {key} ({before.get('subject')!r}) was moved from {before.get('folder')} to "
                f"{now.get('folder')} but should have been left alone"
            )
    return None


def missing_phrases(text: str, phrases: Iterable[str]) -> list[str]:
    return [p for p in phrases if not has_phrase(text, p)]


# --- substance, not just keywords ---------------------------------------------------------------------------
# Keyword checks let through emails that carry the words and say the opposite ("not confirmed", "don't need
# pre-approval"). These read the sentence a key term stands in: a negation there inverts what the email says.

_NEGATION = re.compile(
    r"\b(?:not|no|never|cannot|unable|nobody|nothing|none|neither|nor|no longer)\b|n't\b", re.IGNORECASE
)
# A sign-off ("let me know if you have questions") ends a statement; it does not ask what a task wants asked.
_SIGN_OFF = re.compile(
    r"\bif you (?:have|need) (?:any )?(?:questions?|help|anything)\b|\bany (?:other |further |more )?questions\b"
    r"|\bdon't hesitate\b|\bfeel free\b|\bhappy to help\b",
    re.IGNORECASE,
)
_GREETING = re.compile(r"^(?:hi|hello|hey|dear)\b[^,]*,\s*", re.IGNORECASE)
_INTERROGATIVE = re.compile(
    r"^(?:could|can|would|will|is|are|was|were|does|do|did|has|have|when|what|which|who|where|how|should|shall|may)"
    r"\b|\b(?:whether|please (?:check|confirm|tell me|let me know)|let me know (?:whether|if|when|how))\b",
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


def asks(text: Any, topics: Iterable[str]) -> bool:
    """Whether a sentence about one of `topics` asks something: an interrogative ("could you", "is the ...",
    "whether") that is not a sign-off. A question mark alone is not enough: "Room 4B projector?" is a keyword."""
    for sentence in sentences(text):
        sentence = _GREETING.sub("", sentence.strip())
        if _SIGN_OFF.search(sentence) or not any(has_phrase(sentence, t) for t in topics):
            continue
        if _INTERROGATIVE.search(sentence):
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


def repeated_sends(sent: list[Email], addresses: Iterable[str]) -> str | None:
    """A message if one of `addresses` received more than one of the run's emails: each task asks for one
    email per recipient, and the same email sent four times spams the recipient instead of answering them."""
    for address in addresses:
        count = len(sent_to(sent, address, fields=("to", "cc")))
        if count > 1:
            return f"{count} emails were sent to {address}; the task asks for exactly one"
    return None


def unasked_sends(sent: list[Email]) -> str | None:
    """A message if the run sent any email, for tasks that ask for none."""
    return f"the task asks for no email, but the run sent some; {describe(sent)}" if sent else None
