"""email_ops_011: tell Marcus to hold INV-2291 (18 of 20 pallets) and ask BrightPath for a credit note."""

from __future__ import annotations

import re

from ._common import (
    Result,
    State,
    claim,
    collateral,
    describe,
    has_number,
    has_phrase,
    missing_phrases,
    negated,
    new_sent,
    repeated_sends,
    sent_to,
    state_verifier,
    text_of,
)

NEEDS = "state"
MARCUS = "marcus.lee@example.com"
BILLING = "billing@brightpath-supplies.com"
PALLETS_RECEIVED = "18"
ARRIVED = re.compile(r"\b(?:arriv\w*|received|delivered|came)\b", re.IGNORECASE)
REQUESTING = re.compile(r"\b(?:issue|send|request\w*|need|provide|ask\w*)\b", re.IGNORECASE)


def _says_pay_now(body: object) -> bool:
    """Telling Marcus to pay contradicts holding the payment."""
    return any(has_phrase(body, phrase) for phrase in ("go ahead and pay", "pay it now", "please pay", "ok to pay"))


def check(initial: State, final: State) -> Result:
    """One email each. Marcus: 'INV-2291', 'hold' and a sentence saying 18 pallets arrived. BrightPath billing:
    'PO-7781' and a sentence requesting a 'credit note'."""
    sent = new_sent(initial, final)
    to_marcus = sent_to(sent, MARCUS)
    if not to_marcus:
        return False, f"no email was sent to {MARCUS}; {describe(sent)}"
    good_marcus = [
        e
        for e in to_marcus
        if not missing_phrases(text_of(e), ("INV-2291", "hold"))
        and has_number(e.get("body"), PALLETS_RECEIVED)
        and not negated(e.get("body"), "hold")
        and not _says_pay_now(e.get("body"))
        and claim(e.get("body"), (PALLETS_RECEIVED,), ARRIVED)
    ]
    if not good_marcus:
        return False, (
            "the email to Marcus must name INV-2291, say in a sentence how many pallets arrived (18) "
            "and tell him to 'hold' the payment"
        )
    to_billing = sent_to(sent, BILLING)
    if not to_billing:
        return False, f"no email was sent to BrightPath billing ({BILLING}); {describe(sent)}"
    if all(missing_phrases(text_of(e), ("PO-7781", "credit note")) for e in to_billing):
        missing = missing_phrases(text_of(to_billing[-1]), ("PO-7781", "credit note"))
        return False, f"the email to BrightPath must mention {missing}"
    if not any(claim(e.get("body"), ("credit note",), REQUESTING) for e in to_billing):
        return False, "no sentence of the email to BrightPath asks for a credit note"
    problem = repeated_sends(sent, [MARCUS, BILLING])
    if problem:
        return False, problem
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, "Marcus told to hold INV-2291 (18 of 20 pallets); credit note requested from BrightPath"


verify = state_verifier(check)
