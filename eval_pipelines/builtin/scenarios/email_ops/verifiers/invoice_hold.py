"""email_ops_011: tell Marcus to hold INV-2291 (18 of 20 pallets) and ask BrightPath for a credit note."""

from __future__ import annotations

from ._common import (
    Result,
    State,
    collateral,
    describe,
    has_number,
    has_phrase,
    missing_phrases,
    negated,
    new_sent,
    sent_to,
    state_verifier,
    text_of,
)

NEEDS = "state"
MARCUS = "marcus.lee@example.com"
BILLING = "billing@brightpath-supplies.com"
PALLETS_RECEIVED = "18"


def _says_pay_now(body: object) -> bool:
    """Telling Marcus to pay contradicts holding the payment."""
    return any(has_phrase(body, phrase) for phrase in ("go ahead and pay", "pay it now", "please pay", "ok to pay"))


def check(initial: State, final: State) -> Result:
    """Marcus: 'INV-2291', '18' and 'hold'. BrightPath billing: 'PO-7781' and 'credit note'."""
    sent = new_sent(initial, final)
    to_marcus = sent_to(sent, MARCUS, fields=("to",))
    if not to_marcus:
        return False, f"no email was sent to {MARCUS}; {describe(sent)}"
    good_marcus = [
        e
        for e in to_marcus
        if not missing_phrases(text_of(e), ("INV-2291", "hold"))
        and has_number(e.get("body"), PALLETS_RECEIVED)
        and not negated(e.get("body"), "hold")
        and not _says_pay_now(e.get("body"))
    ]
    if not good_marcus:
        return False, (
            "the email to Marcus must name INV-2291, say how many pallets arrived (18) "
            "and tell him to 'hold' the payment"
        )
    to_billing = sent_to(sent, BILLING, fields=("to",))
    if not to_billing:
        return False, f"no email was sent to BrightPath billing ({BILLING}); {describe(sent)}"
    if all(missing_phrases(text_of(e), ("PO-7781", "credit note")) for e in to_billing):
        missing = missing_phrases(text_of(to_billing[-1]), ("PO-7781", "credit note"))
        return False, f"the email to BrightPath must mention {missing}"
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, "Marcus told to hold INV-2291 (18 of 20 pallets); credit note requested from BrightPath"


verify = state_verifier(check)
