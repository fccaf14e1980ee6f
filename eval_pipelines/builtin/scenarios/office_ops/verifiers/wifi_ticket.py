"""office_ops_005: an urgent network ticket for Sofia's east-wing Wi-Fi outage, assigned to Omar."""

from __future__ import annotations

from ._common import Pair, Result, added, collateral, has_phrase, mailbox_collateral, norm, state_verifier

NEEDS = "state"
SOFIA = "sofia.rossi@example.com"
OMAR = "omar.haddad@example.com"


def check(mailbox: Pair, records: Pair) -> Result:
    """Exactly one new ticket: requester Sofia, priority urgent, tag 'network', assignee Omar, Wi-Fi in the
    title and the east wing in the description; seeded tickets and emails untouched."""
    new = added(records, "tickets")
    if not new:
        return False, "no helpdesk ticket was created"
    if len(new) > 1:
        return False, f"{len(new)} tickets were created, expected one"
    ticket = new[0]
    problems = []
    if ticket.get("requester") != SOFIA:
        problems.append(f"requester is {ticket.get('requester')!r}, expected {SOFIA}")
    if ticket.get("priority") != "urgent":
        problems.append(f"priority is {ticket.get('priority')!r}, expected 'urgent'")
    if "network" not in (ticket.get("tags") or []):
        problems.append(f"tags {ticket.get('tags')} lack 'network'")
    if ticket.get("assignee") != OMAR:
        problems.append(f"assignee is {ticket.get('assignee')!r}, expected {OMAR}")
    title = norm(ticket.get("title"))
    if "wi-fi" not in title and "wifi" not in title:
        problems.append(f"title {ticket.get('title')!r} does not mention Wi-Fi")
    if not has_phrase(ticket.get("description"), "east wing"):
        problems.append("the description does not name the east wing")
    if problems:
        return False, f"ticket {ticket.get('id')}: " + "; ".join(problems)
    problem = collateral(records, "tickets", "ticket") or mailbox_collateral(mailbox)
    if problem:
        return False, problem
    return True, f"ticket {ticket.get('id')} opened for Sofia's Wi-Fi outage and assigned to Omar"


verify = state_verifier("email", "records")(check)
