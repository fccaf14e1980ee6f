"""Built-in presets (ours, and the hosted product's names): each fills `agent`, `scenario` and `workflows`
(and suggests NPC roles and categories).

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
    # The hosted product's preset names (the SimLab CLI's `tasks-gen init --preset`); its configs also carry
    # the preset's content, which wins over these, field by field.
    "hr": Preset(
        name="hr",
        agent=AgentSpec(
            role="HR operations specialist",
            description="An HR operations specialist who answers staff, keeps employee records and schedules.",
        ),
        scenario=ScenarioSpec(
            name="HR operations",
            role_label="HR Specialist",
            conventions="Employees are identified by their work email address. Dates are ISO 8601.",
            policies=[
                "Personal data goes only to the employee it belongs to or to HR.",
                "Record every change to an employee's record; a change only promised in a reply does not count.",
                "Change only the records the request names.",
            ],
        ),
        workflows=[
            Workflow(name="answer a policy question", steps=["look up the policy", "send the answer to the employee"]),
            Workflow(name="update an employee record", steps=["find the employee", "update the record"]),
            Workflow(name="schedule a check-in", steps=["create the meeting with the employee"]),
        ],
        npcs=[
            NpcRole(role="Employee", typical_asks=["how many leave days do I have left", "update my address"]),
            NpcRole(role="People Manager", typical_asks=["set up a check-in with my report"]),
        ],
        categories=[
            Category(id="policy", label="Policy questions"),
            Category(id="records", label="Employee records"),
            Category(id="scheduling", label="Scheduling"),
        ],
    ),
    "recruiting": Preset(
        name="recruiting",
        agent=AgentSpec(
            role="recruiting coordinator",
            description="A recruiting coordinator who moves candidates through the pipeline and books interviews.",
        ),
        scenario=ScenarioSpec(
            name="Recruiting",
            role_label="Recruiting Coordinator",
            conventions="Candidates are addressed by email. Interview times are ISO 8601 in UTC.",
            policies=[
                "Never share one candidate's details with another candidate.",
                "Move a candidate to a new stage only when the request says so.",
                "Use exactly the times and interviewers the request gives.",
            ],
        ),
        workflows=[
            Workflow(name="book an interview", steps=["find the candidate", "create the interview with the panel"]),
            Workflow(name="advance a candidate", steps=["look up the candidate", "update their stage"]),
            Workflow(name="withdraw an application", steps=["find the application", "delete it"]),
        ],
        npcs=[
            NpcRole(role="Hiring Manager", typical_asks=["book the onsite for the backend candidate"]),
            NpcRole(role="Candidate", typical_asks=["can we move my interview to Thursday"]),
        ],
        categories=[
            Category(id="scheduling", label="Interview scheduling"),
            Category(id="pipeline", label="Pipeline updates"),
        ],
    ),
    "people_mgmt": Preset(
        name="people_mgmt",
        agent=AgentSpec(
            role="people manager's assistant",
            description="An assistant to a people manager: one-on-ones, team updates and follow-ups.",
        ),
        scenario=ScenarioSpec(
            name="People management",
            role_label="Manager's Assistant",
            conventions="Team members are addressed by their work email address. Times are ISO 8601 in UTC.",
            policies=[
                "Feedback about one person is shared only with that person and the manager.",
                "Do not cancel a meeting the request does not name.",
            ],
        ),
        workflows=[
            Workflow(name="set up a one-on-one", steps=["create the meeting with the team member"]),
            Workflow(name="move a one-on-one", steps=["find the meeting", "update its time"]),
            Workflow(name="send a team update", steps=["send the update to the team"]),
        ],
        npcs=[
            NpcRole(role="Team Member", typical_asks=["can we push our 1:1", "I need feedback on my project"]),
            NpcRole(role="Skip-level Manager", typical_asks=["send me the team's status"]),
        ],
        categories=[
            Category(id="meetings", label="One-on-ones and meetings"),
            Category(id="communication", label="Team communication"),
        ],
    ),
    "coding": Preset(
        name="coding",
        agent=AgentSpec(
            role="software engineer",
            description="A software engineer who fixes code and configuration in a repository and reports back.",
        ),
        scenario=ScenarioSpec(
            name="Coding",
            role_label="Software Engineer",
            conventions="Paths are relative to the repository root. Changes keep the existing style.",
            policies=[
                "Change only the files the task needs.",
                "Never delete a file the request does not name.",
            ],
        ),
        workflows=[
            Workflow(name="fix a configuration value", steps=["find the file", "update the value"]),
            Workflow(name="add a file", steps=["create the file with the requested content"]),
            Workflow(name="remove a stale file", steps=["look up the file", "delete it"]),
        ],
        npcs=[NpcRole(role="Tech Lead", typical_asks=["bump the timeout in the service config"])],
        categories=[
            Category(id="fixes", label="Fixes"),
            Category(id="changes", label="Changes"),
        ],
    ),
    "customer_support": Preset(
        name="customer_support",
        agent=AgentSpec(
            role="customer support agent",
            description="A customer support agent who answers customers and keeps their cases up to date.",
        ),
        scenario=ScenarioSpec(
            name="Customer support",
            role_label="Support Agent",
            conventions="Customers are identified by email. Every case has one status at a time.",
            policies=[
                "Record every change on the case; a change only described in a reply does not count.",
                "Do not close a case the customer did not ask to close.",
                "Never share one customer's details with another customer.",
            ],
        ),
        workflows=[
            Workflow(name="open a case", steps=["create the case for the customer"]),
            Workflow(name="update a case", steps=["find the case", "update its status"]),
            Workflow(name="answer a customer", steps=["look up the case", "send the answer to the customer"]),
        ],
        npcs=[
            NpcRole(role="Customer", typical_asks=["where is my order", "I was charged twice"]),
            NpcRole(role="Support Lead", typical_asks=["escalate the billing case"]),
        ],
        categories=[
            Category(id="intake", label="New cases"),
            Category(id="updates", label="Case updates"),
        ],
    ),
}


def preset_names() -> list[str]:
    return sorted(PRESETS)
