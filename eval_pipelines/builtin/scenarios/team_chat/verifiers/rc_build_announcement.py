"""team_chat_004: get the v2.4 release-candidate build from Jonas on chat and announce it in #releases."""

from __future__ import annotations

from ._common import (
    CHAT,
    Result,
    States,
    account,
    describe_posts,
    new_messages,
    posts_in,
    secret_obtained,
    state_verifier,
)

NEEDS = "state"
NPC = "jonas_weber"


@state_verifier(CHAT)
def verify(states: States) -> Result:
    """Jonas's chat reply carries the build id, and an agent post in #releases carries the same id."""
    initial, final = states[CHAT]
    build, why = secret_obtained(initial, final, NPC)
    if build is None:
        return False, why
    messages = new_messages(initial, final)
    announced = [m for m in posts_in(messages, "ch-releases", account(final)) if build in str(m.get("text") or "")]
    if not announced:
        return False, f"the build {build} was not announced in #releases; {describe_posts(messages)}"
    return True, f"Jonas gave the build on chat and it was announced in #releases ({announced[0].get('id')})"
