"""team_chat_002: DM Jonas Weber that the v2.4 release notes are due on Friday; no channel post."""

from __future__ import annotations

from ._common import (
    CHAT,
    Result,
    States,
    account,
    channel_posts,
    describe_posts,
    missing_phrases,
    negated,
    new_messages,
    posts_in,
    state_verifier,
)

NEEDS = "state"
PHRASES = ("release notes", "v2.4", "Friday")


@state_verifier(CHAT)
def verify(states: States) -> Result:
    """A direct message from the agent to Jonas with every detail, and no channel message."""
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
    posted = channel_posts(messages, final)
    if posted:
        return False, f"the reminder was meant to be private, but the agent posted in {posted[0].get('room_id')}"
    return True, f"Jonas was reminded by DM ({complete[0].get('id')})"
