"""office_ops_009: TKT-2006 resolved with a comment, and Grace told by email that her access works."""

from __future__ import annotations

import re

from ._common import (
    ACCOUNT,
    Pair,
    Result,
    claim,
    collateral,
    describe_sent,
    items,
    mailbox_collateral,
    negated,
    new_comments,
    new_sent,
    norm,
    recipients,
    repeated,
    state_verifier,
)

NEEDS = "state"
TICKET = "TKT-2006"
GRACE = "grace.liu@example.com"
#: "you can log in now", not "once it is fixed you can log in": a condition postpones what the task says is done
CAN_NOW = re.compile(r"^(?!.*\b(?:once|when|after|until|as soon as|if)\b).*\b(?:can|able to)\b", re.IGNORECASE)


def check(mailbox: Pair, records: Pair) -> Result:
    """TKT-2006 is resolved and has one new comment by the agent; Grace (and nobody else) got one email
    mentioning TKT-2006 and saying in a sentence that she can log in now; other tickets and seeded emails untouched."""
    ticket = items(records[1], "tickets").get(TICKET)
    if ticket is None:
        return False, f"{TICKET} is missing from the helpdesk state"
    if ticket.get("status") != "resolved":
        return False, f"{TICKET} has status {ticket.get('status')!r}, expected 'resolved'"
    comments = [c for c in new_comments(records, TICKET) if norm(c.get("author")) == ACCOUNT]
    if not comments:
        return False, f"no new comment by {ACCOUNT} on {TICKET}"
    sent = new_sent(mailbox)
    to_grace = [e for e in sent if GRACE in recipients(e)]
    if not to_grace:
        return False, f"Grace was not emailed; {describe_sent(sent)}"
    strays = [e for e in sent if recipients(e) - {GRACE}]
    if strays:
        return False, f"emails also went to others: {describe_sent(strays)}"
    if not any(TICKET.lower() in norm(f"{e.get('subject')} {e.get('body')}") for e in to_grace):
        return False, f"the email to Grace does not mention {TICKET}"
    told_fixed = [e for e in to_grace if not any(negated(e.get("body"), t) for t in ("log in", "fixed", "access"))]
    if not told_fixed:
        contradiction = next(n for t in ("log in", "fixed", "access") if (n := negated(to_grace[-1].get("body"), t)))
        return False, f"the email tells Grace the opposite of 'you can log in now': {contradiction!r}"
    if not any(claim(e.get("body"), ("log in",), CAN_NOW) for e in told_fixed):
        return False, "no sentence of the email tells Grace that she can log in now"
    problem = repeated(to_grace, "emails to Grace") or repeated(comments, f"comments on {TICKET}")
    if problem:
        return False, problem
    problem = collateral(records, "tickets", "ticket", allowed={TICKET}) or mailbox_collateral(mailbox)
    if problem:
        return False, problem
    return True, f"{TICKET} resolved with a comment and Grace informed"


verify = state_verifier("email", "records")(check)
