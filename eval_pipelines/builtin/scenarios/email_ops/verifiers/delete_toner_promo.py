"""email_ops_002: trash the Office Supply Hub toner promotion and nothing else."""

from __future__ import annotations

from ._common import Result, State, collateral, new_sent, state_verifier, trashed, unasked_sends

NEEDS = "state"
PROMO = "e-014"


def check(initial: State, final: State) -> Result:
    """e-014 is in the trash; no other email moved; nothing sent (an unsubscribe reply confirms the address)."""
    if PROMO not in trashed(initial, final):
        return False, f"the toner promotion ({PROMO}) is not in the trash"
    problem = collateral(initial, final, allowed_trash={PROMO})
    if problem:
        return False, problem
    problem = unasked_sends(new_sent(initial, final))
    if problem:
        return False, problem
    return True, "toner promotion moved to trash; nothing else deleted"


verify = state_verifier(check)
