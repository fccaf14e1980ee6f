"""email_ops_005: one separate invitation each to David and Elena for Thursday's ops sync."""

from __future__ import annotations

import re

from ._common import (
    Result,
    State,
    claim,
    collateral,
    describe,
    missing_phrases,
    negated,
    new_sent,
    recipients,
    repeated_sends,
    sent_to,
    state_verifier,
    text_of,
)

NEEDS = "state"
DAVID = "david.kim@example.com"
ELENA = "elena.garcia@example.com"
PHRASES = ("Thursday", "10:00", "Room 4B")
INVITING = re.compile(r"\b(?:join|invit\w*|attend|come)\b", re.IGNORECASE)


def _uninvites(email: dict[str, object]) -> str | None:
    """A sentence that negates the invitation, its day, time or room ("you are not invited", "not at 10:00")."""
    return next((n for term in (*PHRASES, "invit", "join") if (n := negated(email.get("body"), term))), None)


def check(initial: State, final: State) -> Result:
    """For each invitee: one email to them that excludes the other invitee, names day, time and room, and invites
    them in a sentence (a cancellation or a keyword list does not invite)."""
    sent = new_sent(initial, final)
    for person, other in ((DAVID, ELENA), (ELENA, DAVID)):
        mine = [e for e in sent_to(sent, person) if other not in recipients(e)]
        if not mine:
            return False, f"no separate email was sent to {person} (without {other}); {describe(sent)}"
        complete = [e for e in mine if not missing_phrases(text_of(e), PHRASES)]
        if not complete:
            missing = missing_phrases(text_of(mine[-1]), PHRASES)
            return False, f"the invitation to {person} does not mention {missing}"
        if all(_uninvites(e) for e in complete):
            return False, f"the email to {person} does not invite them: {_uninvites(complete[-1])!r}"
        if not any(claim(e.get("body"), ("Thursday",), INVITING) for e in complete):
            return False, f"the email to {person} names the details but no sentence invites them to the sync"
    problem = repeated_sends(sent, [DAVID, ELENA])
    if problem:
        return False, problem
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, "David and Elena each received their own ops sync invitation"


verify = state_verifier(check)
