"""team_chat_006: answer in #releases that Marco is on call this weekend, and tell Marco by DM."""

from __future__ import annotations

from ._common import (
    CHAT,
    Result,
    States,
    account,
    describe_posts,
    has_phrase,
    negated,
    new_messages,
    posts_in,
    state_verifier,
)

NEEDS = "state"


@state_verifier(CHAT)
def verify(states: States) -> Result:
    """A post in #releases naming Marco as on call, and a DM to Marco that mentions being on call."""
    initial, final = states[CHAT]
    messages = new_messages(initial, final)
    me = account(final)
    answers = [
        m
        for m in posts_in(messages, "ch-releases", me)
        if has_phrase(m.get("text"), "Marco")
        and has_phrase(m.get("text"), "on call")
        and not negated(m.get("text"), "on call")
    ]
    if not answers:
        return False, f"#releases got no answer naming Marco as on call; {describe_posts(messages)}"
    told = [
        m
        for m in posts_in(messages, "dm-marco_bianchi", me)
        if has_phrase(m.get("text"), "on call") and not negated(m.get("text"), "on call")
    ]
    if not told:
        return False, "Marco was not told by direct message that he is on call"
    return True, f"answered in #releases ({answers[0].get('id')}) and told Marco ({told[0].get('id')})"
