"""email_ops_001: ask Aisha (only) about the Room 4B projector."""

from __future__ import annotations

from ._common import (
    Result,
    State,
    asks,
    collateral,
    describe,
    has_phrase,
    new_sent,
    recipients,
    repeated_sends,
    sent_to,
    state_verifier,
)

NEEDS = "state"
AISHA = "aisha.okafor@example.com"


def check(initial: State, final: State) -> Result:
    """One sent email to Aisha only, subject containing 'projector', body mentioning 'Room 4B' and asking about
    the projector (a statement with a sign-off asks nothing)."""
    sent = new_sent(initial, final)
    to_aisha = sent_to(sent, AISHA)
    if not to_aisha:
        return False, f"no email was sent to {AISHA}; {describe(sent)}"
    for email in to_aisha:
        extra = recipients(email) - {AISHA}
        if extra:
            return False, f"email {email['id']} to Aisha also went to {sorted(extra)}; it should go to Aisha only"
    good = [e for e in to_aisha if has_phrase(e.get("subject"), "projector") and has_phrase(e.get("body"), "Room 4B")]
    if not good:
        return False, "the email to Aisha needs 'projector' in the subject and 'Room 4B' in the body; " + describe(sent)
    good = [e for e in good if asks(e.get("body"), ("projector",))]
    if not good:
        return False, "the email to Aisha states something but asks nothing: the task is to ask about the projector"
    problem = repeated_sends(sent, [AISHA])
    if problem:
        return False, problem
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, f"projector question sent to Aisha ({good[0]['id']})"


verify = state_verifier(check)
