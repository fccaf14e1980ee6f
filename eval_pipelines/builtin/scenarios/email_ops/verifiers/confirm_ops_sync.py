"""email_ops_003: reply to Priya's 'Ops sync moved to Thursday' email with 'confirmed'."""

from __future__ import annotations

import re

from ._common import (
    Result,
    State,
    claim,
    collateral,
    describe,
    has_phrase,
    negated,
    new_sent,
    repeated_sends,
    sent_to,
    state_verifier,
)

NEEDS = "state"
PRIYA = "priya.shah@example.com"
THREAD = "e-003"
ATTENDING = re.compile(r"\b(?:attend|be (?:there|at)|join|see you|come)\b", re.IGNORECASE)


def check(initial: State, final: State) -> Result:
    """One sent email to Priya in the e-003 thread (reply or 'Re:' subject) whose body says 'confirmed' and
    states attendance on Thursday in a sentence (a wrong day or a bare 'Confirmed: Thursday' does not count)."""
    sent = new_sent(initial, final)
    to_priya = sent_to(sent, PRIYA)
    if not to_priya:
        return False, f"no email was sent to {PRIYA}; {describe(sent)}"
    in_thread = [
        e
        for e in to_priya
        if e.get("in_reply_to") == THREAD or has_phrase(e.get("subject"), "Ops sync moved to Thursday")
    ]
    if not in_thread:
        return False, f"no email to Priya answers 'Ops sync moved to Thursday' ({THREAD}); {describe(sent)}"
    confirming = [e for e in in_thread if has_phrase(e.get("body"), "confirmed")]
    if not confirming:
        return False, "the reply to Priya does not contain the word 'confirmed'"
    for term in ("confirmed", "attend", "ops sync", "be there"):
        contradiction = next((n for e in confirming if (n := negated(e.get("body"), term))), None)
        if contradiction:
            return False, f"the reply says the opposite of confirming attendance: {contradiction!r}"
    if not any(claim(e.get("body"), ("Thursday",), ATTENDING) for e in confirming):
        return False, "the reply does not say in a sentence that you will attend the ops sync on Thursday"
    problem = repeated_sends(sent, [PRIYA])
    if problem:
        return False, problem
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, "attendance confirmed to Priya in the ops sync thread"


verify = state_verifier(check)
