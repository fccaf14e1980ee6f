"""office_ops_002: the Q2 planning review on Tuesday 18 March, 14:00-15:00 UTC, Room 2B, Nina and Grace invited."""

from __future__ import annotations

from ._common import Pair, Result, added, collateral, has_phrase, norm, state_verifier

NEEDS = "state"
START, END = "2025-03-18T14:00:00Z", "2025-03-18T15:00:00Z"
INVITEES = {"nina.patel@example.com", "grace.liu@example.com"}


def check(calendar: Pair) -> Result:
    """Exactly one new event in 'work' titled 'Q2 planning review' at the right time and room, with both
    invitees; seeded events untouched."""
    new = added(calendar, "events")
    if not new:
        return False, "no event was created"
    if len(new) > 1:
        return False, f"{len(new)} events were created, expected one: {[e.get('title') for e in new]}"
    event = new[0]
    if not has_phrase(event.get("title"), "Q2 planning review"):
        return False, f"the new event is titled {event.get('title')!r}, expected 'Q2 planning review'"
    if event.get("calendar_uid") != "work":
        return False, f"the event is in calendar {event.get('calendar_uid')!r}, expected 'work'"
    if (event.get("start"), event.get("end")) != (START, END):
        return False, f"the event runs {event.get('start')} - {event.get('end')}, expected {START} - {END}"
    if "room 2b" not in norm(event.get("location")):
        return False, f"the event's location is {event.get('location')!r}, expected Room 2B"
    missing = INVITEES - {norm(a) for a in event.get("attendees") or []}
    if missing:
        return False, f"{sorted(missing)} are not invited"
    problem = collateral(calendar, "events", "event")
    if problem:
        return False, problem
    return True, "the Q2 planning review is on the work calendar with Nina and Grace"


verify = state_verifier("calendar")(check)
