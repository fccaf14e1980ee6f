"""A local scenario's seed data in the hosted product's task fields (`seed_emails`, `seed_calendar_events`), which
the SimLab CLI's `tasks seed` sends into its own mail and calendar servers before a run.

The built-in servers' seed files hold whole mailboxes and calendars (`{"account", "emails": [...]}`,
`{"account", "calendars": [...], "events": [...]}`); each message and event becomes one entry. Seed files of
other shapes have no hosted counterpart and are left to `seed_data`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eval_pipelines.schemas.hosted import SeedCalendarEvent, SeedEmail


def _addresses(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return str(value or "")


def seed_emails(payloads: Iterable[Any]) -> list[SeedEmail]:
    emails: list[SeedEmail] = []
    for payload in payloads:
        if not isinstance(payload, dict) or not isinstance(payload.get("emails"), list):
            continue
        for email in payload["emails"]:
            if not isinstance(email, dict) or not email.get("to") or not email.get("subject"):
                continue
            emails.append(
                SeedEmail(
                    from_profile_id=str(email.get("from") or payload.get("account") or ""),
                    to_addr=_addresses(email["to"]),
                    subject=str(email["subject"]),
                    body_text=str(email.get("body") or ""),
                )
            )
    return emails


def seed_calendar_events(payloads: Iterable[Any]) -> list[SeedCalendarEvent]:
    events: list[SeedCalendarEvent] = []
    for payload in payloads:
        if not isinstance(payload, dict) or not isinstance(payload.get("events"), list):
            continue
        owners = {c.get("uid"): c.get("owner") for c in payload.get("calendars") or [] if isinstance(c, dict)}
        for event in payload["events"]:
            if not isinstance(event, dict) or not all(event.get(k) for k in ("title", "start", "end")):
                continue
            calendar = str(event.get("calendar_uid") or "default")
            events.append(
                SeedCalendarEvent(
                    account=str(owners.get(calendar) or payload.get("account") or ""),
                    calendar_id=calendar,
                    summary=str(event["title"]),
                    description=str(event.get("description") or event.get("location") or ""),
                    start=str(event["start"]),
                    end=str(event["end"]),
                    attendees=[str(a) for a in event.get("attendees") or []],
                )
            )
    return events
