"""Valid parameter values from a tool's JSON Schema.

A parameter's meaning is read from its schema (`enum`, `type`, `format`, bounds, `pattern`) and, for plain
strings, from its name and description: an email address, a date-time, a title, a body text, a place, a
search query, a path. Every generated parameter set is checked against the tool's schema before use.

Values come from two random streams: `params` (titles, texts, times, enums, numbers) and `entities` (people and
places), so a request can hold one of them fixed across tasks (see `request.Diversity`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from jsonschema import Draft202012Validator

from eval_pipelines.taskgen.toolset import ToolInfo, id_stem

FIRST_NAMES = [
    "Aisha",
    "Marcus",
    "Elena",
    "Tom",
    "Priya",
    "David",
    "Sofia",
    "Kenji",
    "Laura",
    "Omar",
    "Grace",
    "Mateo",
    "Hannah",
    "Ravi",
    "Chloe",
    "Felix",
    "Nadia",
    "Jonas",
    "Amara",
    "Lucas",
    "Mei",
    "Diego",
    "Freya",
    "Samuel",
]
LAST_NAMES = [
    "Okafor",
    "Lee",
    "Garcia",
    "Becker",
    "Shah",
    "Kim",
    "Rossi",
    "Tanaka",
    "Novak",
    "Haddad",
    "Wright",
    "Silva",
    "Meyer",
    "Iyer",
    "Martin",
    "Brandt",
    "Petrova",
    "Lund",
    "Mensah",
    "Moreau",
    "Chen",
    "Ortiz",
    "Berg",
    "Cohen",
]
LOCATIONS = (
    "Room 4B",
    "Room 2A",
    "Board room",
    "Room 5C",
    "Innovation lab",
    "Room 3D",
    "Auditorium",
    "Room 1F",
    "Video call",
    "Cafe corner",
    "Room 6E",
    "Training room",
)
TITLE_QUALIFIERS = [
    "Quarterly",
    "Weekly",
    "Monthly",
    "Annual",
    "Regional",
    "Team",
    "Cross-team",
    "Executive",
    "Client",
    "Vendor",
    "Project",
    "Q3",
]
TITLE_TOPICS = (
    "budget",
    "roadmap",
    "hiring",
    "onboarding",
    "security",
    "marketing",
    "compliance",
    "training",
    "procurement",
    "product launch",
    "customer feedback",
    "data migration",
    "office move",
    "release",
    "partnership",
    "analytics",
    "support backlog",
    "sustainability",
)
TITLE_KINDS = (
    "review",
    "sync",
    "workshop",
    "check-in",
    "kickoff",
    "retrospective",
    "briefing",
    "planning session",
    "demo",
    "update",
    "follow-up",
    "audit",
)
COMPANIES = (
    "Northwind Traders",
    "Blue Harbor Logistics",
    "Acme Robotics",
    "Greenfield Foods",
    "Summit Analytics",
    "Redwood Health",
    "Lumen Energy",
    "Orbit Media",
    "Cedar & Pine Legal",
    "Atlas Manufacturing",
    "Silverline Finance",
    "Harbor View Hotels",
)
TEXT_TEMPLATES = (
    "Agenda: {topic} status, open questions and next steps.",
    "Please bring the latest {topic} figures.",
    "Notes from the last {topic} discussion are attached.",
    "Goal: agree on the {topic} priorities for next month.",
    "Short update on {topic}; decisions needed from the group.",
    "Follow-up on the {topic} action items.",
)

#: The working week the generated times fall in (Monday 2025-03-17 .. Friday 2025-03-28).
BASE_DAY = datetime(2025, 3, 17, tzinfo=UTC)
WORK_DAYS = 10
DURATIONS_MINUTES = (30, 45, 60, 90)

_EMAIL_NAMES = frozenset(
    [
        "email",
        "to",
        "cc",
        "bcc",
        "recipient",
        "recipients",
        "attendee",
        "attendees",
        "requester",
        "assignee",
        "invitee",
        "invitees",
        "participant",
        "participants",
        "owner",
        "author",
        "sender",
        "member",
        "members",
    ]
)
_START_NAMES = frozenset(["start", "start_time", "starts_at", "begin", "begins_at", "from_time", "time_min", "since"])
_END_NAMES = frozenset(["end", "end_time", "ends_at", "finish", "until", "time_max", "to_time"])
_TIME_NAMES = (
    _START_NAMES | _END_NAMES | frozenset(["due", "due_at", "deadline", "time", "datetime", "when", "scheduled_at"])
)
_TITLE_NAMES = frozenset(["title", "subject", "name", "summary", "headline", "topic", "label"])
#: the fields whose text names an item (in this order of preference; `*_name` fields come after them).
TITLE_FIELDS = ("title", "subject", "name", "summary", "headline", "label")
_TEXT_NAMES = frozenset(
    [
        "body",
        "description",
        "content",
        "message",
        "text",
        "note",
        "notes",
        "comment",
        "details",
        "agenda",
        "reason",
        "answer",
        "reply",
    ]
)
_PLACE_NAMES = frozenset(["location", "room", "place", "venue", "where"])
_COMPANY_NAMES = frozenset(["company", "organization", "organisation", "employer", "vendor", "supplier"])
#: `<word>_name` parameters naming a person (`customer_name`, `full_name`).
_PERSON_WORDS = frozenset(
    ["full", "customer", "contact", "person", "client", "employee", "user", "requester", "owner", "patient", "guest"]
)
_QUERY_NAMES = frozenset(["query", "q", "search", "term", "keyword", "keywords"])
_PATH_NAMES = frozenset(["path", "file", "filename", "file_path", "dir", "directory", "folder_path"])
_URL_NAMES = frozenset(["url", "link", "uri", "href", "website"])


class UnplannableParameter(ValueError):
    """No valid value could be generated for a parameter (its schema is too unusual)."""


@dataclass(frozen=True)
class Person:
    first_name: str
    last_name: str
    email: str
    role: str = ""

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"


def people_pool(domain: str, rng: random.Random, size: int = 16) -> list[Person]:
    pairs = [(f, last) for f in FIRST_NAMES for last in LAST_NAMES]
    rng.shuffle(pairs)
    people, seen = [], set()
    for first, last in pairs:
        if first in seen:
            continue
        seen.add(first)
        people.append(Person(first, last, f"{first.lower()}.{last.lower()}@{domain}"))
        if len(people) >= size:
            break
    return people


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _schema_type(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None:
        if "properties" in schema:
            return "object"
        if "items" in schema:
            return "array"
    return kind if isinstance(kind, str) else None


def semantic(param: str, schema: Mapping[str, Any]) -> str:
    """What a string parameter holds: email, start, end, time, date, first_name, last_name, person_name,
    company, title, text, place, query, path, url, id or word."""
    name = param.lower()
    desc = str(schema.get("description") or "").lower()
    fmt = str(schema.get("format") or "").lower()
    if id_stem(param) is not None:
        return "id"
    if fmt == "email" or name.endswith("email") or (name.endswith("_address") and "email" in desc):
        return "email"
    if fmt in ("date-time", "datetime") or name in _TIME_NAMES or name.endswith(("_at", "_time")):
        if name in _START_NAMES or "start" in name or "begin" in name:
            return "start"
        if name in _END_NAMES or "end" in name or "until" in name:
            return "end"
        return "time"
    if fmt == "date" or name.endswith("_date") or name == "date":
        return "date"
    if name in _EMAIL_NAMES and ("address" in desc or "email" in desc or name not in ("to", "owner", "author")):
        return "email"
    if "iso 8601" in desc or "date-time" in desc:
        return "time"
    who = _who(name)
    if who is not None:
        return who
    for names, meaning in ((_TITLE_NAMES, "title"), (_TEXT_NAMES, "text"), (_PLACE_NAMES, "place")):
        if name in names:
            return meaning
    if name in _QUERY_NAMES:
        return "query"
    if fmt == "uri" or name in _URL_NAMES:
        return "url"
    if name in _PATH_NAMES or name.endswith("_path"):
        return "path"
    return "word"


def _who(name: str) -> str | None:
    """first_name, last_name, person_name or company, when the parameter's name says it holds one."""
    if name in ("first_name", "given_name"):
        return "first_name"
    if name in ("last_name", "family_name", "surname"):
        return "last_name"
    if name.endswith("_name") and name[: -len("_name")] in _PERSON_WORDS:
        return "person_name"
    if name in _COMPANY_NAMES or name.endswith(("company_name", "organization_name")):
        return "company"
    return None


@dataclass
class ValueFactory:
    """Generates values; `params` and `entities` are the two random streams (see module doc)."""

    params: random.Random
    entities: random.Random
    people: list[Person]
    #: titles already used anywhere (world and tasks); None disables the uniqueness rule.
    used_titles: set[str] | None = field(default_factory=set)

    # -- building blocks ----------------------------------------------------------------------------------

    def person(self) -> Person:
        return self.entities.choice(self.people)

    def place(self) -> str:
        return self.entities.choice(LOCATIONS)

    def title(self) -> str:
        for _ in range(200):
            rng = self.params
            candidate = f"{rng.choice(TITLE_QUALIFIERS)} {rng.choice(TITLE_TOPICS)} {rng.choice(TITLE_KINDS)}"
            if self.used_titles is None or candidate.lower() not in self.used_titles:
                if self.used_titles is not None:
                    self.used_titles.add(candidate.lower())
                return candidate
        raise UnplannableParameter("ran out of distinct titles")

    def text(self) -> str:
        return self.params.choice(TEXT_TEMPLATES).format(topic=self.params.choice(TITLE_TOPICS))

    def window(self) -> tuple[str, str]:
        day = BASE_DAY + timedelta(days=self.params.randrange(WORK_DAYS // 5 * 7))
        while day.weekday() >= 5:
            day += timedelta(days=1)
        start = day.replace(hour=self.params.randrange(8, 17), minute=self.params.choice((0, 30)))
        end = start + timedelta(minutes=self.params.choice(DURATIONS_MINUTES))
        return format_time(start), format_time(end)

    # -- schema-driven values -----------------------------------------------------------------------------

    def value(self, param: str, schema: Mapping[str, Any], window: tuple[str, str]) -> Any:
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            choices = [v for v in schema["enum"] if v is not None] or schema["enum"]
            return self.params.choice(choices)
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list):
                concrete = [o for o in options if isinstance(o, dict) and _schema_type(o) not in (None, "null")]
                if concrete:
                    return self.value(param, {**schema, **concrete[0], key: None}, window)
        kind = _schema_type(schema)
        if kind == "boolean":
            return self.params.random() < 0.5
        if kind in ("integer", "number"):
            return self._number(schema, integer=kind == "integer")
        if kind == "array":
            return self._array(param, schema, window)
        if kind == "object":
            props = schema.get("properties") or {}
            required = [r for r in schema.get("required") or [] if r in props]
            return {name: self.value(name, props[name] or {}, window) for name in required}
        return self._string(param, schema, window)

    def _number(self, schema: Mapping[str, Any], *, integer: bool) -> int | float:
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        if "exclusiveMinimum" in schema and "minimum" not in schema:
            low = low + 1
        high = schema.get("maximum", low + 20)
        if "exclusiveMaximum" in schema and "maximum" not in schema:
            high = schema["exclusiveMaximum"] - 1
        low, high = int(low), int(max(low, min(high, low + 20)))
        value = self.params.randint(low, high)
        return value if integer else float(value)

    def _array(self, param: str, schema: Mapping[str, Any], window: tuple[str, str]) -> list[Any]:
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {"type": "string"}
        assert isinstance(items, dict)
        low = int(schema.get("minItems", 1))
        high = int(schema.get("maxItems", max(low, 3)))
        count = self.entities.randint(low, max(low, min(high, 3)))
        item_param = param[:-1] if param.endswith("s") else param
        values: list[Any] = []
        for _ in range(count * 4):
            if len(values) >= count:
                break
            value = self.value(item_param, items, window)
            if value not in values:
                values.append(value)
        return values

    def _string(self, param: str, schema: Mapping[str, Any], window: tuple[str, str]) -> str:
        meaning = semantic(param, schema)
        candidates: list[str]
        if meaning == "email":
            candidates = [self.person().email]
        elif meaning in ("start", "time"):
            candidates = [window[0]]
        elif meaning == "end":
            candidates = [window[1]]
        elif meaning == "date":
            candidates = [window[0][:10]]
        elif meaning == "title":
            candidates = [self.title()]
        elif meaning == "text":
            candidates = [self.text()]
        elif meaning == "place":
            candidates = [self.place()]
        elif meaning in ("first_name", "last_name", "person_name"):
            person = self.person()
            names = {"first_name": person.first_name, "last_name": person.last_name}
            candidates = [names.get(meaning, person.full_name)]
        elif meaning == "company":
            candidates = [self.entities.choice(COMPANIES)]
        elif meaning == "url":
            candidates = [f"https://intranet.example.com/{self.params.choice(TITLE_TOPICS).replace(' ', '-')}"]
        elif meaning == "path":
            candidates = [f"notes/{self.params.choice(TITLE_TOPICS).replace(' ', '-')}-{self.params.randint(1, 99)}.md"]
        else:
            candidates = [self.params.choice(TITLE_TOPICS)]
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            candidates += [self.params.choice(TITLE_TOPICS).replace(" ", "-"), "ABC-123", "item1", "a", "1"]
            candidates = [c for c in candidates if re.search(pattern, c)] or candidates[:1]
        text = candidates[0]
        min_len, max_len = int(schema.get("minLength", 0)), schema.get("maxLength")
        if len(text) < min_len:
            text = (text + " " + self.text())[: max(min_len, len(text))]
            text = text.ljust(min_len, "x")
        if isinstance(max_len, int) and len(text) > max_len:
            text = text[:max_len]
        return text

    def params_for(
        self,
        tool: ToolInfo,
        *,
        fixed: Mapping[str, Any] | None = None,
        optional_share: float = 0.6,
        skip: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        """Schema-valid parameters: `fixed` values as given, required ones generated, and a random share of
        the optional ones (never `id` parameters, which only the planner can resolve)."""
        fixed = dict(fixed or {})
        validator = Draft202012Validator(tool.schema)
        last_error = ""
        for _ in range(6):
            window = self.window()
            params: dict[str, Any] = {}
            for name, schema in tool.properties.items():
                if name in fixed:
                    params[name] = fixed[name]
                    continue
                if name in skip or semantic(name, schema) == "id":
                    continue
                wanted = name in tool.required or (
                    "default" not in schema and self.params.random() < optional_share and _is_content(name, schema)
                )
                if wanted:
                    params[name] = self.value(name, schema, window)
            errors = sorted(validator.iter_errors(params), key=lambda e: e.message)
            if not errors:
                return params
            last_error = errors[0].message
        raise UnplannableParameter(f"{tool.name}: no valid parameters could be generated ({last_error})")


def _is_content(name: str, schema: Mapping[str, Any]) -> bool:
    """Optional parameters worth setting: content the state keeps, not paging or filtering knobs."""
    lowered = name.lower()
    if lowered in ("limit", "offset", "start", "page", "page_size", "cursor", "kind") and _schema_type(schema) in (
        "integer",
        "number",
    ):
        return False
    return lowered not in ("limit", "offset", "page", "page_size", "cursor", "time_min", "time_max", "dry_run")
