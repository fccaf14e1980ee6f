"""email_ops_003: reply to Priya's 'Ops sync moved to Thursday' email with 'confirmed'."""

from __future__ import annotations

from ._common import Result, State, collateral, describe, has_phrase, negated, new_sent, sent_to, state_verifier

NEEDS = "state"
PRIYA = "priya.shah@example.com"
THREAD = "e-003"


def check(initial: State, final: State) -> Result:
    """A sent email to Priya in the e-003 thread (reply or 'Re:' subject) whose body says 'confirmed'."""
    sent = new_sent(initial, final)
    to_priya = sent_to(sent, PRIYA, fields=("to",))
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
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, "attendance confirmed to Priya in the ops sync thread"


verify = state_verifier(check)
