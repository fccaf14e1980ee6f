"""email_ops_005: one separate invitation each to David and Elena for Thursday's ops sync."""

from __future__ import annotations

from ._common import (
    Result,
    State,
    collateral,
    describe,
    missing_phrases,
    negated,
    new_sent,
    recipients,
    sent_to,
    state_verifier,
    text_of,
)

NEEDS = "state"
DAVID = "david.kim@example.com"
ELENA = "elena.garcia@example.com"
PHRASES = ("Thursday", "10:00", "Room 4B")


def _uninvites(email: dict[str, object]) -> str | None:
    """A sentence that negates the invitation, its day, time or room ("you are not invited", "not at 10:00")."""
    return next((n for term in (*PHRASES, "invit", "join") if (n := negated(email.get("body"), term))), None)


def check(initial: State, final: State) -> Result:
    """For each invitee: an email to them that excludes the other invitee and names day, time and room."""
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
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, "David and Elena each received their own ops sync invitation"


verify = state_verifier(check)
