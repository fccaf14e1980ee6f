"""office_ops_001: TKT-2002 (Room 2B projector) assigned to Omar and in progress; nothing else touched."""

from __future__ import annotations

from ._common import Pair, Result, collateral, items, state_verifier, unchanged_except

NEEDS = "state"
TICKET = "TKT-2002"
OMAR = "omar.haddad@example.com"


def check(records: Pair) -> Result:
    """TKT-2002 has assignee Omar and status in_progress, its other fields are intact, other tickets untouched."""
    before = items(records[0], "tickets").get(TICKET)
    after = items(records[1], "tickets").get(TICKET)
    if before is None:
        return False, f"{TICKET} is not in the seeded helpdesk state"
    if after is None:
        return False, f"{TICKET} disappeared"
    if after.get("assignee") != OMAR:
        return False, f"{TICKET} is assigned to {after.get('assignee')!r}, expected {OMAR}"
    if after.get("status") != "in_progress":
        return False, f"{TICKET} has status {after.get('status')!r}, expected 'in_progress'"
    drift = unchanged_except(before, after, ("assignee", "status"))
    if drift:
        return False, f"{TICKET} fields {drift} were changed but should have been kept"
    problem = collateral(records, "tickets", "ticket", allowed={TICKET})
    if problem:
        return False, problem
    if len(items(records[1], "tickets")) != len(items(records[0], "tickets")):
        return False, "a ticket was created, but the task only asked to update TKT-2002"
    return True, f"{TICKET} is assigned to Omar and in progress"


verify = state_verifier("records")(check)
