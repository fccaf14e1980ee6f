"""office_ops_007: book TKT-2004's laptop setup in the first free slot, comment the time, set in progress."""

from __future__ import annotations

from ._common import (
    ACCOUNT,
    Pair,
    Result,
    added,
    collateral,
    has_phrase,
    items,
    new_comments,
    norm,
    repeated,
    state_verifier,
    unchanged_except,
)

NEEDS = "state"
TICKET = "TKT-2004"
#: the earliest half-hour slot from 13:00 on 19 March free in both 'work' and Omar's calendar.
START, END = "2025-03-19T15:30:00Z", "2025-03-19T16:00:00Z"


def check(records: Pair, calendar: Pair) -> Result:
    """A 'Laptop setup' event 15:30-16:00 UTC on 19 March in 'work' inviting the ticket's requester and
    assignee; one comment by the agent on TKT-2004 giving 15:30; the ticket in progress; nothing else changed."""
    ticket_before = items(records[0], "tickets").get(TICKET)
    ticket_after = items(records[1], "tickets").get(TICKET)
    if ticket_before is None or ticket_after is None:
        return False, f"{TICKET} is missing from the helpdesk state"
    people = {norm(ticket_before.get("requester")), norm(ticket_before.get("assignee"))}
    new = added(calendar, "events")
    sessions = [e for e in new if has_phrase(e.get("title"), "laptop setup")]
    if not sessions:
        return False, f"no 'Laptop setup' event was created (new events: {[e.get('title') for e in new]})"
    if len(new) > 1:
        return False, f"{len(new)} events were created, expected one"
    session = sessions[0]
    if (session.get("start"), session.get("end")) != (START, END):
        return False, (
            f"the session runs {session.get('start')} - {session.get('end')}; the earliest free 30-minute slot "
            f"is {START} - {END}"
        )
    if session.get("calendar_uid") != "work":
        return False, f"the session is in calendar {session.get('calendar_uid')!r}, expected 'work'"
    missing = people - {norm(a) for a in session.get("attendees") or []}
    if missing:
        return False, f"the session does not invite {sorted(missing)}"
    comments = [c for c in new_comments(records, TICKET) if norm(c.get("author")) == ACCOUNT]
    if not any("15:30" in str(c.get("body", "")) for c in comments):
        return False, f"no comment by {ACCOUNT} on {TICKET} gives the start time 15:30"
    problem = repeated(comments, f"comments on {TICKET}")
    if problem:
        return False, problem
    if ticket_after.get("status") != "in_progress":
        return False, f"{TICKET} has status {ticket_after.get('status')!r}, expected 'in_progress'"
    drift = unchanged_except(ticket_before, ticket_after, ("status",))
    if drift:
        return False, f"{TICKET} also had {drift} changed"
    problem = collateral(records, "tickets", "ticket", allowed={TICKET}) or collateral(calendar, "events", "event")
    if problem:
        return False, problem
    return True, "laptop setup booked 15:30-16:00 on 19 March, ticket commented and in progress"


verify = state_verifier("records", "calendar")(check)
