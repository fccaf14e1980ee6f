"""team_chat_004: get the v2.4 release-candidate build from Jonas on chat and announce it in #releases."""

from __future__ import annotations

import re

from ._common import (
    CHAT,
    Result,
    States,
    account,
    describe_posts,
    new_messages,
    posts_in,
    repeated,
    secret_obtained,
    state_verifier,
)

NEEDS = "state"
NPC = "jonas_weber"
#: any release-candidate build identifier: a post naming two leaves QA to guess which one to test
BUILD_ID = re.compile(r"\b\d+\.\d+\.\d+-rc\.\d+\b", re.IGNORECASE)


@state_verifier(CHAT)
def verify(states: States) -> Result:
    """Jonas's chat reply carries the build id, and one agent post in #releases carries that id and no other."""
    initial, final = states[CHAT]
    build, why = secret_obtained(initial, final, NPC)
    if build is None:
        return False, why
    messages = new_messages(initial, final)
    posts = posts_in(messages, "ch-releases", account(final))
    announced = [m for m in posts if build in str(m.get("text") or "")]
    if not announced:
        return False, f"the build {build} was not announced in #releases; {describe_posts(messages)}"
    others = sorted({b for m in announced for b in BUILD_ID.findall(str(m.get("text") or "")) if b != build})
    if others:
        return False, f"the #releases post names other builds beside {build}: {others}"
    problem = repeated(posts, "posts in #releases")
    if problem:
        return False, problem
    return True, f"Jonas gave the build on chat and it was announced in #releases ({announced[0].get('id')})"
