"""email_ops_007: answer David's expense question with Marcus in CC."""

from __future__ import annotations

from ._common import Result, State, collateral, describe, missing_phrases, negated, new_sent, sent_to, state_verifier

NEEDS = "state"
DAVID = "david.kim@example.com"
MARCUS = "marcus.lee@example.com"
PHRASES = ("pre-approval", "$312.40")


def check(initial: State, final: State) -> Result:
    """An email to David (To) with Marcus in CC that mentions 'pre-approval' and '$312.40'."""
    sent = new_sent(initial, final)
    to_david = sent_to(sent, DAVID, fields=("to",))
    if not to_david:
        return False, f"no email was sent to {DAVID}; {describe(sent)}"
    with_cc = [e for e in to_david if MARCUS in {a.lower() for a in e.get("cc") or []}]
    if not with_cc:
        return False, f"the email to David does not have {MARCUS} in CC; {describe(sent)}"
    complete = [e for e in with_cc if not missing_phrases(e.get("body", ""), PHRASES)]
    if not complete:
        return False, f"the answer to David must mention {missing_phrases(with_cc[-1].get('body', ''), PHRASES)}"
    complete = [e for e in complete if not negated(e.get("body"), "pre-approval")]
    if not complete:
        inverted = negated(with_cc[-1].get("body"), "pre-approval")
        return False, f"the answer inverts the policy (meals above $250 need pre-approval): {inverted!r}"
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, f"David told about pre-approval, Marcus in CC ({complete[0]['id']})"


verify = state_verifier(check)
