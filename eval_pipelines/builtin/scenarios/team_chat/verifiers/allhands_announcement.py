"""team_chat_001: announce the all-hands move (Thursday, 15:00, Atrium) in #general, and nowhere else."""

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
PHRASES = ("all-hands", "Thursday", "15:00", "Atrium")
#: the new slot must be what one sentence says of the all-hands, not words spread over unrelated sentences
ANNOUNCING = re.compile(r"\b(?:mov\w*|is|will be|happens|takes place|now)\b", re.IGNORECASE)


@state_verifier(CHAT)
def verify(states: States) -> Result:
    """One new post by the agent in #general with every detail, the new slot stated in one sentence;
    no post by the agent in another channel."""
    initial, final = states[CHAT]
    messages = new_messages(initial, final)
    me = account(final)
    posts = posts_in(messages, "ch-general", me)
    if not posts:
        return False, f"nothing was posted in #general; {describe_posts(messages)}"
    complete = [p for p in posts if not missing_phrases(p.get("text"), PHRASES)]
    if not complete:
        return False, f"the #general post lacks {missing_phrases(posts[-1].get('text'), PHRASES)}"
    complete = [p for p in complete if not any(negated(p.get("text"), t) for t in (*PHRASES, "moved", "moving"))]
    if not complete:
        return False, "the #general post names the details but does not announce the move"
    complete = [p for p in complete if claim(p.get("text"), ("all-hands", "Thursday", "15:00"), ANNOUNCING)]
    if not complete:
        return False, "no sentence of the #general post says the all-hands is on Thursday at 15:00"
    problem = repeated(posts, "posts in #general")
    if problem:
        return False, problem
    elsewhere = [m for m in channel_posts(messages, final) if m.get("room_id") != "ch-general"]
    if elsewhere:
        return False, f"the agent also posted in {sorted({str(m.get('room_id')) for m in elsewhere})}"
    return True, f"all-hands announcement posted in #general ({complete[0].get('id')})"
