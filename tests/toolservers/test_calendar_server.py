"""The calendar tool server over real HTTP: tools, time ranges, validation, seeding, snapshots and diffs."""

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
from eval_pipelines.toolservers.calendar import CalendarServer

from ._helpers import new_workspace, state, step

EXPECTED_TOOLS = {
    "list_calendars": False,
    "list_events": False,
    "create_event": True,
    "update_event": True,
    "delete_event": True,
    "search_events": False,
}

CALENDAR_SEED: dict[str, Any] = {
    "account": "Ops@Example.com",
    "calendars": [
        {"uid": "work", "name": "Work", "description": "Team meetings"},
        {"uid": "priya", "name": "Priya Shah", "owner": "priya@example.com", "read_only": True},
    ],
    "events": [
        {
            "id": "evt-0007",
            "calendar_uid": "work",
            "title": "Budget review",
            "start": "2025-03-18T14:00:00Z",
            "end": "2025-03-18T15:00:00+00:00",
            "attendees": ["Carol@Example.com", "ops@example.com"],
            "location": "Room 2A",
            "description": "Q2 budget",
        },
        {
            "id": "evt-0003",
            "calendar_uid": "work",
            "title": "Standup",
            "start": "2025-03-18T09:00:00",
            "end": "2025-03-18T09:15:00Z",
        },
        {
            "id": "p-1",
            "calendar_uid": "priya",
            "title": "Board prep",
            "start": "2025-03-18T16:00:00+01:00",
            "end": "2025-03-18T17:00:00+01:00",
        },
    ],
}


@pytest.fixture(scope="module")
def calendar_url() -> Iterator[str]:
    with BackgroundServer(create_app(CalendarServer())) as server:
        yield server.url


@pytest.fixture
def seeded(client: httpx.Client, calendar_url: str) -> str:
    return new_workspace(client, calendar_url, [copy.deepcopy(CALENDAR_SEED)])


def test_tool_listing(client: httpx.Client, calendar_url: str, seeded: str) -> None:
    assert client.get(f"{seeded}/health").json() == {"status": "healthy"}
    tools = client.get(f"{calendar_url}/tools").json()["tools"]
    assert client.get(f"{seeded}/tools").json()["tools"] == tools
    assert {t["name"]: t["mutates_state"] for t in tools} == EXPECTED_TOOLS
    for tool in tools:
        ToolDefinition.model_validate(tool)
        Draft202012Validator.check_schema(tool["parameters"])
        assert tool["description"] and set(tool["parameters"]["required"]) <= set(tool["parameters"]["properties"])
        assert all(p["type"] and p["description"] for p in tool["parameters"]["properties"].values())
    create = next(t for t in tools if t["name"] == "create_event")["parameters"]
    assert create["required"] == ["calendar_uid", "title", "start", "end"]
    assert create["properties"]["attendees"]["type"] == "array"


def test_seeding_normalises_and_snapshot_renders(client: httpx.Client, calendar_url: str, seeded: str) -> None:
    snapshot = client.get(f"{seeded}/snapshot").json()
    current = snapshot["state"]
    assert set(current) == {"calendars", "events", "settings"}
    assert current["settings"] == {"account": {"email": "ops@example.com"}}
    # the primary calendar follows the seeded account
    assert current["calendars"]["primary"]["owner"] == "ops@example.com"
    assert current["calendars"]["work"] == {
        "uid": "work",
        "name": "Work",
        "owner": "ops@example.com",
        "description": "Team meetings",
        "read_only": False,
    }
    assert current["events"]["evt-0003"]["start"] == "2025-03-18T09:00:00Z"  # naive read as UTC
    assert current["events"]["p-1"]["start"] == "2025-03-18T15:00:00Z"  # offset normalised to UTC
    assert current["events"]["evt-0007"]["attendees"] == ["carol@example.com", "ops@example.com"]
    assert "Calendar work - Work (ops@example.com):" in snapshot["text"]
    assert "[evt-0003]" in snapshot["text"] and "read-only" in snapshot["text"]
    blank = state(client, new_workspace(client, calendar_url))
    assert blank["events"] == {} and blank["calendars"]["primary"]["owner"] == "agent@example.com"


@pytest.mark.parametrize(
    ("seed", "fragment"),
    [
        (["nope"], "seed file 0"),
        ([{"meetings": []}], "unknown key"),
        ([{"calendars": [{"name": "x"}]}], "calendars[0]: uid"),
        ([{"calendars": [{"uid": "x", "owner": "bob"}]}], "calendars[0]: owner"),
        ([{"events": [{"id": "e", "calendar_uid": "nope", "title": "t", "start": "2025", "end": "2026"}]}], "nope"),
        (
            [{"events": [{"id": "e", "calendar_uid": "primary", "title": "t", "start": "soon", "end": "2026-01-01"}]}],
            "events[0]: Parameter 'start'",
        ),
        (
            [
                {
                    "events": [
                        {"id": "e", "calendar_uid": "primary", "title": "t", "start": "2025-02-01", "end": "2025-01-01"}
                    ]
                }
            ],
            "events[0]: end",
        ),
        ([{"events": [{"id": "e", "calendar_uid": "primary", "title": "t", "start": "2025-02-01"}]}], "'end'"),
        ([CALENDAR_SEED, {"events": [CALENDAR_SEED["events"][0]]}], "duplicate event id 'evt-0007'"),
        ([{"account": "me"}], "account"),
    ],
)
def test_malformed_seed_is_400(client: httpx.Client, calendar_url: str, seed: list[Any], fragment: str) -> None:
    response = client.post(f"{calendar_url}/workspaces", json={"workspace_id": "bad-seed", "seed": seed})
    assert response.status_code == 400, response.text
    assert fragment in response.json()["detail"]
    assert client.get(f"{calendar_url}/workspaces/bad-seed/snapshot").status_code == 404


def test_list_calendars(client: httpx.Client, seeded: str) -> None:
    text = step(client, seeded, "list_calendars")["observation"]
    lines = text.splitlines()
    assert lines[0] == "3 calendar(s):"
    assert lines[1].startswith("[primary] Primary | owner: ops@example.com | writable")
    assert "[priya] Priya Shah | owner: priya@example.com | read-only" in text
    assert "[work] Work | owner: ops@example.com | writable | Team meetings" in text


def test_list_events_uses_overlap_semantics(client: httpx.Client, seeded: str) -> None:
    everything = step(client, seeded, "list_events", calendar_uid="work")["observation"].splitlines()
    assert everything[0].startswith("2 event(s) in calendar 'work'")
    assert everything[1].startswith("[evt-0003]") and everything[2].startswith("[evt-0007]")  # earliest first
    assert "location: Room 2A" in everything[2] and "attendees: carol@example.com" in everything[2]
    assert everything[3] == "    description: Q2 budget"
    # 14:30-14:45 lies inside the budget review; 15:00 onwards only touches its end, which is not an overlap.
    inside = step(
        client,
        seeded,
        "list_events",
        calendar_uid="work",
        time_min="2025-03-18T14:30:00Z",
        time_max="2025-03-18T14:45:00Z",
    )
    assert "[evt-0007]" in inside["observation"] and "[evt-0003]" not in inside["observation"]
    touching = step(client, seeded, "list_events", calendar_uid="work", time_min="2025-03-18T15:00:00Z")
    assert touching["observation"].startswith("No events in calendar 'work' (Work) between 2025-03-18T15:00:00Z")
    offset = step(client, seeded, "list_events", calendar_uid="work", time_max="2025-03-18T10:14:00+01:00")
    assert "[evt-0003]" in offset["observation"] and "[evt-0007]" not in offset["observation"]
    limited = step(client, seeded, "list_events", calendar_uid="work", limit=1)["observation"]
    assert "showing 1" in limited and "[evt-0007]" not in limited


@pytest.mark.parametrize(
    ("parameters", "fragment"),
    [
        (
            {"calendar_uid": "nope"},
            "Parameter 'calendar_uid': unknown calendar 'nope' (available: primary, priya, work)",
        ),
        ({"calendar_uid": "work", "time_min": "yesterday"}, "Parameter 'time_min': 'yesterday' is not an ISO 8601"),
        ({"calendar_uid": "work", "time_max": "2025-13-01"}, "Parameter 'time_max'"),
        (
            {"calendar_uid": "work", "time_min": "2025-03-19T00:00:00Z", "time_max": "2025-03-18T00:00:00Z"},
            "Parameter 'time_max' (2025-03-18T00:00:00Z) must be after 'time_min' (2025-03-19T00:00:00Z)",
        ),
        ({"calendar_uid": "work", "time_min": "2025-03-18", "time_max": "2025-03-18"}, "must be after"),
        ({}, "'calendar_uid' is a required property"),
        ({"calendar_uid": "work", "limit": 0}, "parameter 'limit'"),
    ],
)
def test_list_events_errors_name_the_parameter(
    client: httpx.Client, seeded: str, parameters: dict[str, Any], fragment: str
) -> None:
    result = step(client, seeded, "list_events", **parameters)
    assert result["is_error"] is True
    assert fragment in result["observation"]


def test_create_event_is_deterministic_and_diffs(client: httpx.Client, seeded: str) -> None:
    result = step(
        client,
        seeded,
        "create_event",
        calendar_uid="work",
        title=" Vendor demo ",
        start="2025-03-18T14:30:00+00:00",
        end="2025-03-18T15:30:00Z",
        attendees=["Dan@Partner.org", "dan@partner.org"],
        location="Room 1",
    )
    assert "is_error" not in result
    assert result["observation"].startswith("Event created: [evt-0008]")  # after the highest evt- number
    assert "overlaps with [evt-0007] Budget review" in result["observation"]
    diff = StateDiff.model_validate(result["state_diff"])
    assert diff.summary == "+1 calendar event(s) added" and diff.tool_name == "create_event" and diff.before == {}
    assert diff.after["events"]["evt-0008"] == {
        "id": "evt-0008",
        "calendar_uid": "work",
        "title": "Vendor demo",
        "start": "2025-03-18T14:30:00Z",
        "end": "2025-03-18T15:30:00Z",
        "attendees": ["dan@partner.org"],
        "location": "Room 1",
        "description": "",
    }
    second = step(
        client,
        seeded,
        "create_event",
        calendar_uid="primary",
        title="Lunch",
        start="2025-03-19T12:00:00Z",
        end="2025-03-19T13:00:00Z",
    )
    assert "[evt-0009]" in second["observation"] and "overlaps" not in second["observation"]
    assert second["state_diff"]["step_index"] == 1


@pytest.mark.parametrize(
    ("parameters", "fragment"),
    [
        (
            {"calendar_uid": "work", "title": "x", "start": "2025-03-18T10:00:00Z", "end": "2025-03-18T09:00:00Z"},
            "Parameter 'end' (2025-03-18T09:00:00Z) must be after 'start' (2025-03-18T10:00:00Z)",
        ),
        (
            {"calendar_uid": "work", "title": "x", "start": "2025-03-18T10:00:00Z", "end": "2025-03-18T10:00:00Z"},
            "Parameter 'end'",
        ),
        ({"calendar_uid": "home", "title": "x", "start": "2025-03-18", "end": "2025-03-19"}, "unknown calendar 'home'"),
        ({"calendar_uid": "priya", "title": "x", "start": "2025-03-18", "end": "2025-03-19"}, "'priya' is read-only"),
        ({"calendar_uid": "work", "title": "x", "start": "noon", "end": "2025-03-19"}, "Parameter 'start'"),
        (
            {"calendar_uid": "work", "title": "x", "start": "2025-03-18", "end": "2025-03-19", "attendees": ["bob"]},
            "Invalid email address 'bob' in 'attendees'",
        ),
        ({"calendar_uid": "work", "title": "  ", "start": "2025-03-18", "end": "2025-03-19"}, "Parameter 'title'"),
        ({"calendar_uid": "work", "title": "x", "start": "2025-03-18"}, "'end' is a required property"),
        (
            {"calendar_uid": "work", "title": "x", "start": "2025-03-18", "end": "2025-03-19", "attendees": "a@b.com"},
            "parameter 'attendees'",
        ),
    ],
)
def test_create_event_errors_change_nothing(
    client: httpx.Client, seeded: str, parameters: dict[str, Any], fragment: str
) -> None:
    before = state(client, seeded)
    result = step(client, seeded, "create_event", **parameters)
    assert result["is_error"] is True and "state_diff" not in result
    assert fragment in result["observation"]
    assert state(client, seeded) == before


def test_update_event(client: httpx.Client, seeded: str) -> None:
    moved = step(
        client, seeded, "update_event", event_id="evt-0007", start="2025-03-18T16:00:00Z", end="2025-03-18T17:00:00Z"
    )
    assert "updated (start, end)" in moved["observation"]
    diff = moved["state_diff"]
    assert diff["summary"] == "~1 calendar event(s) changed"
    assert diff["before"]["events"]["evt-0007"]["start"] == "2025-03-18T14:00:00Z"
    assert diff["after"]["events"]["evt-0007"]["start"] == "2025-03-18T16:00:00Z"
    assert diff["after"]["events"]["evt-0007"]["title"] == "Budget review"  # untouched fields kept
    retitled = step(
        client,
        seeded,
        "update_event",
        event_id="evt-0007",
        title="Budget review v2",
        attendees=[],
        calendar_uid="primary",
    )
    event = state(client, seeded)["events"]["evt-0007"]
    assert "calendar_uid, title, attendees" in retitled["observation"]
    assert event["calendar_uid"] == "primary" and event["attendees"] == [] and event["location"] == "Room 2A"
    same = step(client, seeded, "update_event", event_id="evt-0007", title="Budget review v2")
    assert "nothing changed" in same["observation"] and "state_diff" not in same


@pytest.mark.parametrize(
    ("parameters", "fragment"),
    [
        ({"event_id": "evt-9999", "title": "x"}, "Parameter 'event_id': event 'evt-9999' not found"),
        ({"event_id": "evt-0007"}, "update_event needs at least one field"),
        ({"event_id": "evt-0007", "end": "2025-03-18T13:00:00Z"}, "Parameter 'end': the event would end"),
        ({"event_id": "evt-0007", "start": "2025-03-18T15:30:00Z"}, "Parameter 'start': the event would end"),
        ({"event_id": "evt-0007", "calendar_uid": "priya"}, "'priya' is read-only"),
        ({"event_id": "p-1", "title": "mine now"}, "'priya' is read-only"),
        ({"event_id": "evt-0007", "colour": "red"}, "unexpected parameter(s) 'colour'"),
    ],
)
def test_update_event_errors(client: httpx.Client, seeded: str, parameters: dict[str, Any], fragment: str) -> None:
    before = state(client, seeded)
    result = step(client, seeded, "update_event", **parameters)
    assert result["is_error"] is True and fragment in result["observation"]
    assert state(client, seeded) == before


def test_delete_event(client: httpx.Client, seeded: str) -> None:
    result = step(client, seeded, "delete_event", event_id="evt-0003")
    assert result["observation"] == "Event 'evt-0003' (Standup, 2025-03-18T09:00:00Z) deleted."
    assert result["state_diff"]["summary"] == "-1 calendar event(s) removed"
    assert result["state_diff"]["before"]["events"]["evt-0003"]["title"] == "Standup"
    assert "evt-0003" not in state(client, seeded)["events"]
    assert step(client, seeded, "delete_event", event_id="evt-0003") == {
        "observation": "Parameter 'event_id': event 'evt-0003' not found",
        "is_error": True,
    }
    read_only = step(client, seeded, "delete_event", event_id="p-1")
    assert read_only["is_error"] is True and "read-only" in read_only["observation"]


def test_search_events(client: httpx.Client, seeded: str) -> None:
    found = step(client, seeded, "search_events", query="BUDGET room")
    assert "state_diff" not in found
    assert found["observation"].startswith("1 event(s) match 'BUDGET room'") and "[evt-0007]" in found["observation"]
    by_attendee = step(client, seeded, "search_events", query="carol@")
    assert "[evt-0007]" in by_attendee["observation"]
    across = step(client, seeded, "search_events", query="b")["observation"]
    assert "[p-1]" in across and "[evt-0007]" in across  # every calendar is searched
    windowed = step(client, seeded, "search_events", query="b", time_min="2025-03-18T15:00:00Z")
    assert "[p-1]" in windowed["observation"] and "[evt-0007]" not in windowed["observation"]
    assert step(client, seeded, "search_events", query="zebra")["observation"] == "No events match 'zebra'."
    blank = step(client, seeded, "search_events", query="  ")
    assert blank["is_error"] is True and "Parameter 'query'" in blank["observation"]
    bad_range = step(client, seeded, "search_events", query="b", time_min="2025-03-19", time_max="2025-03-18")
    assert bad_range["is_error"] is True and "'time_max'" in bad_range["observation"]


def test_unknown_tool(client: httpx.Client, seeded: str) -> None:
    result = step(client, seeded, "book_room")
    assert result["is_error"] is True
    assert "book_room" in result["observation"] and "create_event" in result["observation"]


async def test_concurrent_workspaces_are_isolated(calendar_url: str) -> None:
    async with httpx.AsyncClient(timeout=20) as http:

        async def drive(n: int) -> tuple[int, dict[str, Any]]:
            created = await http.post(f"{calendar_url}/workspaces", json={"seed": [CALENDAR_SEED]})
            url = f"{calendar_url}{created.json()['path']}"
            for k in range(4):
                action = {
                    "tool_name": "create_event",
                    "parameters": {
                        "calendar_uid": "work",
                        "title": f"w{n}-{k}",
                        "start": f"2025-04-0{k + 1}T10:00:00Z",
                        "end": f"2025-04-0{k + 1}T11:00:00Z",
                    },
                }
                response = await http.post(f"{url}/step", json={"action": action})
                assert response.json()["state_diff"]["step_index"] == k
            snapshot = (await http.get(f"{url}/snapshot")).json()["state"]
            await http.delete(url)
            return n, snapshot

        results = await asyncio.gather(*(drive(n) for n in range(12)))
    for n, snapshot in results:
        created = {k: e for k, e in snapshot["events"].items() if k not in {"evt-0003", "evt-0007", "p-1"}}
        assert sorted(created) == [f"evt-{i:04d}" for i in range(8, 12)]
        assert sorted(e["title"] for e in created.values()) == [f"w{n}-{k}" for k in range(4)]
