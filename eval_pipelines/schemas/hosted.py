"""The hosted product's shapes where its clients read more than the spec text names (the SimLab CLI).

One home for those names: the verifier package path SimLab imports (`collinear.scenarios.<family>.verifiers`),
the verifier entries of its task files (`{"func": "python_module", "module": ...}`), the keys its task loader
reads (`meta.task_id`, `task`, `apps`, `npcs`) and the seed lists of its task listing (`seed_emails`,
`seed_calendar_events`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from eval_pipelines.schemas._base import WireModel

#: Top-level package of a verifier bundle: SimLab imports `collinear.scenarios.<family>.verifiers.<module>`.
VERIFIER_PACKAGE_ROOT = "collinear"
VERIFIER_ENTRY_FUNC = "python_module"
_IDENTIFIER_UNSAFE = re.compile(r"\W")
#: SimLab tool-server and app names -> the built-in server that plays the same part.
SIMLAB_SERVER_NAMES: dict[str, str] = {
    "email": "email",
    "email-env": "email",
    "calendar": "calendar",
    "calendar-env": "calendar",
    "chronos-server": "calendar",
    "rocketchat": "chat",
    "rocketchat-env": "chat",
    "chat": "chat",
    "coding": "files",
    "coding-env": "files",
    "files": "files",
    "records": "records",
}
#: The path under a workspace URL that answers `/step` in the hosted product's observation shape.
HOSTED_STEP_PREFIX = "hosted"
_HOSTED_MODULE = re.compile(r"^[A-Za-z_]\w*\.scenarios\.(?P<package>\w+)\.verifiers\.(?P<module>\w+)$")


def family_id(scenario_id: str) -> str:
    """`email_ops:1.0.0` -> `email_ops`: the id the hosted product names a scenario's newest version by."""
    return scenario_id.strip().partition(":")[0]


def scenario_package(scenario_id: str) -> str:
    """The `<family>` folder of a verifier bundle: the family id as a Python identifier (`9lives` -> `_9lives`).

    SimLab derives the scenario to fetch from this folder, so it is the family id whenever that is an identifier.
    """
    name = _IDENTIFIER_UNSAFE.sub("_", family_id(scenario_id))
    if not name:
        raise ValueError("scenario_id must not be empty")
    return f"_{name}" if name[0].isdigit() else name


def verifier_module_path(scenario_id: str, module: str) -> str:
    """The dotted path SimLab imports a verifier module by."""
    return f"{VERIFIER_PACKAGE_ROOT}.scenarios.{scenario_package(scenario_id)}.verifiers.{module}"


def verifier_entry(scenario_id: str, module: str) -> dict[str, str]:
    """A verifier as a SimLab task file lists it."""
    return {"func": VERIFIER_ENTRY_FUNC, "module": verifier_module_path(scenario_id, module)}


def verifier_module_name(entry: Any) -> Any:
    """The module name inside a scenario's `verifiers/` of a task's verifier entry: a bare name, a SimLab entry
    (`{"func": "python_module", "module": "collinear.scenarios.x.verifiers.name"}`) or a dotted path. Anything
    else is returned as it is, for the caller's validation to name."""
    if isinstance(entry, dict) and entry.get("func", VERIFIER_ENTRY_FUNC) == VERIFIER_ENTRY_FUNC:
        entry = entry.get("module")
    if isinstance(entry, str):
        match = _HOSTED_MODULE.match(entry.strip())
        return match.group("module") if match else entry
    return entry


class TaskMeta(WireModel):
    """`meta` of a SimLab task file: its loader finds a task by `meta.task_id`."""

    task_id: str
    display_name: str
    difficulty: str
    category: str


class SeedEmail(WireModel):
    """An email SimLab's `tasks seed` sends into the mailbox before a run."""

    from_profile_id: str
    to_addr: str
    subject: str
    body_text: str = ""


class SeedCalendarEvent(WireModel):
    """A calendar event SimLab's `tasks seed` creates before a run."""

    account: str
    calendar_id: str = "default"
    summary: str
    description: str = ""
    start: str
    end: str
    attendees: list[str] = Field(default_factory=list)
