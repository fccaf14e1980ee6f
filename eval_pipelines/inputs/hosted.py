"""A local scenario as the hosted product lists it to its clients (the SimLab CLI).

Seed data in the hosted task fields (`seed_emails`, `seed_calendar_events`), which the SimLab CLI's `tasks seed`
sends into its own mail and calendar servers before a run: the built-in servers' seed files hold whole mailboxes
and calendars (`{"account", "emails": [...]}`, `{"account", "calendars": [...], "events": [...]}`); each message
and event becomes one entry. Seed files of other shapes have no hosted counterpart and are left to `seed_data`.

Server names: a scenario imported from a SimLab bundle is listed under the bundle's own server names
(`email-env`, `coding-env`, a name the user gave an HTTP server), which SimLab's `env init` picks its toolsets by
and its `tasks` commands match endpoints by; the catalog itself keeps the built-in names.

Guidance and visibility: a template's `scenario_guidance_md` (its own, else the folder's `guidance.md`), which
SimLab's `env init` copies into env.yaml and its `tasks run` appends to every instruction; hidden templates and
tasks, and test tasks, are listed only to a caller who asks for them (`include_hidden`, `include_test`).

NPCs: a task's `npc_profiles` carry what SimLab reads of them (profile id, names, email, and the chat handle as
`rocketchat_username`), and the chat server that plays the NPCs of an imported task is listed as `npc-chat`.
An NPC's secret is never served, nor its chat personality: SimLab builds a listed task's `npcs` from the profile
ids alone (`_api_task_to_local`), so it reads neither, and the listing may be read by the agent under test.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from eval_pipelines.lib.redact import redact_url
from eval_pipelines.schemas.hosted import SeedCalendarEvent, SeedEmail
from eval_pipelines.schemas.scenarios import (
    HIDDEN_VISIBILITY,
    MAX_SCENARIO_GUIDANCE_CHARS,
    SCENARIO_GUIDANCE_FILE,
    Task,
    TaskToolServer,
    Template,
    TemplateToolServer,
    is_test_category,
)
from eval_pipelines.schemas.service_wire import PublicTask

logger = logging.getLogger(__name__)


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


def served_names(task: Task) -> dict[str, str]:
    """Each of the task's tool servers -> the name it is listed under: the one its SimLab bundle gave it
    (`Task.simlab_servers`: `email` -> `email-env`), else its own."""
    names = {server.name: server.name for server in task.tool_servers}
    names.update({server: name for server, name in task.simlab_servers.items() if server in names and name})
    return names


def builtin_server(task: Task, listed_name: str) -> str | None:
    """The task's tool server listed as `listed_name` (see `served_names`), or None."""
    return next((server for server, name in served_names(task).items() if name == listed_name), None)


def served_task(public: PublicTask, task: Task, workspace_url: Callable[[str, str], str | None]) -> PublicTask:
    """`public` (the listing's view of `task`) under the names the task is served by: each tool server as
    `served_names` lists it, at `workspace_url(server, listed name)` (None: the URL it has), then the HTTP servers
    the task uses as they are, without credentials in their URLs; `seed_data` keyed by the same names."""
    names = served_names(task)
    servers = [
        TaskToolServer(
            name=names.get(server.name, server.name),
            tool_server_url=workspace_url(server.name, names.get(server.name, server.name)) or server.tool_server_url,
        )
        for server in public.tool_servers
    ]
    listed = {server.name for server in servers}
    servers += [
        TaskToolServer(name=name, tool_server_url=redact_url(url))
        for name, url in task.http_servers.items()
        if name not in listed
    ]
    seed_data = {names.get(server, server): files for server, files in public.seed_data.items()}
    return public.model_copy(update={"tool_servers": servers, "seed_data": seed_data})


def served_template(template: Template, tasks: Iterable[Task]) -> Template:
    """The template as the listing shows it: each tool server under the names its tasks are served by (an
    imported bundle's `email-env`, `coding-env`), then the HTTP servers its tasks use. SimLab's `env init` picks
    the toolsets of a new environment by these names."""
    listed: dict[str, list[str]] = {}
    http_names: list[str] = []
    for task in tasks:
        for server, name in served_names(task).items():
            if name not in listed.setdefault(server, []):
                listed[server].append(name)
        http_names += [name for name in task.http_servers if name not in http_names]
    servers = [
        server.model_copy(update={"name": name})
        for server in template.tool_servers
        for name in listed.get(server.name) or [server.name]
    ]
    names = {server.name for server in servers}
    servers += [TemplateToolServer(name=name) for name in http_names if name not in names]
    return template.model_copy(update={"tool_servers": servers})


def scenario_guidance(root: Path, template: Template) -> str | None:
    """The scenario's guidance markdown: the template's own, else its folder's `guidance.md` (a link out of the
    folder, a file that is not UTF-8 or one over the limit is left out with a log line: the listing still
    serves the scenario)."""
    if template.scenario_guidance_md:
        return template.scenario_guidance_md
    path = root / SCENARIO_GUIDANCE_FILE
    if not path.is_file():
        return None
    try:
        if not path.resolve().is_relative_to(root.resolve()):
            raise ValueError("it is a link out of the scenario folder")
        if path.stat().st_size > 4 * MAX_SCENARIO_GUIDANCE_CHARS:  # UTF-8 takes at most 4 bytes a character
            raise ValueError(f"it is over {MAX_SCENARIO_GUIDANCE_CHARS} characters")
        text = path.read_text(encoding="utf-8").strip()
        if len(text) > MAX_SCENARIO_GUIDANCE_CHARS:
            raise ValueError(f"it is over {MAX_SCENARIO_GUIDANCE_CHARS} characters")
    except (OSError, ValueError) as exc:  # UnicodeDecodeError included
        logger.error("%s is not served as the scenario's guidance: %s", path, exc)
        return None
    return text or None


#: How SimLab's `tasks run` heads the scenario guidance it appends to an instruction (`_build_skills_guidance_section`)
SCENARIO_GUIDANCE_HEADING = "Scenario guidance:"


def simlab_instruction(task: Task, guidance: str | None) -> str:
    """The instruction an agent is given for `task`: for a task imported from a SimLab bundle, what SimLab's
    `tasks run` gives it, the task text then a blank line and the scenario guidance under its heading (SimLab
    0.2.0's skills section is that guidance; its services section lists the websites of its own containers,
    MailHog, Rocket.Chat, Baikal, Frappe, none of which exist here, so it has no counterpart). Every other task's
    instruction is its description as it is."""
    if not task.simlab_origin or not guidance or not guidance.strip():
        return task.description
    return f"{task.description}\n\n{SCENARIO_GUIDANCE_HEADING}\n{guidance.strip()}"


def is_listed(visibility: str, *, include_hidden: bool) -> bool:
    return include_hidden or visibility.strip().lower() != HIDDEN_VISIBILITY


def task_is_listed(task: Task, *, include_hidden: bool, include_test: bool) -> bool:
    """Whether a task listing shows `task`: hidden tasks only with `include_hidden`, test-category ones only
    with `include_test` (the category compared as SimLab compares it)."""
    return is_listed(task.visibility, include_hidden=include_hidden) and (
        include_test or not is_test_category(task.category)
    )
