"""A built-in calendar tool server: calendars per account, events with time ranges, deterministic ids.

Every time is stored as a normalised UTC string (`2025-03-18T14:00:00Z`), so string order is time order and
replays of the same actions on the same seed give byte-identical states, diffs and verifier inputs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from eval_pipelines.toolservers.base import BuiltinToolServer, SeedError, State, ToolError, seed_objects, tool
from eval_pipelines.toolservers.fields import DEFAULT_ACCOUNT, account_of, object_schema, parse_addresses, string_param

PRIMARY_CALENDAR = "primary"
EVENT_ID_PREFIX = "evt-"
MAX_LIMIT = 200
DEFAULT_LIMIT = 50
DESCRIPTION_PREVIEW_CHARS = 200

_SEED_KEYS = {"account", "calendars", "events"}
_SEED_CALENDAR_KEYS = {"uid", "name", "owner", "description", "read_only"}
_SEED_EVENT_KEYS = {"id", "calendar_uid", "title", "start", "end", "attendees", "location", "description"}
_EDITABLE_EVENT_FIELDS = ("calendar_uid", "title", "start", "end", "attendees", "location", "description")
_TIME_EXAMPLE = "2025-03-18T14:00:00Z"


_ATTENDEES = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Attendee email addresses.",
}
_LIMIT = {
    "type": "integer",
    "description": f"Maximum number of events (1-{MAX_LIMIT}).",
    "minimum": 1,
    "maximum": MAX_LIMIT,
    "default": DEFAULT_LIMIT,
}
_TIME_MIN = string_param(f"Only events ending after this ISO 8601 date-time, e.g. {_TIME_EXAMPLE}.")
_TIME_MAX = string_param(f"Only events starting before this ISO 8601 date-time, e.g. {_TIME_EXAMPLE}.")


def format_utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str, parameter: str) -> datetime:
    """An ISO 8601 date or date-time as an aware UTC moment; ToolError naming `parameter` otherwise."""
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ToolError(
            f"Parameter '{parameter}': {value!r} is not an ISO 8601 date-time (for example {_TIME_EXAMPLE})"
        ) from None
    # A time without an offset is read as UTC so stored strings stay comparable.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _time_range(time_min: str | None, time_max: str | None) -> tuple[str | None, str | None]:
    low = format_utc(parse_time(time_min, "time_min")) if time_min is not None else None
    high = format_utc(parse_time(time_max, "time_max")) if time_max is not None else None
    if low is not None and high is not None and low >= high:
        raise ToolError(f"Parameter 'time_max' ({high}) must be after 'time_min' ({low})")
    return low, high


def _overlaps(event: dict[str, Any], low: str | None, high: str | None) -> bool:
    return (high is None or event["start"] < high) and (low is None or event["end"] > low)


def _earliest_first(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(events, key=lambda e: (e["start"], e["end"], e["id"]))


def _attendee_list(value: list[str], parameter: str) -> list[str]:
    return parse_addresses(",".join(value), parameter) if value else []


class CalendarServer(BuiltinToolServer):
    name: ClassVar[str] = "calendar"
    seeding_is_pure: ClassVar[bool] = True
    collection_nouns: ClassVar[dict[str, str]] = {
        "events": "calendar event(s)",
        "calendars": "calendar(s)",
        "settings": "setting(s)",
    }

    # -- state -----------------------------------------------------------------------------------------

    def new_state(self) -> State:
        # The primary calendar belongs to whoever the account is, so a blank workspace is usable at once.
        return {
            "calendars": {PRIMARY_CALENDAR: self._calendar(PRIMARY_CALENDAR, "Primary", DEFAULT_ACCOUNT)},
            "events": {},
            "settings": {"account": {"email": DEFAULT_ACCOUNT}},
        }

    @staticmethod
    def _calendar(uid: str, name: str, owner: str, description: str = "", read_only: bool = False) -> dict[str, Any]:
        return {"uid": uid, "name": name, "owner": owner, "description": description, "read_only": read_only}

    account = staticmethod(account_of)

    def seed(self, state: State, seed_files: list[Any]) -> None:
        for where, seed in seed_objects(seed_files, _SEED_KEYS, "'account', 'calendars' and/or 'events'"):
            if "account" in seed:
                self._seed_account(state, where, seed["account"])
            calendars = seed.get("calendars", [])
            if not isinstance(calendars, list):
                raise SeedError(f"{where}: calendars: expected a list")
            for pos, calendar in enumerate(calendars):
                item = self._seed_calendar(f"{where}: calendars[{pos}]", calendar, state)
                state["calendars"][item["uid"]] = item
            events = seed.get("events", [])
            if not isinstance(events, list):
                raise SeedError(f"{where}: events: expected a list")
            for pos, event in enumerate(events):
                item = self._seed_event(f"{where}: events[{pos}]", event, state)
                if item["id"] in state["events"]:
                    raise SeedError(f"{where}: events[{pos}]: duplicate event id {item['id']!r}")
                state["events"][item["id"]] = item

    def _seed_account(self, state: State, where: str, account: Any) -> None:
        try:
            addresses = parse_addresses(account, "account") if isinstance(account, str) else []
        except ToolError:
            addresses = []
        if len(addresses) != 1:
            raise SeedError(f"{where}: account: {account!r} is not an email address")
        previous = self.account(state)
        state["settings"]["account"] = {"email": addresses[0]}
        primary = state["calendars"].get(PRIMARY_CALENDAR)
        if primary is not None and primary["owner"] == previous:
            state["calendars"][PRIMARY_CALENDAR] = {**primary, "owner": addresses[0]}

    def _seed_calendar(self, where: str, calendar: Any, state: State) -> dict[str, Any]:
        if not isinstance(calendar, dict):
            raise SeedError(f"{where}: expected a calendar object with 'uid' and 'name'")
        unknown = sorted(set(calendar) - _SEED_CALENDAR_KEYS)
        if unknown:
            raise SeedError(f"{where}: unknown field(s) {unknown}")
        uid = calendar.get("uid")
        if not isinstance(uid, str) or not uid.strip():
            raise SeedError(f"{where}: uid: expected a non-empty string")
        owner = calendar.get("owner", self.account(state))
        try:
            owners = parse_addresses(owner, "owner") if isinstance(owner, str) else []
        except ToolError:
            owners = []
        if len(owners) != 1:
            raise SeedError(f"{where}: owner: {owner!r} is not an email address")
        read_only = calendar.get("read_only", False)
        if not isinstance(read_only, bool):
            raise SeedError(f"{where}: read_only: expected true or false")
        return self._calendar(
            uid.strip(), str(calendar.get("name") or uid), owners[0], str(calendar.get("description") or ""), read_only
        )

    @staticmethod
    def _seed_event(where: str, event: Any, state: State) -> dict[str, Any]:
        if not isinstance(event, dict):
            raise SeedError(f"{where}: expected an event object")
        unknown = sorted(set(event) - _SEED_EVENT_KEYS)
        if unknown:
            raise SeedError(f"{where}: unknown field(s) {unknown}")
        for required in ("id", "calendar_uid", "title", "start", "end"):
            if required not in event:
                raise SeedError(f"{where}: missing required field '{required}'")
        if not isinstance(event["id"], str) or not event["id"].strip():
            raise SeedError(f"{where}: id: expected a non-empty string")
        if event["calendar_uid"] not in state["calendars"]:
            raise SeedError(f"{where}: calendar_uid: unknown calendar {event['calendar_uid']!r}")
        try:
            start = format_utc(parse_time(str(event["start"]), "start"))
            end = format_utc(parse_time(str(event["end"]), "end"))
            attendees = event.get("attendees") or []
            if not isinstance(attendees, list) or not all(isinstance(a, str) for a in attendees):
                raise ToolError("attendees: expected a list of email addresses")
            attendee_list = _attendee_list(attendees, "attendees")
        except ToolError as exc:
            raise SeedError(f"{where}: {exc}") from exc
        if end <= start:
            raise SeedError(f"{where}: end: {end} is not after start {start}")
        return {
            "id": event["id"].strip(),
            "calendar_uid": event["calendar_uid"],
            "title": str(event["title"]),
            "start": start,
            "end": end,
            "attendees": attendee_list,
            "location": str(event.get("location") or ""),
            "description": str(event.get("description") or ""),
        }

    # -- helpers ---------------------------------------------------------------------------------------

    @staticmethod
    def _known_calendar(state: State, uid: str, parameter: str = "calendar_uid") -> dict[str, Any]:
        calendar = state["calendars"].get(uid)
        if calendar is None:
            available = ", ".join(sorted(state["calendars"])) or "none"
            raise ToolError(f"Parameter '{parameter}': unknown calendar '{uid}' (available: {available})")
        return calendar

    def _writable_calendar(self, state: State, uid: str, parameter: str = "calendar_uid") -> dict[str, Any]:
        calendar = self._known_calendar(state, uid, parameter)
        if calendar["read_only"]:
            raise ToolError(f"Calendar '{uid}' is read-only (owned by {calendar['owner']}); its events cannot change")
        return calendar

    @staticmethod
    def _event(state: State, event_id: str) -> dict[str, Any]:
        event = state["events"].get(event_id)
        if event is None:
            raise ToolError(f"Parameter 'event_id': event '{event_id}' not found")
        return event

    @staticmethod
    def _next_id(state: State) -> str:
        numbers = [
            int(key[len(EVENT_ID_PREFIX) :])
            for key in state["events"]
            if key.startswith(EVENT_ID_PREFIX) and key[len(EVENT_ID_PREFIX) :].isdigit()
        ]
        return f"{EVENT_ID_PREFIX}{max(numbers, default=0) + 1:04d}"

    @staticmethod
    def _listing_line(event: dict[str, Any]) -> str:
        parts = [f"[{event['id']}] {event['start']} - {event['end']} | {event['title']}"]
        parts.append(f"calendar: {event['calendar_uid']}")
        if event["location"]:
            parts.append(f"location: {event['location']}")
        if event["attendees"]:
            parts.append(f"attendees: {', '.join(event['attendees'])}")
        line = " | ".join(parts)
        if event["description"]:
            preview = event["description"]
            if len(preview) > DESCRIPTION_PREVIEW_CHARS:
                preview = preview[:DESCRIPTION_PREVIEW_CHARS] + "..."
            line += "\n    description: " + preview.replace("\n", " ")
        return line

    @staticmethod
    def _conflicts(state: State, event: dict[str, Any]) -> list[dict[str, Any]]:
        return _earliest_first(
            [
                other
                for other in state["events"].values()
                if other["id"] != event["id"]
                and other["calendar_uid"] == event["calendar_uid"]
                and _overlaps(other, event["start"], event["end"])
            ]
        )

    def _with_conflict_note(self, state: State, event: dict[str, Any], text: str) -> str:
        conflicts = self._conflicts(state, event)
        if not conflicts:
            return text
        names = "; ".join(f"[{c['id']}] {c['title']} ({c['start']} - {c['end']})" for c in conflicts)
        return f"{text}\nNote: it overlaps with {names}."

    # -- tools -----------------------------------------------------------------------------------------

    @tool(
        name="list_calendars",
        description="List every calendar you can see: uid, name, owner and whether it is read-only.",
        parameters=object_schema({}, []),
        mutates_state=False,
    )
    def _tool_list_calendars(self, state: State) -> str:
        calendars = sorted(state["calendars"].values(), key=lambda c: c["uid"])
        if not calendars:
            return "You have no calendars."
        lines = [f"{len(calendars)} calendar(s):"]
        for calendar in calendars:
            access = "read-only" if calendar["read_only"] else "writable"
            line = f"[{calendar['uid']}] {calendar['name']} | owner: {calendar['owner']} | {access}"
            if calendar["description"]:
                line += f" | {calendar['description']}"
            lines.append(line)
        return "\n".join(lines)

    @tool(
        name="list_events",
        description=(
            "List the events of one calendar, earliest first. With time_min/time_max, only events overlapping "
            "that range are listed (an event overlaps when it starts before time_max and ends after time_min)."
        ),
        parameters=object_schema(
            {
                "calendar_uid": string_param("Uid of the calendar (see list_calendars)."),
                "time_min": _TIME_MIN,
                "time_max": _TIME_MAX,
                "limit": _LIMIT,
            },
            ["calendar_uid"],
        ),
        mutates_state=False,
    )
    def _tool_list_events(
        self, state: State, calendar_uid: str, limit: int, time_min: str | None = None, time_max: str | None = None
    ) -> str:
        calendar = self._known_calendar(state, calendar_uid)
        low, high = _time_range(time_min, time_max)
        events = _earliest_first(
            [e for e in state["events"].values() if e["calendar_uid"] == calendar_uid and _overlaps(e, low, high)]
        )
        window = f" between {low or 'the beginning'} and {high or 'the end'}" if low or high else ""
        if not events:
            return f"No events in calendar '{calendar_uid}' ({calendar['name']}){window}."
        page = events[:limit]
        header = f"{len(events)} event(s) in calendar '{calendar_uid}'{window}; showing {len(page)}, earliest first:"
        return "\n".join([header, *(self._listing_line(e) for e in page)])

    @tool(
        name="create_event",
        description="Create an event. Times are ISO 8601 date-times; a time without an offset is read as UTC.",
        parameters=object_schema(
            {
                "calendar_uid": string_param("Uid of the calendar to add the event to."),
                "title": string_param("Event title."),
                "start": string_param(f"Start, ISO 8601, e.g. {_TIME_EXAMPLE}."),
                "end": string_param("End, ISO 8601; must be after start."),
                "attendees": _ATTENDEES,
                "location": string_param("Where the event takes place."),
                "description": string_param("Free-text description or agenda."),
            },
            ["calendar_uid", "title", "start", "end"],
        ),
        mutates_state=True,
    )
    def _tool_create_event(
        self,
        state: State,
        calendar_uid: str,
        title: str,
        start: str,
        end: str,
        attendees: list[str] | None = None,
        location: str = "",
        description: str = "",
    ) -> str:
        self._writable_calendar(state, calendar_uid)
        if not title.strip():
            raise ToolError("Parameter 'title': must not be empty")
        start_utc = format_utc(parse_time(start, "start"))
        end_utc = format_utc(parse_time(end, "end"))
        if end_utc <= start_utc:
            raise ToolError(f"Parameter 'end' ({end_utc}) must be after 'start' ({start_utc})")
        event: dict[str, Any] = {
            "id": self._next_id(state),
            "calendar_uid": calendar_uid,
            "title": title.strip(),
            "start": start_utc,
            "end": end_utc,
            "attendees": _attendee_list(attendees or [], "attendees"),
            "location": location.strip(),
            "description": description,
        }
        state["events"][event["id"]] = event
        text = f"Event created: {self._listing_line(event)}"
        return self._with_conflict_note(state, event, text)

    @tool(
        name="update_event",
        description=(
            "Change some fields of an event; fields you leave out keep their value. Giving calendar_uid moves "
            "the event to that calendar. Attendees, when given, replace the whole list."
        ),
        parameters=object_schema(
            {
                "event_id": string_param("Id of the event."),
                "calendar_uid": string_param("Move the event to this calendar."),
                "title": string_param("New title."),
                "start": string_param("New start, ISO 8601."),
                "end": string_param("New end, ISO 8601; must be after the (new) start."),
                "attendees": _ATTENDEES,
                "location": string_param("New location."),
                "description": string_param("New description."),
            },
            ["event_id"],
        ),
        mutates_state=True,
    )
    def _tool_update_event(self, state: State, event_id: str, **changes: Any) -> str:
        event = self._event(state, event_id)
        self._writable_calendar(state, event["calendar_uid"])
        if not changes:
            fields = ", ".join(f"'{f}'" for f in _EDITABLE_EVENT_FIELDS)
            raise ToolError(f"update_event needs at least one field to change: {fields}")
        updated = dict(event)
        if "calendar_uid" in changes:
            self._writable_calendar(state, changes["calendar_uid"])
            updated["calendar_uid"] = changes["calendar_uid"]
        if "title" in changes:
            if not changes["title"].strip():
                raise ToolError("Parameter 'title': must not be empty")
            updated["title"] = changes["title"].strip()
        if "start" in changes:
            updated["start"] = format_utc(parse_time(changes["start"], "start"))
        if "end" in changes:
            updated["end"] = format_utc(parse_time(changes["end"], "end"))
        if updated["end"] <= updated["start"]:
            name = "end" if "end" in changes else "start"
            raise ToolError(
                f"Parameter '{name}': the event would end ({updated['end']}) before it starts ({updated['start']})"
            )
        if "attendees" in changes:
            updated["attendees"] = _attendee_list(changes["attendees"], "attendees")
        if "location" in changes:
            updated["location"] = changes["location"].strip()
        if "description" in changes:
            updated["description"] = changes["description"]
        if updated == event:
            return f"Event '{event_id}' already has those values; nothing changed."
        state["events"][event_id] = updated
        changed = ", ".join(f for f in _EDITABLE_EVENT_FIELDS if updated[f] != event[f])
        text = f"Event '{event_id}' updated ({changed}): {self._listing_line(updated)}"
        return self._with_conflict_note(state, updated, text)

    @tool(
        name="delete_event",
        description="Delete one event.",
        parameters=object_schema({"event_id": string_param("Id of the event to delete.")}, ["event_id"]),
        mutates_state=True,
    )
    def _tool_delete_event(self, state: State, event_id: str) -> str:
        event = self._event(state, event_id)
        self._writable_calendar(state, event["calendar_uid"])
        del state["events"][event_id]
        return f"Event '{event_id}' ({event['title']}, {event['start']}) deleted."

    @tool(
        name="search_events",
        description=(
            "Search events in every calendar, earliest first. Every word of the query must appear (case-"
            "insensitively) in the title, description, location or attendees. time_min/time_max narrow the "
            "search to events overlapping that range."
        ),
        parameters=object_schema(
            {
                "query": string_param("Words to look for."),
                "time_min": _TIME_MIN,
                "time_max": _TIME_MAX,
                "limit": _LIMIT,
            },
            ["query"],
        ),
        mutates_state=False,
    )
    def _tool_search_events(
        self, state: State, query: str, limit: int, time_min: str | None = None, time_max: str | None = None
    ) -> str:
        terms = query.lower().split()
        if not terms:
            raise ToolError("Parameter 'query': must contain at least one word")
        low, high = _time_range(time_min, time_max)

        def matches(event: dict[str, Any]) -> bool:
            haystack = " ".join([event["title"], event["description"], event["location"], *event["attendees"]]).lower()
            return all(term in haystack for term in terms)

        found = _earliest_first([e for e in state["events"].values() if _overlaps(e, low, high) and matches(e)])
        if not found:
            return f"No events match '{query}'."
        page = found[:limit]
        header = f"{len(found)} event(s) match '{query}'; showing {len(page)}, earliest first:"
        return "\n".join([header, *(self._listing_line(e) for e in page)])

    # -- rendering -------------------------------------------------------------------------------------

    def render_text(self, state: State) -> str:
        lines = [f"Account: {self.account(state)}"]
        for calendar in sorted(state["calendars"].values(), key=lambda c: c["uid"]):
            events = _earliest_first([e for e in state["events"].values() if e["calendar_uid"] == calendar["uid"]])
            access = ", read-only" if calendar["read_only"] else ""
            lines += ["", f"Calendar {calendar['uid']} - {calendar['name']} ({calendar['owner']}{access}):"]
            lines += [f"  {self._listing_line(e)}" for e in events] or ["  (no events)"]
        return "\n".join(lines)
