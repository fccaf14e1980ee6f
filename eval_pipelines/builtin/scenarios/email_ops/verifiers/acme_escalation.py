"""email_ops_008: forward Jane's complaint to Elena and acknowledge it to Jane."""

from __future__ import annotations

import re

from ._common import (
    Result,
    State,
    claim,
    collateral,
    describe,
    has_phrase,
    missing_phrases,
    negated,
    new_sent,
    recipients,
    repeated_sends,
    sent_to,
    state_verifier,
)

NEEDS = "state"
ELENA = "elena.garcia@example.com"
JANE = "jane.morrison@acme-retail.com"
COMPLAINT_TEXT = "6 of the 20 cartons were crushed"
FOLLOWING_UP = re.compile(
    r"\b(?:follow(?:s|ing)?[ -]up|contact|get in touch|be in touch|reach out|call)\b", re.IGNORECASE
)


def check(initial: State, final: State) -> Result:
    """Elena got the original complaint; Jane got an acknowledgement naming A-55120 and saying in a sentence
    that Elena Garcia will follow up; one email each; the complaint went to nobody else."""
    sent = new_sent(initial, final)
    carrying = [e for e in sent if has_phrase(e.get("body"), COMPLAINT_TEXT)]
    forwarded = [e for e in carrying if ELENA in recipients(e)]
    if not forwarded:
        return False, f"Jane's complaint (its original text) was not forwarded to {ELENA}; {describe(sent)}"
    allowed = {ELENA, JANE}
    for email in carrying:
        leaked = recipients(email) - allowed
        if leaked:
            return False, f"Jane's complaint was also sent to {sorted(leaked)} ({email['id']})"
    to_jane = sent_to(sent, JANE)
    if not to_jane:
        return False, f"Jane ({JANE}) received no reply; {describe(sent)}"
    if all(missing_phrases(e.get("body", ""), ("A-55120", "Elena Garcia")) for e in to_jane):
        missing = missing_phrases(to_jane[-1].get("body", ""), ("A-55120", "Elena Garcia"))
        return False, f"the reply to Jane must mention {missing}"
    promising = [e for e in to_jane if not negated(e.get("body"), "Elena Garcia")]
    if not promising:
        refusal = negated(to_jane[-1].get("body"), "Elena Garcia")
        return False, f"the reply to Jane does not promise Elena's follow-up: {refusal!r}"
    if not any(claim(e.get("body"), ("Elena Garcia",), FOLLOWING_UP) for e in promising):
        return False, "no sentence of the reply to Jane says that Elena Garcia will follow up with her"
    problem = repeated_sends(sent, [ELENA, JANE])
    if problem:
        return False, problem
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, "complaint forwarded to Elena and acknowledged to Jane"


verify = state_verifier(check)
