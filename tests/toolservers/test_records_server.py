"""The helpdesk records tool server over real HTTP: tickets, enums, comments, seeding, snapshots and diffs."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.tools import StateDiff, ToolDefinition
from eval_pipelines.toolservers import create_app
from eval_pipelines.toolservers.records import RecordsServer

from ._helpers import new_workspace, state, step

EXPECTED_TOOLS = {
    "create_ticket": True,
    "get_ticket": False,
    "update_ticket": True,
    "list_tickets": False,
    "search_tickets": False,
    "add_comment": True,
}

RECORDS_SEED: dict[str, Any] = {
    "account": "desk@example.com",
    "tickets": [
        {
            "id": "TKT-1040",
            "title": "VPN drops every hour",
            "description": "The VPN client disconnects on the hour.",
            "requester": "Bob Stone <Bob@Example.com>",
            "assignee": "tom@example.com",
            "status": "in_progress",
            "priority": "high",
            "tags": ["Network", "vpn", "network"],
            "created_at": "2025-03-10T08:00:00Z",
            "updated_at": "2025-03-11T10:00:00+00:00",
            "comments": [
                {"author": "Tom@Example.com", "body": "Collecting client logs.", "created_at": "2025-03-11T10:00:00Z"}
            ],
        },
        {
            "id": "TKT-1002",
            "title": "Printer jam on floor 3",
            "requester": "carol@example.com",
            "priority": "low",
            "created_at": "2025-03-09T09:00:00",
        },
        {
            "id": "HR-7",
            "title": "Payroll access for new starter",
            "description": "Grant payroll read access",
            "requester": "carol@example.com",
            "priority": "urgent",
            "status": "open",
            "created_at": "2025-03-12T07:30:00Z",
        },
    ],
}


@pytest.fixture(scope="module")
def records_url() -> Iterator[str]:
    with BackgroundServer(create_app(RecordsServer())) as server:
        yield server.url


@pytest.fixture
def seeded(client: httpx.Client, records_url: str) -> str:
    return new_workspace(client, records_url, [copy.deepcopy(RECORDS_SEED)])


def test_tool_listing(client: httpx.Client, records_url: str, seeded: str) -> None:
    tools = client.get(f"{records_url}/tools").json()["tools"]
    assert client.get(f"{seeded}/tools").json()["tools"] == tools
    assert {t["name"]: t["mutates_state"] for t in tools} == EXPECTED_TOOLS
    for tool in tools:
        ToolDefinition.model_validate(tool)
        Draft202012Validator.check_schema(tool["parameters"])
        assert tool["description"] and set(tool["parameters"]["required"]) <= set(tool["parameters"]["properties"])
        assert all(p["type"] and p["description"] for p in tool["parameters"]["properties"].values())
    update = next(t for t in tools if t["name"] == "update_ticket")["parameters"]["properties"]
    assert update["status"]["enum"] == ["open", "in_progress", "resolved", "closed"]
    assert update["priority"]["enum"] == ["low", "medium", "high", "urgent"]


def test_seeding_normalises_and_snapshot_renders(client: httpx.Client, records_url: str, seeded: str) -> None:
    snapshot = client.get(f"{seeded}/snapshot").json()
    tickets = snapshot["state"]["tickets"]
    assert snapshot["state"]["settings"] == {"account": {"email": "desk@example.com"}}
    assert tickets["TKT-1040"]["requester"] == "bob@example.com"
    assert tickets["TKT-1040"]["tags"] == ["network", "vpn"]
    assert tickets["TKT-1040"]["comments"] == [
        {"author": "tom@example.com", "body": "Collecting client logs.", "created_at": "2025-03-11T10:00:00Z"}
    ]
    printer = tickets["TKT-1002"]
    assert printer["status"] == "open" and printer["assignee"] is None and printer["description"] == ""
    assert printer["created_at"] == printer["updated_at"] == "2025-03-09T09:00:00Z"
    text = snapshot["text"].splitlines()
    assert text[0] == "Account: desk@example.com" and text[2] == "Tickets (3):"
    assert text[3].startswith("  [HR-7] (open, urgent)")  # most urgent first
    assert "    - 2025-03-11T10:00:00Z tom@example.com: Collecting client logs." in text
    assert state(client, new_workspace(client, records_url))["tickets"] == {}


@pytest.mark.parametrize(
    ("seed", "fragment"),
    [
        ([[]], "seed file 0"),
        ([{"documents": []}], "unknown key"),
        ([{"tickets": [{"id": "X", "title": "t", "requester": "a@b.com"}]}], "missing required field 'created_at'"),
        (
            [
                {
                    "tickets": [
                        {"id": "X", "title": "t", "requester": "a@b.com", "created_at": "2025-03-01", "status": "done"}
                    ]
                }
            ],
            "tickets[0]: status: 'done'",
        ),
        (
            [
                {
                    "tickets": [
                        {"id": "X", "title": "t", "requester": "a@b.com", "created_at": "2025-03-01", "priority": "p1"}
                    ]
                }
            ],
            "tickets[0]: priority",
        ),
        ([{"tickets": [{"id": "X", "title": "t", "requester": "nobody", "created_at": "2025-03-01"}]}], "requester"),
        ([{"tickets": [{"id": "X", "title": "t", "requester": "a@b.com", "created_at": "later"}]}], "created_at"),
        (
            [
                {
                    "tickets": [
                        {
                            "id": "X",
                            "title": "t",
                            "requester": "a@b.com",
                            "created_at": "2025-03-01",
                            "comments": [{"body": "b"}],
                        }
                    ]
                }
            ],
            "comments[0]: missing required field 'author'",
        ),
        ([RECORDS_SEED, {"tickets": [RECORDS_SEED["tickets"][1]]}], "duplicate ticket id 'TKT-1002'"),
    ],
)
def test_malformed_seed_is_400(client: httpx.Client, records_url: str, seed: list[Any], fragment: str) -> None:
    response = client.post(f"{records_url}/workspaces", json={"workspace_id": "bad-seed", "seed": seed})
    assert response.status_code == 400, response.text
    assert fragment in response.json()["detail"]
    assert client.get(f"{records_url}/workspaces/bad-seed/snapshot").status_code == 404


def test_create_ticket_is_deterministic_and_diffs(client: httpx.Client, records_url: str, seeded: str) -> None:
    result = step(
        client,
        seeded,
        "create_ticket",
        title="Wi-Fi down in the lab",
        description="No connectivity since 9:00.",
        requester="Eve@Example.com",
        priority="urgent",
        tags=["network", "Wifi"],
    )
    assert result["observation"].startswith("Ticket created: [TKT-1041] (open, urgent) Wi-Fi down in the lab")
    diff = StateDiff.model_validate(result["state_diff"])
    assert diff.summary == "+1 ticket(s) added" and diff.before == {}
    assert diff.after["tickets"]["TKT-1041"] == {
        "id": "TKT-1041",
        "title": "Wi-Fi down in the lab",
        "description": "No connectivity since 9:00.",
        "requester": "eve@example.com",
        "assignee": None,
        "status": "open",
        "priority": "urgent",
        "tags": ["network", "wifi"],
        "created_at": "2025-03-12T07:31:00Z",  # latest recorded moment + 1 minute
        "updated_at": "2025-03-12T07:31:00Z",
        "comments": [],
    }
    defaults = step(client, seeded, "create_ticket", title="Badge", description="Lost badge")
    second = state(client, seeded)["tickets"]["TKT-1042"]
    assert "[TKT-1042]" in defaults["observation"]
    assert second["requester"] == "desk@example.com" and second["priority"] == "medium"
    assert second["created_at"] == "2025-03-12T07:32:00Z"
    empty = new_workspace(client, records_url)
    first = step(client, empty, "create_ticket", title="t", description="d")
    assert "[TKT-1001]" in first["observation"]
    assert state(client, empty)["tickets"]["TKT-1001"]["created_at"] == "2025-01-06T09:00:00Z"


@pytest.mark.parametrize(
    ("parameters", "fragment"),
    [
        ({"title": "t"}, "'description' is a required property"),
        ({"title": "t", "description": "d", "priority": "critical"}, "parameter 'priority': 'critical' is not one of"),
        ({"title": "t", "description": "d", "requester": "bob"}, "Invalid email address 'bob' in 'requester'"),
        (
            {"title": "t", "description": "d", "requester": "a@b.com, c@d.com"},
            "Parameter 'requester': expected exactly",
        ),
        ({"title": "t", "description": "d", "tags": ["no spaces"]}, "Parameter 'tags': invalid tag 'no spaces'"),
        ({"title": " ", "description": "d"}, "Parameter 'title'"),
        ({"title": "t", "description": "d", "status": "open"}, "unexpected parameter(s) 'status'"),
    ],
)
def test_create_ticket_errors(client: httpx.Client, seeded: str, parameters: dict[str, Any], fragment: str) -> None:
    before = state(client, seeded)
    result = step(client, seeded, "create_ticket", **parameters)
    assert result["is_error"] is True and fragment in result["observation"]
    assert state(client, seeded) == before


def test_get_ticket(client: httpx.Client, seeded: str) -> None:
    text = step(client, seeded, "get_ticket", ticket_id="tkt-1040")["observation"]
    assert text.startswith("ID: TKT-1040\nTitle: VPN drops every hour\nStatus: in_progress\nPriority: high")
    assert "Assignee: tom@example.com" in text and "Tags: network, vpn" in text
    assert text.endswith("Comments (1):\n- 2025-03-11T10:00:00Z tom@example.com: Collecting client logs.")
    assert step(client, seeded, "get_ticket", ticket_id="TKT-9") == {
        "observation": "Parameter 'ticket_id': ticket 'TKT-9' not found",
        "is_error": True,
    }


def test_update_ticket_is_partial(client: httpx.Client, seeded: str) -> None:
    result = step(
        client, seeded, "update_ticket", ticket_id="TKT-1002", status="in_progress", assignee="Tom@Example.com"
    )
    assert "updated (status, assignee)" in result["observation"]
    diff = result["state_diff"]
    assert diff["summary"] == "~1 ticket(s) changed"
    before, after = diff["before"]["tickets"]["TKT-1002"], diff["after"]["tickets"]["TKT-1002"]
    assert (before["status"], after["status"]) == ("open", "in_progress")
    assert after["assignee"] == "tom@example.com" and after["priority"] == "low" and after["title"] == before["title"]
    assert after["updated_at"] == "2025-03-12T07:31:00Z" and after["created_at"] == before["created_at"]
    unassigned = step(client, seeded, "update_ticket", ticket_id="TKT-1002", assignee="", tags=["printer"])
    assert state(client, seeded)["tickets"]["TKT-1002"]["assignee"] is None
    assert "assignee, tags" in unassigned["observation"]
    same = step(client, seeded, "update_ticket", ticket_id="TKT-1002", tags=["Printer"])
    assert "nothing changed" in same["observation"] and "state_diff" not in same


@pytest.mark.parametrize(
    ("parameters", "fragment"),
    [
        ({"ticket_id": "TKT-1002", "status": "done"}, "parameter 'status': 'done' is not one of"),
        ({"ticket_id": "TKT-1002", "priority": "p0"}, "parameter 'priority'"),
        ({"ticket_id": "TKT-1002"}, "update_ticket needs at least one field"),
        ({"ticket_id": "TKT-0000", "status": "closed"}, "ticket 'TKT-0000' not found"),
        ({"ticket_id": "TKT-1002", "assignee": "tom"}, "'assignee'"),
        ({"ticket_id": "TKT-1002", "status": 3}, "parameter 'status'"),
    ],
)
def test_update_ticket_errors(client: httpx.Client, seeded: str, parameters: dict[str, Any], fragment: str) -> None:
    before = state(client, seeded)
    result = step(client, seeded, "update_ticket", **parameters)
    assert result["is_error"] is True and fragment in result["observation"]
    assert state(client, seeded) == before


def test_list_tickets_filters_and_orders(client: httpx.Client, seeded: str) -> None:
    everything = step(client, seeded, "list_tickets")["observation"].splitlines()
    assert everything[0] == "3 ticket(s); showing 3, most urgent first:"
    assert [line.split("]")[0] for line in everything[1:]] == ["[HR-7", "[TKT-1040", "[TKT-1002"]
    opened = step(client, seeded, "list_tickets", status="open")["observation"]
    assert opened.startswith("2 ticket(s) (status=open)") and "TKT-1040" not in opened
    toms = step(client, seeded, "list_tickets", assignee="TOM@example.com")["observation"]
    assert toms.startswith("1 ticket(s) (assignee=tom@example.com)") and "[TKT-1040]" in toms
    unassigned = step(client, seeded, "list_tickets", assignee="", status="open", limit=1)["observation"]
    assert unassigned.startswith("2 ticket(s) (status=open, assignee=unassigned); showing 1")
    assert step(client, seeded, "list_tickets", status="closed")["observation"] == "No tickets (status=closed)."
    bad = step(client, seeded, "list_tickets", status="pending")
    assert bad["is_error"] is True and "'status'" in bad["observation"]
    too_many = step(client, seeded, "list_tickets", limit=1000)
    assert too_many["is_error"] is True and "'limit'" in too_many["observation"]


def test_search_tickets(client: httpx.Client, seeded: str) -> None:
    assert "[TKT-1040]" in step(client, seeded, "search_tickets", query="client LOGS")["observation"]  # comments
    assert "[TKT-1040]" in step(client, seeded, "search_tickets", query="vpn bob@")["observation"]
    carol = step(client, seeded, "search_tickets", query="carol")["observation"]
    assert carol.startswith("2 ticket(s) match 'carol'") and carol.index("[HR-7]") < carol.index("[TKT-1002]")
    assert step(client, seeded, "search_tickets", query="vpn printer")["observation"] == (
        "No tickets match 'vpn printer'."
    )
    empty = step(client, seeded, "search_tickets", query=" ")
    assert empty["is_error"] is True and "Parameter 'query'" in empty["observation"]


def test_add_comment(client: httpx.Client, seeded: str) -> None:
    result = step(client, seeded, "add_comment", ticket_id="TKT-1040", author="Desk@Example.com", body="Logs received.")
    assert result["observation"] == "Comment added to ticket 'TKT-1040' (2 comment(s) now)."
    after = result["state_diff"]["after"]["tickets"]["TKT-1040"]
    assert after["comments"][-1] == {
        "author": "desk@example.com",
        "body": "Logs received.",
        "created_at": "2025-03-12T07:31:00Z",
    }
    assert after["updated_at"] == "2025-03-12T07:31:00Z"
    for parameters, fragment in [
        ({"ticket_id": "TKT-1", "author": "a@b.com", "body": "x"}, "ticket 'TKT-1' not found"),
        ({"ticket_id": "TKT-1040", "author": "someone", "body": "x"}, "'author'"),
        ({"ticket_id": "TKT-1040", "author": "a@b.com", "body": "  "}, "Parameter 'body'"),
        ({"ticket_id": "TKT-1040", "body": "x"}, "'author' is a required property"),
    ]:
        failed = step(client, seeded, "add_comment", **parameters)
        assert failed["is_error"] is True and fragment in failed["observation"], parameters
    assert len(state(client, seeded)["tickets"]["TKT-1040"]["comments"]) == 2


async def test_concurrent_workspaces_are_isolated(records_url: str) -> None:
    async with httpx.AsyncClient(timeout=20) as http:

        async def drive(n: int) -> tuple[int, dict[str, Any]]:
            created = await http.post(f"{records_url}/workspaces", json={"seed": [RECORDS_SEED]})
            url = f"{records_url}{created.json()['path']}"
            for k in range(4):
                action = {"tool_name": "create_ticket", "parameters": {"title": f"w{n}-{k}", "description": "d"}}
                response = await http.post(f"{url}/step", json={"action": action})
                assert response.json()["state_diff"]["step_index"] == k
            action = {"tool_name": "update_ticket", "parameters": {"ticket_id": "TKT-1002", "status": "closed"}}
            await http.post(f"{url}/step", json={"action": action})
            snapshot = (await http.get(f"{url}/snapshot")).json()["state"]
            await http.delete(url)
            return n, snapshot

        results = await asyncio.gather(*(drive(n) for n in range(12)))
    for n, snapshot in results:
        new = {k: t for k, t in snapshot["tickets"].items() if k not in {"TKT-1040", "TKT-1002", "HR-7"}}
        assert sorted(new) == ["TKT-1041", "TKT-1042", "TKT-1043", "TKT-1044"]
        assert sorted(t["title"] for t in new.values()) == [f"w{n}-{k}" for k in range(4)]
        assert snapshot["tickets"]["TKT-1002"]["status"] == "closed"
