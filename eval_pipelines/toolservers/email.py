"""A built-in email tool server: one mailbox per workspace, deterministic ids and clock.

Determinism is the point: verifiers and diffs must come out identical when the same actions are replayed
on the same seed, so new ids and timestamps are derived from the state itself, never from the wall clock.
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
    integer_param,
    is_address,
    object_schema,
    parse_addresses,
    parse_timestamp,
    string_param,
)

FOLDERS = ("inbox", "sent", "trash")
#: the clock of a mailbox seeded without any email.
SENT_ID_PREFIX = "sent-"
MAX_LIMIT = 200

_SENT_ID_RE = re.compile(rf"^{SENT_ID_PREFIX}(\d+)$")
_SEED_KEYS = {"account", "contacts", "emails"}
_SEED_EMAIL_KEYS = {"id", "from", "to", "cc", "subject", "body", "folder", "timestamp", "read", "in_reply_to"}


def _with_prefix(prefix: str, subject: str, also: tuple[str, ...] = ()) -> str:
    lowered = subject.strip().lower()
    if any(lowered.startswith(p.lower()) for p in (prefix, *also)):
        return subject
    return f"{prefix} {subject}"


class EmailServer(BuiltinToolServer):
    name: ClassVar[str] = "email"
    seeding_is_pure: ClassVar[bool] = True
    collection_nouns: ClassVar[dict[str, str]] = {
        "emails": "email(s)",
        "contacts": "contact(s)",
        "settings": "setting(s)",
    }

    # -- state -----------------------------------------------------------------------------------------

    def new_state(self) -> State:
        # The account lives in the state (not on the server object) because one server instance serves
        # many workspaces, each seeded with its own account.
        return {"emails": {}, "contacts": {}, "settings": {"account": {"email": DEFAULT_ACCOUNT}}}

    def seed(self, state: State, seed_files: list[Any]) -> None:
        for where, seed in seed_objects(seed_files, _SEED_KEYS, "'account', 'contacts' and/or 'emails'"):
            if "account" in seed:
                account = seed["account"]
                if not isinstance(account, str) or not is_address(account.strip().lower()):
                    raise SeedError(f"{where}: account: {account!r} is not an email address")
                state["settings"]["account"] = {"email": account.strip().lower()}
            contacts = seed.get("contacts", [])
            if not isinstance(contacts, list):
                raise SeedError(f"{where}: contacts: expected a list")
            for pos, contact in enumerate(contacts):
                item = self._seed_contact(f"{where}: contacts[{pos}]", contact)
                state["contacts"][item["email"]] = item
            emails = seed.get("emails", [])
            if not isinstance(emails, list):
                raise SeedError(f"{where}: emails: expected a list")
            for pos, email in enumerate(emails):
                item = self._seed_email(f"{where}: emails[{pos}]", email, state)
                if item["id"] in state["emails"]:
                    raise SeedError(f"{where}: emails[{pos}]: duplicate email id {item['id']!r}")
                state["emails"][item["id"]] = item

    @staticmethod
    def _seed_contact(where: str, contact: Any) -> dict[str, Any]:
        if not isinstance(contact, dict):
            raise SeedError(f"{where}: expected an object with 'email', 'name' and 'title'")
        address = contact.get("email")
        if not isinstance(address, str) or not is_address(address.strip().lower()):
            raise SeedError(f"{where}: email: {address!r} is not an email address")
        return {
            "email": address.strip().lower(),
            "name": str(contact.get("name") or ""),
            "title": str(contact.get("title") or ""),
        }

    def _seed_email(self, where: str, email: Any, state: State) -> dict[str, Any]:
        if not isinstance(email, dict):
            raise SeedError(f"{where}: expected an email object")
        unknown = sorted(set(email) - _SEED_EMAIL_KEYS)
        if unknown:
            raise SeedError(f"{where}: unknown field(s) {unknown}")
        for required in ("id", "from", "to", "subject", "body", "timestamp"):
            if required not in email:
                raise SeedError(f"{where}: missing required field '{required}'")
        if not isinstance(email["id"], str) or not email["id"]:
            raise SeedError(f"{where}: id: expected a non-empty string")
        try:
            sender = parse_addresses(str(email["from"]), "from")
            to = self._seed_address_list(email["to"], "to")
            cc = self._seed_address_list(email.get("cc") or [], "cc")
        except ToolError as exc:
            raise SeedError(f"{where}: {exc}") from exc
        if len(sender) != 1:
            raise SeedError(f"{where}: from: expected exactly one address")
        try:
            timestamp = format_timestamp(parse_timestamp(str(email["timestamp"])))
        except ValueError as exc:
            raise SeedError(f"{where}: timestamp: {email['timestamp']!r} is not an ISO 8601 timestamp") from exc
        folder = email.get("folder") or ("sent" if sender[0] == self.account(state) else "inbox")
        if folder not in FOLDERS:
            raise SeedError(f"{where}: folder: {folder!r} is not one of {list(FOLDERS)}")
        in_reply_to = email.get("in_reply_to")
        if in_reply_to is not None and not isinstance(in_reply_to, str):
            raise SeedError(f"{where}: in_reply_to: expected a string or null")
        return {
            "id": email["id"],
            "from": sender[0],
            "to": to,
            "cc": cc,
            "subject": str(email["subject"]),
            "body": str(email["body"]),
            "folder": folder,
            "timestamp": timestamp,
            "read": bool(email.get("read", folder != "inbox")),
            "in_reply_to": in_reply_to,
        }

    @staticmethod
    def _seed_address_list(value: Any, field_name: str) -> list[str]:
        if isinstance(value, str):
            return parse_addresses(value, field_name)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return parse_addresses(",".join(value), field_name)
        raise ToolError(f"{field_name}: expected an address or a list of addresses")

    account = staticmethod(account_of)

    # -- helpers ---------------------------------------------------------------------------------------

    @staticmethod
    def _email(state: State, email_id: str) -> dict[str, Any]:
        email = state["emails"].get(email_id)
        if email is None:
            raise ToolError(f"Email '{email_id}' not found")
        return email

    @staticmethod
    def _newest_first(emails: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(emails, key=lambda e: (e["timestamp"], e["id"]), reverse=True)

    @staticmethod
    def _next_id(state: State) -> str:
        numbers = [int(m.group(1)) for key in state["emails"] if (m := _SENT_ID_RE.match(key))]
        return f"{SENT_ID_PREFIX}{max(numbers, default=0) + 1:04d}"

    @staticmethod
    def _next_timestamp(state: State) -> str:
        # Stored timestamps are normalised UTC strings, so the string maximum is the latest moment.
        latest = max((e["timestamp"] for e in state["emails"].values()), default=None)
        base = parse_timestamp(latest) if latest else EPOCH - CLOCK_STEP
        return format_timestamp(base + CLOCK_STEP)

    def _deliver(
        self,
        state: State,
        to: list[str],
        subject: str,
        body: str,
        cc: list[str] | None = None,
        in_reply_to: str | None = None,
    ) -> dict[str, Any]:
        email: dict[str, Any] = {
            "id": self._next_id(state),
            "from": self.account(state),
            "to": to,
            "cc": cc or [],
            "subject": subject,
            "body": body,
            "folder": "sent",
            "timestamp": self._next_timestamp(state),
            "read": True,
            "in_reply_to": in_reply_to,
        }
        state["emails"][email["id"]] = email
        return email

    @staticmethod
    def _listing_line(email: dict[str, Any]) -> str:
        to = ", ".join(email["to"])
        status = "" if email["read"] else ", unread"
        return (
            f"[{email['id']}] {email['timestamp']} | from: {email['from']} | to: {to} | "
            f"subject: {email['subject']} ({email['folder']}{status})"
        )

    @staticmethod
    def _full_text(email: dict[str, Any]) -> str:
        lines = [
            f"ID: {email['id']}",
            f"Folder: {email['folder']}",
            f"From: {email['from']}",
            f"To: {', '.join(email['to'])}",
        ]
        if email["cc"]:
            lines.append(f"Cc: {', '.join(email['cc'])}")
        lines += [f"Date: {email['timestamp']}", f"Subject: {email['subject']}"]
        if email["in_reply_to"]:
            lines.append(f"In-Reply-To: {email['in_reply_to']}")
        return "\n".join(lines) + "\n\n" + email["body"]

    # -- tools -----------------------------------------------------------------------------------------

    @tool(
        name="send_email",
        description="Send a new email from your account. Separate several recipients with commas.",
        parameters=object_schema(
            {
                "to": string_param("Recipient address, or several addresses separated by commas."),
                "subject": string_param("Subject line."),
                "body": string_param("Plain-text body."),
                "cc": string_param("Optional CC address(es), separated by commas."),
            },
            ["to", "subject", "body"],
        ),
        mutates_state=True,
    )
    def _tool_send_email(self, state: State, to: str, subject: str, body: str, cc: str = "") -> str:
        recipients = parse_addresses(to, "to")
        if not recipients:
            raise ToolError("send_email needs at least one recipient in 'to'")
        copies = parse_addresses(cc, "cc")
        email = self._deliver(state, recipients, subject, body, cc=copies)
        cc_text = f" (cc: {', '.join(copies)})" if copies else ""
        return f"Email sent to {', '.join(recipients)}{cc_text} with subject '{subject}'. Id: {email['id']}."

    @tool(
        name="reply_to_email",
        description="Reply to an email's sender. The subject becomes 'Re: <original subject>'.",
        parameters=object_schema(
            {
                "email_id": string_param("Id of the email to reply to."),
                "body": string_param("Plain-text body of the reply."),
            },
            ["email_id", "body"],
        ),
        mutates_state=True,
    )
    def _tool_reply_to_email(self, state: State, email_id: str, body: str) -> str:
        original = self._email(state, email_id)
        account = self.account(state)
        # Replying to a message we sent ourselves goes to its recipients, as in any mail client.
        to = list(original["to"]) if original["from"] == account else [original["from"]]
        subject = _with_prefix("Re:", original["subject"])
        email = self._deliver(state, to, subject, body, in_reply_to=original["id"])
        return f"Reply sent to {', '.join(to)} with subject '{subject}'. Id: {email['id']}."

    @tool(
        name="forward_email",
        description="Forward an email, with an optional note above the original message.",
        parameters=object_schema(
            {
                "email_id": string_param("Id of the email to forward."),
                "to": string_param("Recipient address, or several addresses separated by commas."),
                "note": string_param("Optional note placed above the forwarded message."),
            },
            ["email_id", "to"],
        ),
        mutates_state=True,
    )
    def _tool_forward_email(self, state: State, email_id: str, to: str, note: str = "") -> str:
        original = self._email(state, email_id)
        recipients = parse_addresses(to, "to")
        if not recipients:
            raise ToolError("forward_email needs at least one recipient in 'to'")
        subject = _with_prefix("Fwd:", original["subject"], also=("Fw:",))
        header = [
            "---------- Forwarded message ----------",
            f"From: {original['from']}",
            f"Date: {original['timestamp']}",
            f"Subject: {original['subject']}",
            f"To: {', '.join(original['to'])}",
        ]
        if original["cc"]:
            header.append(f"Cc: {', '.join(original['cc'])}")
        quoted = "\n".join(header) + "\n\n" + original["body"]
        body = f"{note.rstrip()}\n\n{quoted}" if note.strip() else quoted
        email = self._deliver(state, recipients, subject, body)
        names = ", ".join(recipients)
        return f"Email '{original['id']}' forwarded to {names} with subject '{subject}'. Id: {email['id']}."

    @tool(
        name="search_emails",
        description=(
            "Search all folders, newest first, case-insensitively. kind='from' matches the sender, kind='to' "
            "matches To/CC recipients, kind='containing' matches subject, body and addresses."
        ),
        parameters=object_schema(
            {
                "query": string_param("Text to look for."),
                "kind": string_param(
                    "What to match: 'to', 'from' or 'containing'.",
                    enum=["to", "from", "containing"],
                    default="containing",
                ),
                "start": integer_param("Index of the first result to return (for paging).", minimum=0, default=0),
                "limit": integer_param("Maximum number of results (1-200).", minimum=1, maximum=MAX_LIMIT, default=20),
            },
            ["query"],
        ),
        mutates_state=False,
    )
    def _tool_search_emails(self, state: State, query: str, kind: str, start: int, limit: int) -> str:
        needle = query.strip().lower()

        def matches(email: dict[str, Any]) -> bool:
            if kind == "from":
                return needle in email["from"]
            if kind == "to":
                return any(needle in address for address in email["to"] + email["cc"])
            haystack = " ".join([email["subject"], email["body"], email["from"], *email["to"], *email["cc"]])
            return needle in haystack.lower()

        found = self._newest_first([e for e in state["emails"].values() if matches(e)])
        if not found:
            return f"No emails match '{query}' (kind={kind})."
        page = found[start : start + limit]
        if not page:
            return f"{len(found)} email(s) match '{query}' (kind={kind}), none at start={start}."
        shown = f"{start + 1}-{start + len(page)}"
        header = f"{len(found)} email(s) match '{query}' (kind={kind}); showing {shown}, newest first:"
        return "\n".join([header, *(self._listing_line(e) for e in page)])

    @tool(
        name="get_email",
        description="Read one email in full, including its body.",
        parameters=object_schema({"email_id": string_param("Id of the email.")}, ["email_id"]),
        mutates_state=False,
    )
    def _tool_get_email(self, state: State, email_id: str) -> str:
        # Pure read on purpose: marking as read would make a read tool mutate state, and every
        # get_email would then need a snapshot and a diff.
        return self._full_text(self._email(state, email_id))

    @tool(
        name="list_emails",
        description="List the emails of one folder, newest first.",
        parameters=object_schema(
            {
                "folder": string_param("Folder: 'inbox', 'sent' or 'trash'.", enum=list(FOLDERS), default="inbox"),
                "limit": integer_param("Maximum number of emails (1-200).", minimum=1, maximum=MAX_LIMIT, default=20),
            },
            [],
        ),
        mutates_state=False,
    )
    def _tool_list_emails(self, state: State, folder: str, limit: int) -> str:
        emails = self._newest_first([e for e in state["emails"].values() if e["folder"] == folder])
        if not emails:
            return f"The {folder} folder is empty."
        page = emails[:limit]
        header = f"{folder}: {len(emails)} email(s); showing {len(page)}, newest first:"
        return "\n".join([header, *(self._listing_line(e) for e in page)])

    @tool(
        name="list_contacts",
        description="List your contacts (name, address, title).",
        parameters=object_schema({}, []),
        mutates_state=False,
    )
    def _tool_list_contacts(self, state: State) -> str:
        contacts = sorted(state["contacts"].values(), key=lambda c: (c["name"].lower(), c["email"]))
        if not contacts:
            return "You have no contacts."
        lines = [f"{len(contacts)} contact(s):"]
        for contact in contacts:
            title = f" - {contact['title']}" if contact["title"] else ""
            lines.append(f"{contact['name'] or contact['email']} <{contact['email']}>{title}")
        return "\n".join(lines)

    @tool(
        name="delete_email",
        description="Move one email to the trash.",
        parameters=object_schema({"email_id": string_param("Id of the email to delete.")}, ["email_id"]),
        mutates_state=True,
    )
    def _tool_delete_email(self, state: State, email_id: str) -> str:
        email = self._email(state, email_id)
        if email["folder"] == "trash":
            return f"Email '{email_id}' is already in the trash."
        state["emails"][email_id] = {**email, "folder": "trash"}
        return f"Email '{email_id}' moved to trash."

    @tool(
        name="delete_all_emails",
        description="Move every email in the inbox to the trash.",
        parameters=object_schema({}, []),
        mutates_state=True,
    )
    def _tool_delete_all_emails(self, state: State) -> str:
        moved = [key for key, email in state["emails"].items() if email["folder"] == "inbox"]
        for key in moved:
            state["emails"][key] = {**state["emails"][key], "folder": "trash"}
        return f"Moved {len(moved)} email(s) from the inbox to the trash."

    # -- rendering -------------------------------------------------------------------------------------

    def render_text(self, state: State) -> str:
        lines = [f"Account: {self.account(state)}", ""]
        contacts = sorted(state["contacts"].values(), key=lambda c: c["email"])
        lines.append(f"Contacts ({len(contacts)}):")
        lines += [f"  {c['name']} <{c['email']}> {c['title']}".rstrip() for c in contacts]
        for folder in FOLDERS:
            emails = self._newest_first([e for e in state["emails"].values() if e["folder"] == folder])
            lines += ["", f"{folder.capitalize()} ({len(emails)}):"]
            lines += [f"  {self._listing_line(e)}" for e in emails]
        return "\n".join(lines)
