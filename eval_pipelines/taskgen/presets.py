"""Built-in presets: each fills `agent`, `scenario` and `workflows` (and suggests NPC roles and categories).

Workflow steps are written with the verbs the schema-driven generator understands (find / look up, create /
schedule / send, update / change / move, delete / cancel / remove), so a preset fits any toolset: each step is
matched to a tool of that kind, and steps naming a tool outright (`search_events`) match that tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eval_pipelines.schemas.taskgen import AgentSpec, Category, NpcRole, ScenarioSpec, Workflow


@dataclass(frozen=True)
class Preset:
    name: str
    agent: AgentSpec
    scenario: ScenarioSpec
    workflows: list[Workflow]
    npcs: list[NpcRole] = field(default_factory=list)
    categories: list[Category] = field(default_factory=list)


PRESETS: dict[str, Preset] = {
    "office_assistant": Preset(
        name="office_assistant",
        agent=AgentSpec(
            role="office assistant",
            description="An executive office assistant who keeps calendars, mail and shared records in order.",
        ),
        scenario=ScenarioSpec(
            name="Office assistant",
            role_label="Office Assistant",
            conventions=(
                "Times are ISO 8601 in UTC. Titles are short and specific. People are addressed by their work "
                "email address."
            ),
            policies=[
                "Change only what the request asks for; leave every other item untouched.",
                "Never delete an item unless the request names it.",
                "Use exactly the values given in the request (titles, times, addresses).",
            ],
        ),
        workflows=[
            Workflow(name="schedule a meeting", steps=["create the meeting with its attendees"]),
            Workflow(name="reschedule a meeting", steps=["find the meeting", "update its time or place"]),
            Workflow(name="cancel a meeting", steps=["look up the meeting", "delete it"]),
            Workflow(
                name="replace a meeting",
                steps=["find the old meeting", "cancel it", "schedule the replacement"],
            ),
        ],
        npcs=[
            NpcRole(role="Head of Operations", typical_asks=["book a review with the team", "move my 1:1"]),
            NpcRole(role="Finance Manager", typical_asks=["set up the budget review", "cancel the vendor call"]),
        ],
        categories=[
            Category(id="scheduling", label="Scheduling"),
            Category(id="maintenance", label="Keeping records current"),
            Category(id="cleanup", label="Cancellations and clean-up"),
        ],
    ),
    "helpdesk_agent": Preset(
        name="helpdesk_agent",
        agent=AgentSpec(
            role="IT helpdesk agent",
            description="A first-line IT helpdesk agent who logs, updates and resolves requests from staff.",
        ),
        scenario=ScenarioSpec(
            name="IT helpdesk",
            role_label="Helpdesk Agent",
            conventions=(
                "Every request is recorded before it is worked on. Status changes state the new status exactly. "
                "Requesters are identified by their work email address."
            ),
            policies=[
                "Record every change in the system of record; a change only described in a reply does not count.",
                "Do not close or delete a request the requester did not ask to close.",
                "Keep the requester's wording for titles when the request gives one.",
            ],
        ),
        workflows=[
            Workflow(name="log a request", steps=["create the ticket for the requester"]),
            Workflow(name="triage a request", steps=["find the request", "update its priority or status"]),
            Workflow(
                name="escalate a request",
                steps=["look up the request", "update its assignee", "add a note for the requester"],
            ),
            Workflow(name="remove a duplicate", steps=["search for the duplicate", "delete it"]),
        ],
        npcs=[
            NpcRole(role="Sales Representative", typical_asks=["my laptop will not start", "reset my VPN token"]),
            NpcRole(role="Office Manager", typical_asks=["the printer on floor 3 is jammed"]),
        ],
        categories=[
            Category(id="intake", label="Logging new requests"),
            Category(id="triage", label="Triage and updates"),
            Category(id="cleanup", label="Clean-up"),
        ],
    ),
}


def preset_names() -> list[str]:
    return sorted(PRESETS)
