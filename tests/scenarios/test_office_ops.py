"""The office_ops scenario: catalog shape, and every verifier against real replays on the four tool servers
(email, calendar, records, files) mounted in one app, as the built-in host serves them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.toolservers import BuiltinToolServer, EmailServer, build_host_app
from eval_pipelines.toolservers.calendar import CalendarServer
from eval_pipelines.toolservers.files import FilesServer
from eval_pipelines.toolservers.records import RecordsServer
from tests.scenarios.replay import (
    Action,
    Verifiers,
    assert_second_round_fails,
    assert_verdicts,
    assert_verifiers_import_without_eval_pipelines,
    reference_actions,
    replay,
    run_verifiers,
    second_round,
    standalone_verifiers,
)

SCENARIOS_ROOT = builtin_scenarios_dir()
SCENARIO_ID = "office_ops:1.0.0"
SERVER_ORDER = ["email", "calendar", "records", "files"]


_FIXED_CONFIG = "[app]\nname = office-portal\ntimezone = Europe/Berlin\nlocale = en_GB\nmax_upload_mb = 25\n"

#: one plausible mistake per task; each must be caught by the task's verifiers.
WRONG_VARIANTS: dict[str, list[Action]] = {
    "office_ops_001": [
        (
            "records",
            "update_ticket",
            {"ticket_id": "TKT-2002", "assignee": "omar.haddad@example.com", "status": "resolved"},
        )
    ],
    "office_ops_002": [
        (
            "calendar",
            "create_event",
            {
                "calendar_uid": "work",
                "title": "Q2 planning review",
                "start": "2025-03-18T15:00:00Z",
                "end": "2025-03-18T16:00:00Z",
                "location": "Room 2B",
                "attendees": ["nina.patel@example.com", "grace.liu@example.com"],
            },
        )
    ],
    "office_ops_003": [
        (
            "files",
            "write_file",
            {
                "path": "reports/licence_summary.txt",
                "content": "DeskBooker: 240\nFigma: 540\nSlack: 680\nZoom: 450\nTOTAL: 1910\n",
            },
        )
    ],
    "office_ops_004": [
        ("calendar", "update_event", {"event_id": "evt-0104", "location": "Room 2B"}),
        ("calendar", "update_event", {"event_id": "evt-0105", "location": "Room 2B"}),
        ("calendar", "update_event", {"event_id": "evt-0107", "location": "Room 2B"}),  # a different day
    ],
    "office_ops_005": [
        (
            "records",
            "create_ticket",
            {
                "title": "Wi-Fi outage in the east wing",
                "description": "The east wing Wi-Fi drops every few minutes.",
                "requester": "sofia.rossi@example.com",
                "priority": "high",
                "assignee": "omar.haddad@example.com",
                "tags": ["network"],
            },
        )
    ],
    "office_ops_006": [
        (
            "email",
            "send_email",
            {
                "to": "grace.liu@example.com, ben.clarke@example.com",
                "subject": "Vendor demo: DeskBooker moved",
                "body": "It clashes with the all-hands, so I moved it to Thursday 20 March at 11:00.",
            },
        ),
        (
            "calendar",
            "update_event",
            {"event_id": "evt-0102", "start": "2025-03-20T11:00:00Z", "end": "2025-03-20T12:00:00Z"},
        ),
    ],
    "office_ops_007": [
        (
            "calendar",
            "create_event",
            {
                "calendar_uid": "work",
                "title": "Laptop setup",
                "start": "2025-03-19T15:00:00Z",
                "end": "2025-03-19T15:30:00Z",
                "attendees": ["leo.martin@example.com", "omar.haddad@example.com"],
            },
        ),
        ("records", "add_comment", {"ticket_id": "TKT-2004", "author": "agent@example.com", "body": "Booked 15:00."}),
        ("records", "update_ticket", {"ticket_id": "TKT-2004", "status": "in_progress"}),
    ],
    "office_ops_008": [
        (
            "files",
            "write_file",
            {
                "path": "reports/urgent_open.md",
                "content": "- TKT-2001\n- TKT-2003\n- TKT-2004\n- TKT-2005\n- TKT-2009\n",  # TKT-2003 is resolved
            },
        )
    ],
    "office_ops_009": [
        ("records", "update_ticket", {"ticket_id": "TKT-2006", "status": "resolved"}),
        ("records", "add_comment", {"ticket_id": "TKT-2006", "author": "agent@example.com", "body": "Grace told."}),
        (
            "email",
            "send_email",
            {
                "to": "grace.liu@example.com",
                "cc": "omar.haddad@example.com",
                "subject": "TKT-2006",
                "body": "You can log in now (TKT-2006).",
            },
        ),
    ],
    "office_ops_010": [
        (
            "files",
            "write_file",
            {"path": "config/app.ini", "content": _FIXED_CONFIG.replace("max_upload_mb = 25\n", "")},
        )
    ],
}


@pytest.fixture(scope="module")
def scenario() -> ScenarioFiles:
    return ScenarioCatalog(SCENARIOS_ROOT).get(SCENARIO_ID)


@pytest.fixture(scope="module")
def servers() -> dict[str, BuiltinToolServer]:
    return {"email": EmailServer(), "calendar": CalendarServer(), "records": RecordsServer(), "files": FilesServer()}


@pytest.fixture(scope="module")
def host_url(servers: dict[str, BuiltinToolServer]) -> Iterator[str]:
    with BackgroundServer(build_host_app(servers)) as server:
        yield server.url


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def verifiers(scenario: ScenarioFiles) -> Iterator[Verifiers]:
    yield from standalone_verifiers(scenario)


def _replay(
    http: httpx.Client, host_url: str, scenario: ScenarioFiles, task: Task, actions: list[Action]
) -> RunArtifacts:
    """Provision one workspace per task server, run `actions`, and record states and diffs like the engine."""
    seeds = {ref.name: scenario.seed_payload(task, ref.name) for ref in task.tool_servers}
    return replay(http, {name: f"{host_url}/{name}" for name in seeds}, task, seeds, actions)


def test_scenario_shape(scenario: ScenarioFiles, servers: dict[str, BuiltinToolServer]) -> None:
    tasks = scenario.tasks()
    assert len(tasks) >= 8
    difficulties = Counter(t.difficulty for t in tasks.values())
    assert difficulties["easy"] >= 2 and difficulties["medium"] >= 3 and difficulties["hard"] >= 2
    assert [s.name for s in scenario.template.tool_servers] == SERVER_ORDER
    assert len(scenario.npcs) >= 4 and all(n.email.endswith("@example.com") for n in scenario.npcs)
    multi_server = [t for t in tasks.values() if len({a.tool_server for a in t.reference_actions}) >= 2]
    assert len(multi_server) >= 3
    covered: set[str] = set()
    for task in tasks.values():
        assert task.rubric is not None and task.rubric.task_id == task.task_id
        assert task.rubric.success_criteria and task.rubric.scoring
        assert task.verifiers and task.reference_answer and task.reference_actions
        task_servers = [s.name for s in task.tool_servers]
        assert {a.tool_server for a in task.reference_actions} == set(task_servers)
        for server in task_servers:
            assert task.seed_data.get(server), f"{task.task_id}: no seed for {server}"
        for action in task.reference_actions:
            assert action.tool_name in servers[action.tool_server].tool_map, action
        covered |= {f"{a.tool_server}.{a.tool_name}" for a in task.reference_actions}
    # The scenario exercises the new servers' main tools, including run_command.
    assert {
        "calendar.create_event",
        "calendar.update_event",
        "calendar.list_events",
        "records.create_ticket",
        "records.update_ticket",
        "records.add_comment",
        "files.write_file",
        "files.read_file",
        "files.run_command",
    } <= covered


#: the right keywords, people and tools with the wrong substance; each must fail too.
ADVERSARIAL_VARIANTS: dict[str, list[Action]] = {
    # the right person and status, and a priority nobody asked to change
    "office_ops_001": [
        (
            "records",
            "update_ticket",
            {
                "ticket_id": "TKT-2002",
                "assignee": "omar.haddad@example.com",
                "status": "in_progress",
                "priority": "low",
            },
        )
    ],
    # the right title, day, room and people, one hour off
    "office_ops_002": [
        (
            "calendar",
            "create_event",
            {
                "calendar_uid": "work",
                "title": "Q2 planning review",
                "start": "2025-03-18T13:00:00Z",
                "end": "2025-03-18T14:00:00Z",
                "location": "Room 2B",
                "attendees": ["nina.patel@example.com", "grace.liu@example.com"],
            },
        )
    ],
    # every vendor and a TOTAL line, with per-seat costs instead of monthly totals
    "office_ops_003": [
        (
            "files",
            "write_file",
            {
                "path": "reports/licence_summary.txt",
                "content": "DeskBooker: 8\nFigma: 15\nSlack: 8\nZoom: 15\n1Password: 4\nTOTAL: 50\n",
            },
        )
    ],
    # both events moved to Room 2B, one of them to another time
    "office_ops_004": [
        ("calendar", "update_event", {"event_id": "evt-0104", "location": "Room 2B"}),
        (
            "calendar",
            "update_event",
            {
                "event_id": "evt-0105",
                "location": "Room 2B",
                "start": "2025-03-20T16:00:00Z",
                "end": "2025-03-20T17:00:00Z",
            },
        ),
    ],
    # Wi-Fi in the title, an area in the description: the wrong area
    "office_ops_005": [
        (
            "records",
            "create_ticket",
            {
                "title": "Wi-Fi drops every few minutes",
                "description": "The Wi-Fi in the west wing keeps dropping.",
                "requester": "sofia.rossi@example.com",
                "priority": "urgent",
                "assignee": "omar.haddad@example.com",
                "tags": ["network"],
            },
        )
    ],
    # the right people and subject, proposing the wrong time
    "office_ops_006": [
        (
            "email",
            "send_email",
            {
                "to": "grace.liu@example.com, ben.clarke@example.com",
                "subject": "Vendor demo: DeskBooker clashes with the all-hands",
                "body": "The DeskBooker demo clashes with the all-hands. Could we move it to Thursday 20 March, 14:00?",
            },
        )
    ],
    # a 'Laptop setup' session with the right people in a slot the assignee is busy
    "office_ops_007": [
        ("records", "get_ticket", {"ticket_id": "TKT-2004"}),
        (
            "calendar",
            "create_event",
            {
                "calendar_uid": "work",
                "title": "Laptop setup: Leo Martin (TKT-2004)",
                "start": "2025-03-19T13:00:00Z",
                "end": "2025-03-19T13:30:00Z",
                "location": "Room 1A",
                "attendees": ["leo.martin@example.com", "omar.haddad@example.com"],
            },
        ),
        ("records", "add_comment", {"ticket_id": "TKT-2004", "author": "agent@example.com", "body": "Booked 13:00."}),
        ("records", "update_ticket", {"ticket_id": "TKT-2004", "status": "in_progress"}),
    ],
    # the right format, the open tickets of every priority
    "office_ops_008": [
        (
            "files",
            "write_file",
            {
                "path": "reports/urgent_open.md",
                "content": "- TKT-2005: Shared drive almost full\n"
                "- TKT-2001: Badge reader at the main entrance rejects cards\n"
                "- TKT-2004: Laptop setup for new starter Leo Martin\n"
                "- TKT-2009: Phishing email reported by finance\n"
                "- TKT-2002: Projector in Room 2B flickers\n",
            },
        )
    ],
    # resolved and commented, but Grace is told she still cannot log in
    "office_ops_009": [
        ("records", "update_ticket", {"ticket_id": "TKT-2006", "status": "resolved"}),
        ("records", "add_comment", {"ticket_id": "TKT-2006", "author": "agent@example.com", "body": "Grace informed."}),
        (
            "email",
            "reply_to_email",
            {"email_id": "m-002", "body": "Hi Grace, TKT-2006 is not fixed yet: you cannot log in now."},
        ),
    ],
    # the check passes, because the check's own script was edited
    "office_ops_010": [
        ("files", "run_command", {"command": "sh scripts/check_config.sh"}),
        ("files", "write_file", {"path": "scripts/check_config.sh", "content": "echo OK\n"}),
        ("files", "run_command", {"command": "sh scripts/check_config.sh"}),
    ],
}


#: the tools whose reference calls are repeated for each task's duplicate-sends variant (the right email,
#: event, ticket or comment, made twice); tasks whose reference only updates or writes in place are absent.
DUPLICATE_SENDS: dict[str, tuple[str, ...]] = {
    "office_ops_002": ("create_event",),
    "office_ops_005": ("create_ticket",),
    "office_ops_006": ("send_email",),
    "office_ops_007": ("add_comment",),
    "office_ops_009": ("reply_to_email", "add_comment"),
}

_LICENCES = "DeskBooker: 240\nFigma: 540\nSlack: 680\nZoom: 450\n1Password: 340\nTOTAL: 2250\n"
_URGENT_OPEN = (
    "- TKT-2005: Shared drive almost full\n"
    "- TKT-2001: Badge reader at the main entrance rejects cards\n"
    "- TKT-2004: Laptop setup for new starter Leo Martin\n"
    "- TKT-2009: Phishing email reported by finance\n"
)
_DEMO_ATTENDEES = "grace.liu@example.com, ben.clarke@example.com"
_DEMO_SUBJECT = "Vendor demo: DeskBooker clashes with the all-hands"

#: the second round, beside the duplicate sends: the kinds that apply to each task (replay.SECOND_ROUND_KINDS).
SECOND_ROUND_VARIANTS: dict[str, dict[str, list[Action]]] = {
    # Omar named in a comment, the assignee field left empty
    "office_ops_001": {
        "recipients in the wrong fields": [
            (
                "records",
                "add_comment",
                {
                    "ticket_id": "TKT-2002",
                    "author": "agent@example.com",
                    "body": "Assigned to omar.haddad@example.com.",
                },
            ),
            ("records", "update_ticket", {"ticket_id": "TKT-2002", "status": "in_progress"}),
        ],
    },
    # the invitees named in the location, nobody invited
    "office_ops_002": {
        "recipients in the wrong fields": [
            (
                "calendar",
                "create_event",
                {
                    "calendar_uid": "work",
                    "title": "Q2 planning review",
                    "start": "2025-03-18T14:00:00Z",
                    "end": "2025-03-18T15:00:00Z",
                    "location": "Room 2B (nina.patel@example.com, grace.liu@example.com)",
                    "attendees": [],
                },
            )
        ],
    },
    "office_ops_003": {
        "duplicate sends": [("files", "write_file", {"path": "reports/licence_summary.txt", "content": _LICENCES * 2})],
        "keyword list": [
            (
                "files",
                "write_file",
                {
                    "path": "reports/licence_summary.txt",
                    "content": "DeskBooker, Figma, Slack, Zoom, 1Password\nTOTAL: 2250\n",
                },
            )
        ],
    },
    # both events in Room 2B, and copies of them created there too
    "office_ops_004": {
        "duplicate sends": [
            ("calendar", "update_event", {"event_id": "evt-0104", "location": "Room 2B"}),
            ("calendar", "update_event", {"event_id": "evt-0105", "location": "Room 2B"}),
            (
                "calendar",
                "create_event",
                {
                    "calendar_uid": "work",
                    "title": "Copy",
                    "start": "2025-03-20T09:00:00Z",
                    "end": "2025-03-20T10:00:00Z",
                    "location": "Room 2B",
                },
            ),
        ],
    },
    "office_ops_005": {
        "recipients in the wrong fields": [
            (
                "records",
                "create_ticket",
                {
                    "title": "Wi-Fi drops every few minutes in the east wing",
                    "description": "The Wi-Fi in the east wing drops every few minutes.",
                    "requester": "omar.haddad@example.com",
                    "priority": "urgent",
                    "assignee": "sofia.rossi@example.com",
                    "tags": ["network"],
                },
            )
        ],
    },
    "office_ops_006": {
        "statement with a sign-off": [
            (
                "email",
                "send_email",
                {
                    "to": _DEMO_ATTENDEES,
                    "subject": _DEMO_SUBJECT,
                    "body": "The DeskBooker demo clashes with the all-hands, so it moves to Thursday 20 March at "
                    "11:00. Let me know if you have any questions.",
                },
            )
        ],
        "keyword list": [
            (
                "email",
                "send_email",
                {"to": _DEMO_ATTENDEES, "subject": _DEMO_SUBJECT, "body": "all-hands, Thursday, 11:00"},
            )
        ],
    },
    "office_ops_008": {
        "duplicate sends": [
            ("files", "write_file", {"path": "reports/urgent_open.md", "content": _URGENT_OPEN + _URGENT_OPEN})
        ],
        "keyword list": [
            ("files", "write_file", {"path": "reports/urgent_open.md", "content": "TKT-2005, TKT-2001, TKT-2004"})
        ],
    },
    # resolved and commented; Grace told she can log in at some later point
    "office_ops_009": {
        "wrong answer without a negation word": [
            ("records", "update_ticket", {"ticket_id": "TKT-2006", "status": "resolved"}),
            ("records", "add_comment", {"ticket_id": "TKT-2006", "author": "agent@example.com", "body": "Informed."}),
            (
                "email",
                "reply_to_email",
                {"email_id": "m-002", "body": "Hi Grace, TKT-2006 is still with IT; once it is fixed you can log in."},
            ),
        ],
    },
    # the typo left in place, a second, correct timezone line added below it
    "office_ops_010": {
        "duplicate sends": [
            ("files", "run_command", {"command": "sh scripts/check_config.sh"}),
            (
                "files",
                "write_file",
                {
                    "path": "config/app.ini",
                    "content": "[app]\nname = office-portal\ntimezone = Europe/Berln\ntimezone = Europe/Berlin\n"
                    "locale = en_GB\nmax_upload_mb = 25\n",
                },
            ),
        ],
    },
}


@pytest.mark.parametrize("task_id", sorted(WRONG_VARIANTS))
def test_second_round_variants_fail(
    task_id: str, scenario: ScenarioFiles, verifiers: Verifiers, http: httpx.Client, host_url: str
) -> None:
    task = scenario.task(task_id)
    replays = {
        kind: _replay(http, host_url, scenario, task, actions)
        for kind, actions in second_round(task, SECOND_ROUND_VARIANTS, DUPLICATE_SENDS).items()
    }
    assert_second_round_fails(verifiers, task, replays)


def test_second_round_covers_every_task(scenario: ScenarioFiles) -> None:
    for task in scenario.tasks().values():
        assert second_round(task, SECOND_ROUND_VARIANTS, DUPLICATE_SENDS)


def test_every_task_has_an_adversarial_variant(scenario: ScenarioFiles) -> None:
    assert set(ADVERSARIAL_VARIANTS) == set(scenario.tasks())


def test_every_task_has_a_wrong_variant(scenario: ScenarioFiles) -> None:
    assert set(WRONG_VARIANTS) == set(scenario.tasks())


@pytest.mark.parametrize("task_id", sorted(WRONG_VARIANTS))
def test_reference_actions_pass_and_mistakes_fail(
    task_id: str,
    scenario: ScenarioFiles,
    verifiers: Verifiers,
    http: httpx.Client,
    host_url: str,
) -> None:
    task = scenario.task(task_id)
    assert_verdicts(
        verifiers,
        task,
        reference=_replay(http, host_url, scenario, task, reference_actions(task)),
        idle=_replay(http, host_url, scenario, task, []),
        wrong=[
            _replay(http, host_url, scenario, task, WRONG_VARIANTS[task_id]),
            _replay(http, host_url, scenario, task, ADVERSARIAL_VARIANTS[task_id]),
        ],
    )


def test_reference_run_of_the_config_task_passes_its_own_check(
    scenario: ScenarioFiles, http: httpx.Client, host_url: str
) -> None:
    """The script in the seed really reports the typo, and the reference fix really makes it pass."""
    task = scenario.task("office_ops_010")
    artifacts = _replay(http, host_url, scenario, task, reference_actions(task))
    first, last = artifacts.tool_results[0].observation, artifacts.tool_results[-1].observation
    assert "exit code: 1" in first and "found 'Europe/Berln'" in first
    assert "exit code: 0" in last and "OK: config/app.ini is valid" in last


def test_verifiers_reject_artifacts_without_state(scenario: ScenarioFiles, verifiers: Verifiers) -> None:
    for task in scenario.tasks().values():
        partial: dict[str, Any] = {s.name: {"initial": {}, "final": {}} for s in task.tool_servers[:-1]}
        empty: list[RunArtifacts | dict[str, Any]] = [
            RunArtifacts(task_id=task.task_id, task="t"),
            {"metadata": {"state": partial}},
            {"metadata": {"state": {s.name: {} for s in task.tool_servers}}},
            {},
        ]
        for artifacts in empty:
            for _, ok, message in run_verifiers(verifiers, task, artifacts):
                assert not ok and "state" in message


def test_verifier_package_imports_without_eval_pipelines(scenario: ScenarioFiles) -> None:
    assert_verifiers_import_without_eval_pipelines(scenario)
