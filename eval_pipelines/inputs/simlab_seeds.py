"""A SimLab task's inline seeds (`seed_emails`, `seed_calendar_events`, `seed_group_channels`) as the built-in
servers' seed files. Whatever cannot be seeded is reported per task with its field named (`notes`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

SEED_TIMESTAMP = "2025-01-06T09:00:00Z"
#: note(task_id, text): how a conversion reports what it left out
Note = Callable[[str, str], None]


def seed_contents(
    raw: dict[str, Any], task_id: str, profiles: dict[str, dict[str, Any]], note: Note
) -> dict[str, dict[str, Any]]:
    """Built-in server -> the seed file's content, for every list of seeds the task carries. A generated task
    (taskgen) carries a server's seed twice: as its seed files (`seed_data` naming inline `seed_files`) and in
    SimLab's lists for SimLab's own servers; the files are the whole seed, and the lists are left to SimLab."""
    named = raw.get("seed_data")
    inline = raw.get("seed_files")
    carried = (
        {str(s) for s, files in named.items() if isinstance(files, list) and files and set(files) <= set(inline)}
        if isinstance(named, dict) and isinstance(inline, dict)
        else set()
    )
    seeds: dict[str, dict[str, Any] | None] = {}
    if raw.get("seed_emails"):
        seeds["email"] = mailbox(raw["seed_emails"], profiles, task_id, note)
    if raw.get("seed_calendar_events"):
        seeds["calendar"] = calendar(raw["seed_calendar_events"], task_id, note)
    if raw.get("seed_group_channels"):
        seeds["chat"] = channels(raw["seed_group_channels"], profiles, task_id, note)
    return {server: content for server, content in seeds.items() if content is not None and server not in carried}


def _address(value: Any, profiles: dict[str, dict[str, Any]]) -> str:
    text = str(value or "").strip()
    if text in profiles:
        return str(profiles[text]["email"])
    return text if "@" in text else f"{text}@example.com"


def mailbox(emails: Any, profiles: dict[str, dict[str, Any]], task_id: str, note: Note) -> dict[str, Any] | None:
    if not isinstance(emails, list):
        note(task_id, "seed_emails: expected a list; left out")
        return None
    items = []
    for pos, email in enumerate(emails):
        if not isinstance(email, dict) or not email.get("to_addr") or not email.get("subject"):
            note(task_id, f"seed_emails[{pos}]: needs to_addr and subject; left out")
            continue
        if email.get("body_html"):
            note(task_id, f"seed_emails[{pos}].body_html: the mail server keeps plain text; body_text kept")
        items.append(
            {
                "id": f"seed-{pos + 1:03d}",
                "from": _address(email.get("from_profile_id"), profiles),
                "to": [a.strip() for a in str(email["to_addr"]).split(",") if a.strip()],
                "subject": str(email["subject"]),
                "body": str(email.get("body_text") or ""),
                "timestamp": str(email.get("timestamp") or SEED_TIMESTAMP),
            }
        )
    if not items:
        return None
    # The mailbox belongs to whoever the seed mail is addressed to most: the agent.
    account = Counter(a for item in items for a in item["to"]).most_common(1)[0][0]
    return {"account": account, "emails": items}


def calendar(events: Any, task_id: str, note: Note) -> dict[str, Any] | None:
    if not isinstance(events, list):
        note(task_id, "seed_calendar_events: expected a list; left out")
        return None
    items, accounts = [], Counter[str]()
    for pos, event in enumerate(events):
        if not isinstance(event, dict) or not all(event.get(k) for k in ("summary", "start", "end")):
            note(task_id, f"seed_calendar_events[{pos}]: needs summary, start and end; left out")
            continue
        if event.get("account"):
            accounts[str(event["account"])] += 1
        items.append(
            {
                "id": f"seed-evt-{pos + 1:03d}",
                "calendar_uid": "primary",
                "title": str(event["summary"]),
                "start": str(event["start"]),
                "end": str(event["end"]),
                "description": str(event.get("description") or ""),
                "attendees": [str(a) for a in event.get("attendees") or []],
            }
        )
    if not items:
        return None
    seed: dict[str, Any] = {"events": items}
    if accounts and "@" in (account := accounts.most_common(1)[0][0]):
        seed["account"] = account
    return seed


def channels(channels: Any, profiles: dict[str, dict[str, Any]], task_id: str, note: Note) -> dict[str, Any] | None:
    if not isinstance(channels, list):
        note(task_id, "seed_group_channels: expected a list; left out")
        return None
    items = []
    for pos, channel in enumerate(channels):
        name = (
            str((channel or {}).get("channel_name") or "").strip().lstrip("#").lower()
            if isinstance(channel, dict)
            else ""
        )
        if not name:
            note(task_id, f"seed_group_channels[{pos}]: needs channel_name; left out")
            continue
        messages = []
        for index, message in enumerate(channel.get("messages") or []):
            text = (message or {}).get("text") or (message or {}).get("message") if isinstance(message, dict) else None
            if not text:
                note(task_id, f"seed_group_channels[{pos}].messages[{index}]: no text; left out")
                continue
            messages.append({"from": _address(message.get("from_profile_id"), profiles), "text": str(text)})
        items.append({"name": name, "topic": str(channel.get("topic") or ""), "messages": messages})
    return {"channels": items} if items else None
