"""A built-in records tool server in helpdesk style: tickets with status, priority, assignee, tags and comments.

Ids and timestamps come from the state (next number after the highest ticket id; one minute after the latest
recorded moment), never from the wall clock, so a replay on the same seed gives the same state and diffs.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from eval_pipelines.toolservers.base import BuiltinToolServer, SeedError, State, ToolError, seed_objects, tool
from eval_pipelines.toolservers.fields import (
    CLOCK_STEP,
    DEFAULT_ACCOUNT,
    EPOCH,
    account_of,
    format_timestamp,
    object_schema,
    parse_addresses,
    parse_timestamp,
    string_param,
)

STATUSES = ("open", "in_progress", "resolved", "closed")
PRIORITIES = ("low", "medium", "high", "urgent")
TICKET_ID_PREFIX = "TKT-"
#: new tickets continue after the highest existing number, starting at TKT-1001 in an empty workspace.
FIRST_TICKET_NUMBER = 1001
MAX_LIMIT = 200
DEFAULT_LIMIT = 20
MAX_TAGS = 20

_TICKET_ID_RE = re.compile(rf"^{TICKET_ID_PREFIX}(\d+)$")
_TAG_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")
_SEED_KEYS = {"account", "tickets"}
_SEED_TICKET_KEYS = {
    "id",
    "title",
    "description",
    "requester",
    "assignee",
    "status",
    "priority",
    "tags",
    "created_at",
    "updated_at",
    "comments",
}
_SEED_COMMENT_KEYS = {"author", "body", "created_at"}
_UPDATABLE_FIELDS = ("title", "description", "status", "priority", "assignee", "tags")
_PRIORITY_RANK = {name: rank for rank, name in enumerate(reversed(PRIORITIES))}


_TAGS = {
    "type": "array",
    "items": {"type": "string"},
    "maxItems": MAX_TAGS,
    "description": "Tags: lowercase words (letters, digits, '_', '.', '-').",
}
_LIMIT = {
    "type": "integer",
    "description": f"Maximum number of tickets (1-{MAX_LIMIT}).",
    "minimum": 1,
    "maximum": MAX_LIMIT,
    "default": DEFAULT_LIMIT,
}


def _one_address(value: str, parameter: str) -> str:
    addresses = parse_addresses(value, parameter)
    if len(addresses) != 1:
        raise ToolError(f"Parameter '{parameter}': expected exactly one email address, got {value!r}")
    return addresses[0]


def _tags(values: list[str], parameter: str = "tags") -> list[str]:
    tags: list[str] = []
    for raw in values:
        tag = raw.strip().lower()
        if not _TAG_RE.match(tag):
            raise ToolError(
                f"Parameter '{parameter}': invalid tag {raw!r} (1-40 lowercase letters, digits, '_', '.', '-')"
            )
        if tag not in tags:
            tags.append(tag)
    return tags


def _most_urgent_first(tickets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(tickets, key=lambda t: (_PRIORITY_RANK[t["priority"]], t["created_at"], t["id"]))


class RecordsServer(BuiltinToolServer):
    name: ClassVar[str] = "records"
    seeding_is_pure: ClassVar[bool] = True
    collection_nouns: ClassVar[dict[str, str]] = {"tickets": "ticket(s)", "settings": "setting(s)"}

    # -- state -----------------------------------------------------------------------------------------

    def new_state(self) -> State:
        return {"tickets": {}, "settings": {"account": {"email": DEFAULT_ACCOUNT}}}

    account = staticmethod(account_of)

    def seed(self, state: State, seed_files: list[Any]) -> None:
        for where, seed in seed_objects(seed_files, _SEED_KEYS, "'account' and/or 'tickets'"):
            if "account" in seed:
                account = seed["account"]
                try:
                    address = _one_address(account, "account") if isinstance(account, str) else None
                except ToolError:
                    address = None
                if address is None:
                    raise SeedError(f"{where}: account: {account!r} is not an email address")
                state["settings"]["account"] = {"email": address}
            tickets = seed.get("tickets", [])
            if not isinstance(tickets, list):
                raise SeedError(f"{where}: tickets: expected a list")
            for pos, ticket in enumerate(tickets):
                item = self._seed_ticket(f"{where}: tickets[{pos}]", ticket)
                if item["id"] in state["tickets"]:
                    raise SeedError(f"{where}: tickets[{pos}]: duplicate ticket id {item['id']!r}")
                state["tickets"][item["id"]] = item

    @staticmethod
    def _seed_ticket(where: str, ticket: Any) -> dict[str, Any]:
        if not isinstance(ticket, dict):
            raise SeedError(f"{where}: expected a ticket object")
        unknown = sorted(set(ticket) - _SEED_TICKET_KEYS)
        if unknown:
            raise SeedError(f"{where}: unknown field(s) {unknown}")
        for required in ("id", "title", "requester", "created_at"):
            if required not in ticket:
                raise SeedError(f"{where}: missing required field '{required}'")
        if not isinstance(ticket["id"], str) or not ticket["id"].strip():
            raise SeedError(f"{where}: id: expected a non-empty string")
        status = ticket.get("status", "open")
        if status not in STATUSES:
            raise SeedError(f"{where}: status: {status!r} is not one of {list(STATUSES)}")
        priority = ticket.get("priority", "medium")
        if priority not in PRIORITIES:
            raise SeedError(f"{where}: priority: {priority!r} is not one of {list(PRIORITIES)}")
        stamps: dict[str, str] = {}
        for name in ("created_at", "updated_at"):
            raw = ticket.get(name, ticket["created_at"])
            try:
                stamps[name] = format_timestamp(parse_timestamp(str(raw)))
            except ValueError as exc:
                raise SeedError(f"{where}: {name}: {raw!r} is not an ISO 8601 timestamp") from exc
        try:
            requester = _one_address(str(ticket["requester"]), "requester")
            assignee = _one_address(str(ticket["assignee"]), "assignee") if ticket.get("assignee") else None
            raw_tags = ticket.get("tags") or []
            if not isinstance(raw_tags, list) or not all(isinstance(t, str) for t in raw_tags):
                raise ToolError("tags: expected a list of strings")
            tags = _tags(raw_tags)
        except ToolError as exc:
            raise SeedError(f"{where}: {exc}") from exc
        raw_comments = ticket.get("comments") or []
        if not isinstance(raw_comments, list):
            raise SeedError(f"{where}: comments: expected a list")
        comments = [RecordsServer._seed_comment(f"{where}: comments[{i}]", c) for i, c in enumerate(raw_comments)]
        return {
            "id": ticket["id"].strip(),
            "title": str(ticket["title"]),
            "description": str(ticket.get("description") or ""),
            "requester": requester,
            "assignee": assignee,
            "status": status,
            "priority": priority,
            "tags": tags,
            "created_at": stamps["created_at"],
            "updated_at": stamps["updated_at"],
            "comments": comments,
        }

    @staticmethod
    def _seed_comment(where: str, comment: Any) -> dict[str, Any]:
        if not isinstance(comment, dict):
            raise SeedError(f"{where}: expected a comment object with 'author', 'body' and 'created_at'")
        unknown = sorted(set(comment) - _SEED_COMMENT_KEYS)
        if unknown:
            raise SeedError(f"{where}: unknown field(s) {unknown}")
        for required in ("author", "body", "created_at"):
            if required not in comment:
                raise SeedError(f"{where}: missing required field '{required}'")
        try:
            created = format_timestamp(parse_timestamp(str(comment["created_at"])))
        except ValueError as exc:
            raise SeedError(f"{where}: created_at: {comment['created_at']!r} is not an ISO 8601 timestamp") from exc
        return {"author": str(comment["author"]).strip().lower(), "body": str(comment["body"]), "created_at": created}

    # -- helpers ---------------------------------------------------------------------------------------

    @staticmethod
    def _ticket(state: State, ticket_id: str) -> dict[str, Any]:
        ticket = state["tickets"].get(ticket_id.strip()) or state["tickets"].get(ticket_id.strip().upper())
        if ticket is None:
            raise ToolError(f"Parameter 'ticket_id': ticket '{ticket_id}' not found")
        return ticket

    @staticmethod
    def _next_id(state: State) -> str:
        numbers = [int(m.group(1)) for key in state["tickets"] if (m := _TICKET_ID_RE.match(key))]
        return f"{TICKET_ID_PREFIX}{max(numbers, default=FIRST_TICKET_NUMBER - 1) + 1}"

    @staticmethod
    def _next_timestamp(state: State) -> str:
        # Stored timestamps are normalised UTC strings, so the string maximum is the latest moment.
        moments = [t["updated_at"] for t in state["tickets"].values()]
        moments += [c["created_at"] for t in state["tickets"].values() for c in t["comments"]]
        latest = max(moments, default=None)
        base = parse_timestamp(latest) if latest else EPOCH - CLOCK_STEP
        return format_timestamp(base + CLOCK_STEP)

    @staticmethod
    def _listing_line(ticket: dict[str, Any]) -> str:
        parts = [
            f"[{ticket['id']}] ({ticket['status']}, {ticket['priority']}) {ticket['title']}",
            f"requester: {ticket['requester']}",
            f"assignee: {ticket['assignee'] or 'unassigned'}",
        ]
        if ticket["tags"]:
            parts.append(f"tags: {', '.join(ticket['tags'])}")
        return " | ".join(parts)

    @staticmethod
    def _full_text(ticket: dict[str, Any]) -> str:
        lines = [
            f"ID: {ticket['id']}",
            f"Title: {ticket['title']}",
            f"Status: {ticket['status']}",
            f"Priority: {ticket['priority']}",
            f"Requester: {ticket['requester']}",
            f"Assignee: {ticket['assignee'] or 'unassigned'}",
            f"Tags: {', '.join(ticket['tags']) or '-'}",
            f"Created: {ticket['created_at']}",
            f"Updated: {ticket['updated_at']}",
            "",
            ticket["description"],
        ]
        if ticket["comments"]:
            lines += ["", f"Comments ({len(ticket['comments'])}):"]
            lines += [f"- {c['created_at']} {c['author']}: {c['body']}" for c in ticket["comments"]]
        return "\n".join(lines)

    # -- tools -----------------------------------------------------------------------------------------

    @tool(
        name="create_ticket",
        description="Open a new helpdesk ticket (status 'open'). The requester defaults to your own account.",
        parameters=object_schema(
            {
                "title": string_param("Short summary of the problem or request."),
                "description": string_param("Details."),
                "requester": string_param("Email address of the person who needs help."),
                "priority": string_param("Priority.", enum=list(PRIORITIES), default="medium"),
                "assignee": string_param("Email address of the person who should handle it (optional)."),
                "tags": _TAGS,
            },
            ["title", "description"],
        ),
        mutates_state=True,
    )
    def _tool_create_ticket(
        self,
        state: State,
        title: str,
        description: str,
        priority: str,
        requester: str | None = None,
        assignee: str | None = None,
        tags: list[str] | None = None,
    ) -> str:
        if not title.strip():
            raise ToolError("Parameter 'title': must not be empty")
        now = self._next_timestamp(state)
        ticket: dict[str, Any] = {
            "id": self._next_id(state),
            "title": title.strip(),
            "description": description,
            "requester": _one_address(requester, "requester") if requester else self.account(state),
            "assignee": _one_address(assignee, "assignee") if assignee and assignee.strip() else None,
            "status": "open",
            "priority": priority,
            "tags": _tags(tags or []),
            "created_at": now,
            "updated_at": now,
            "comments": [],
        }
        state["tickets"][ticket["id"]] = ticket
        return f"Ticket created: {self._listing_line(ticket)}"

    @tool(
        name="get_ticket",
        description="Read one ticket in full, with its comments.",
        parameters=object_schema({"ticket_id": string_param("Id of the ticket, e.g. TKT-1001.")}, ["ticket_id"]),
        mutates_state=False,
    )
    def _tool_get_ticket(self, state: State, ticket_id: str) -> str:
        return self._full_text(self._ticket(state, ticket_id))

    @tool(
        name="update_ticket",
        description=(
            "Change some fields of a ticket; fields you leave out keep their value. An empty assignee "
            "unassigns the ticket. Tags, when given, replace the whole list."
        ),
        parameters=object_schema(
            {
                "ticket_id": string_param("Id of the ticket."),
                "title": string_param("New title."),
                "description": string_param("New description."),
                "status": string_param("New status.", enum=list(STATUSES)),
                "priority": string_param("New priority.", enum=list(PRIORITIES)),
                "assignee": string_param("Email address of the new assignee, or '' to unassign."),
                "tags": _TAGS,
            },
            ["ticket_id"],
        ),
        mutates_state=True,
    )
    def _tool_update_ticket(self, state: State, ticket_id: str, **changes: Any) -> str:
        ticket = self._ticket(state, ticket_id)
        if not changes:
            fields = ", ".join(f"'{f}'" for f in _UPDATABLE_FIELDS)
            raise ToolError(f"update_ticket needs at least one field to change: {fields}")
        updated = dict(ticket)
        if "title" in changes:
            if not changes["title"].strip():
                raise ToolError("Parameter 'title': must not be empty")
            updated["title"] = changes["title"].strip()
        if "description" in changes:
            updated["description"] = changes["description"]
        for name in ("status", "priority"):
            if name in changes:
                updated[name] = changes[name]
        if "assignee" in changes:
            raw = changes["assignee"].strip()
            updated["assignee"] = _one_address(raw, "assignee") if raw else None
        if "tags" in changes:
            updated["tags"] = _tags(changes["tags"])
        changed = [f for f in _UPDATABLE_FIELDS if updated[f] != ticket[f]]
        if not changed:
            return f"Ticket '{ticket['id']}' already has those values; nothing changed."
        updated["updated_at"] = self._next_timestamp(state)
        state["tickets"][ticket["id"]] = updated
        return f"Ticket '{ticket['id']}' updated ({', '.join(changed)}): {self._listing_line(updated)}"

    @tool(
        name="list_tickets",
        description="List tickets, most urgent first, optionally only one status and/or one assignee.",
        parameters=object_schema(
            {
                "status": string_param("Only tickets with this status.", enum=list(STATUSES)),
                "assignee": string_param("Only tickets assigned to this email address ('' for unassigned tickets)."),
                "limit": _LIMIT,
            },
            [],
        ),
        mutates_state=False,
    )
    def _tool_list_tickets(
        self, state: State, limit: int, status: str | None = None, assignee: str | None = None
    ) -> str:
        wanted_assignee: str | None = None
        if assignee is not None and assignee.strip():
            wanted_assignee = _one_address(assignee, "assignee")
        tickets = [
            t
            for t in state["tickets"].values()
            if (status is None or t["status"] == status) and (assignee is None or t["assignee"] == wanted_assignee)
        ]
        filters = []
        if status is not None:
            filters.append(f"status={status}")
        if assignee is not None:
            filters.append(f"assignee={wanted_assignee or 'unassigned'}")
        where = f" ({', '.join(filters)})" if filters else ""
        if not tickets:
            return f"No tickets{where}."
        page = _most_urgent_first(tickets)[:limit]
        header = f"{len(tickets)} ticket(s){where}; showing {len(page)}, most urgent first:"
        return "\n".join([header, *(self._listing_line(t) for t in page)])

    @tool(
        name="search_tickets",
        description=(
            "Search every ticket, most urgent first. Every word of the query must appear (case-insensitively) "
            "in the id, title, description, requester, assignee, tags or comments."
        ),
        parameters=object_schema({"query": string_param("Words to look for."), "limit": _LIMIT}, ["query"]),
        mutates_state=False,
    )
    def _tool_search_tickets(self, state: State, query: str, limit: int) -> str:
        terms = query.lower().split()
        if not terms:
            raise ToolError("Parameter 'query': must contain at least one word")

        def matches(ticket: dict[str, Any]) -> bool:
            haystack = " ".join(
                [
                    ticket["id"],
                    ticket["title"],
                    ticket["description"],
                    ticket["requester"],
                    ticket["assignee"] or "",
                    *ticket["tags"],
                    *(c["body"] for c in ticket["comments"]),
                ]
            ).lower()
            return all(term in haystack for term in terms)

        found = _most_urgent_first([t for t in state["tickets"].values() if matches(t)])
        if not found:
            return f"No tickets match '{query}'."
        page = found[:limit]
        header = f"{len(found)} ticket(s) match '{query}'; showing {len(page)}, most urgent first:"
        return "\n".join([header, *(self._listing_line(t) for t in page)])

    @tool(
        name="add_comment",
        description="Add a comment to a ticket's conversation.",
        parameters=object_schema(
            {
                "ticket_id": string_param("Id of the ticket."),
                "author": string_param("Email address of the comment's author (usually your own account)."),
                "body": string_param("The comment text."),
            },
            ["ticket_id", "author", "body"],
        ),
        mutates_state=True,
    )
    def _tool_add_comment(self, state: State, ticket_id: str, author: str, body: str) -> str:
        ticket = self._ticket(state, ticket_id)
        if not body.strip():
            raise ToolError("Parameter 'body': the comment must not be empty")
        now = self._next_timestamp(state)
        comment = {"author": _one_address(author, "author"), "body": body, "created_at": now}
        state["tickets"][ticket["id"]] = {**ticket, "comments": [*ticket["comments"], comment], "updated_at": now}
        return f"Comment added to ticket '{ticket['id']}' ({len(ticket['comments']) + 1} comment(s) now)."

    # -- rendering -------------------------------------------------------------------------------------

    def render_text(self, state: State) -> str:
        lines = [f"Account: {self.account(state)}", ""]
        tickets = _most_urgent_first(list(state["tickets"].values()))
        lines.append(f"Tickets ({len(tickets)}):")
        for ticket in tickets:
            lines.append(f"  {self._listing_line(ticket)}")
            lines += [f"    - {c['created_at']} {c['author']}: {c['body']}" for c in ticket["comments"]]
        return "\n".join(lines)
