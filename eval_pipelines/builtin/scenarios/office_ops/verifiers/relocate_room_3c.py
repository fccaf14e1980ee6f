"""office_ops_004: Thursday 20 March's Room 3C events move to Room 2B, times kept; nothing else changes."""

from __future__ import annotations

from ._common import Pair, Result, collateral, items, norm, state_verifier, unchanged_except

NEEDS = "state"
DAY = "2025-03-20"


def check(calendar: Pair) -> Result:
    """Each seeded work event in Room 3C on 20 March now says Room 2B with its time unchanged; every other
    event (including Room 3C on other days) is untouched and no event was added or removed."""
    before, after = items(calendar[0], "events"), items(calendar[1], "events")
    targets = {
        key
        for key, event in before.items()
        if event.get("calendar_uid") == "work"
        and str(event.get("start", "")).startswith(DAY)
        and "room 3c" in norm(event.get("location"))
    }
    if not targets:
        return False, "the seeded calendar has no Room 3C events on 20 March"
    for key in sorted(targets):
        now = after.get(key)
        if now is None:
            return False, f"event {key} ({before[key].get('title')!r}) was deleted instead of moved to Room 2B"
        if "room 2b" not in norm(now.get("location")):
            return False, f"event {key} ({now.get('title')!r}) is still in {now.get('location')!r}, expected Room 2B"
        drift = unchanged_except(before[key], now, ("location",))
        if drift:
            return False, f"event {key} also had {drift} changed; only the room should change"
    problem = collateral(calendar, "events", "event", allowed=targets)
    if problem:
        return False, problem
    if set(after) - set(before):
        return False, "new events were created; the task only moves existing ones"
    return True, f"{len(targets)} Room 3C event(s) on 20 March moved to Room 2B"


verify = state_verifier("calendar")(check)
