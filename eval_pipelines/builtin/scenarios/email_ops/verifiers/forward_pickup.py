"""email_ops_004: forward SwiftLine's pickup confirmation (SWL-88213) to Priya."""

from __future__ import annotations

from ._common import Result, State, collateral, describe, has_phrase, new_sent, repeated_sends, sent_to, state_verifier

NEEDS = "state"
PRIYA = "priya.shah@example.com"


def check(initial: State, final: State) -> Result:
    """One sent email to Priya carrying the pickup confirmation: subject and booking reference SWL-88213."""
    sent = new_sent(initial, final)
    to_priya = sent_to(sent, PRIYA)
    if not to_priya:
        return False, f"no email was sent to {PRIYA}; {describe(sent)}"
    forwarded = [
        e
        for e in to_priya
        if has_phrase(e.get("body"), "SWL-88213") and has_phrase(e.get("subject"), "Pickup confirmation")
    ]
    if not forwarded:
        return False, "the email to Priya does not carry the pickup confirmation (subject and SWL-88213)"
    problem = repeated_sends(sent, [PRIYA]) or collateral(initial, final)
    if problem:
        return False, problem
    return True, f"pickup confirmation forwarded to Priya ({forwarded[0]['id']})"


verify = state_verifier(check)
