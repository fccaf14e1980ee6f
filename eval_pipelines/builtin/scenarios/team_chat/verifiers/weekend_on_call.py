"""team_chat_006: answer in #releases that Marco is on call this weekend, and tell Marco by DM."""

from __future__ import annotations

import re

from ._common import (
    CHAT,
    Result,
    States,
    account,
    claim,
    describe_posts,
    has_phrase,
    negated,
    new_messages,
    posts_in,
    repeated,
    state_verifier,
)

NEEDS = "state"
BEING = re.compile(r"\b(?:is|are|will be)\b|'(?:s|re)\b", re.IGNORECASE)


@state_verifier(CHAT)
def verify(states: States) -> Result:
    """One post in #releases saying in a sentence that Marco is on call, and one DM telling Marco so."""
    initial, final = states[CHAT]
    messages = new_messages(initial, final)
    me = account(final)
    answers = [
        m
        for m in posts_in(messages, "ch-releases", me)
        if has_phrase(m.get("text"), "Marco")
        and has_phrase(m.get("text"), "on call")
        and not negated(m.get("text"), "on call")
        and claim(m.get("text"), ("Marco", "on call"), BEING)
    ]
    if not answers:
        return False, f"#releases got no answer naming Marco as on call; {describe_posts(messages)}"
    told = [
        m
        for m in posts_in(messages, "dm-marco_bianchi", me)
        if has_phrase(m.get("text"), "on call")
        and not negated(m.get("text"), "on call")
        and claim(m.get("text"), ("on call",), BEING)
    ]
    if not told:
        return False, "Marco was not told by direct message that he is on call"
    problem = repeated(posts_in(messages, "ch-releases", me), "posts in #releases") or repeated(
        posts_in(messages, "dm-marco_bianchi", me), "direct messages to Marco"
    )
    if problem:
        return False, problem
    return True, f"answered in #releases ({answers[0].get('id')}) and told Marco ({told[0].get('id')})"
