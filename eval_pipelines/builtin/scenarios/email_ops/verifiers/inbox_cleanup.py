"""email_ops_009: trash exactly the newsletter, the toner promotion and the recruiter email."""

from __future__ import annotations

from ._common import Result, State, collateral, describe, new_sent, recipients, state_verifier, trashed

NEEDS = "state"
JUNK = {"e-010": "FreightWatch newsletter", "e-014": "toner promotion", "e-019": "recruiter message"}
JUNK_SENDERS = {"newsletter@freightwatch.io", "deals@officesupplyhub.net", "talent@hirefast-recruiting.com"}


def check(initial: State, final: State) -> Result:
    """All three unsolicited emails trashed, nothing else moved, none of their senders answered."""
    moved = trashed(initial, final)
    missing = [f"{key} ({label})" for key, label in JUNK.items() if key not in moved]
    if missing:
        return False, f"still not in the trash: {', '.join(missing)}"
    problem = collateral(initial, final, allowed_trash=set(JUNK))
    if problem:
        return False, problem
    answered = [e for e in new_sent(initial, final) if recipients(e) & JUNK_SENDERS]
    if answered:
        return False, f"an unsolicited sender was answered: {describe(answered)}"
    return True, "the three unsolicited emails are in the trash; everything else stayed put"


verify = state_verifier(check)
