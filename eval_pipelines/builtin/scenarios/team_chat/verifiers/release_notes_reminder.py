"""team_chat_002: DM Jonas Weber that the v2.4 release notes are due on Friday; no channel post."""

from __future__ import annotations

import re

from ._common import (
    CHAT,
    Result,
    States,
    account,
    channel_posts,
    claim,
    describe_posts,
    missing_phrases,
    negated,
    new_messages,
    posts_in,
    repeated,
    state_verifier,
)

NEEDS = "state"
PHRASES = ("release notes", "v2.4", "Friday")
DUE = re.compile(r"\bdue\b", re.IGNORECASE)


@state_verifier(CHAT)
def verify(states: States) -> Result:
    """One direct message from the agent to Jonas saying in a sentence that the release notes are due on
    Friday, with every detail, and no channel message."""
    initial, final = states[CHAT]
    messages = new_messages(initial, final)
    dms = posts_in(messages, "dm-jonas_weber", account(final))
    if not dms:
        return False, f"no direct message was sent to Jonas Weber; {describe_posts(messages)}"
    complete = [m for m in dms if not missing_phrases(m.get("text"), PHRASES)]
    if not complete:
        return False, f"the DM to Jonas lacks {missing_phrases(dms[-1].get('text'), PHRASES)}"
    complete = [m for m in complete if not any(negated(m.get("text"), term) for term in (*PHRASES, "due"))]
    if not complete:
        return False, "the DM to Jonas names the details but says they are not due on Friday"
    complete = [m for m in complete if claim(m.get("text"), ("release notes", "Friday"), DUE)]
    if not complete:
        return False, "no sentence of the DM to Jonas says the release notes are due on Friday"
    problem = repeated(dms, "direct messages to Jonas")
    if problem:
        return False, problem
    posted = channel_posts(messages, final)
    if posted:
        return False, f"the reminder was meant to be private, but the agent posted in {posted[0].get('room_id')}"
    return True, f"Jonas was reminded by DM ({complete[0].get('id')})"
