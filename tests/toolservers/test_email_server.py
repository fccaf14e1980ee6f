"""The email tool server over real HTTP: tools, validation, workspaces, snapshots and per-call diffs."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, ClassVar

import httpx
import pytest
from jsonschema import Draft202012Validator

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.tools import StateDiff, StepResponse, ToolDefinition
from eval_pipelines.toolservers import BuiltinToolServer, EmailServer, State, ToolContext, ToolError, create_app

from ._helpers import SEED, new_workspace, state, step

EXPECTED_TOOLS = {
    "send_email": True,
    "reply_to_email": True,
    "forward_email": True,
    "search_emails": False,
    "get_email": False,
    "list_emails": False,
    "list_contacts": False,
    "delete_email": True,
    "delete_all_emails": True,
}


@pytest.fixture
def seeded(client: httpx.Client, email_url: str) -> str:
    return new_workspace(client, email_url, [copy.deepcopy(SEED)])


# -- listing and health -----------------------------------------------------------------------------------


def test_health_and_tool_listing_shape(client: httpx.Client, email_url: str, seeded: str) -> None:
    assert client.get(f"{email_url}/health").json() == {"status": "healthy"}
    assert client.get(f"{seeded}/health").json() == {"status": "healthy"}
    root_tools = client.get(f"{email_url}/tools").json()
    assert client.get(f"{seeded}/tools").json() == root_tools
    tools = root_tools["tools"]
    assert {t["name"]: t["mutates_state"] for t in tools} == EXPECTED_TOOLS
    for tool in tools:
        assert set(tool) == {"name", "description", "parameters", "mutates_state"}
        assert tool["description"]
        params = tool["parameters"]
        Draft202012Validator.check_schema(params)
        assert params["type"] == "object"
        assert set(params["required"]) <= set(params["properties"])
        for prop in params["properties"].values():
            assert prop["type"] in {"string", "integer"} and prop["description"]
        ToolDefinition.model_validate(tool)
    search = next(t for t in tools if t["name"] == "search_emails")["parameters"]
    assert search["required"] == ["query"]
    assert search["properties"]["kind"]["enum"] == ["to", "from", "containing"]
    assert search["properties"]["limit"]["maximum"] == 200


# -- send / reply / forward ----------------------------------------------------------------------------


def test_send_email_is_deterministic_and_reports_a_diff(client: httpx.Client, seeded: str) -> None:
    first = step(
        client,
        seeded,
        "send_email",
        to="Bob Stone <Bob@Example.com>, dan@partner.org",
        subject="Hello",
        body="Hi all",
        cc="carol@example.com",
    )
    assert "is_error" not in first
    assert "sent-0001" in first["observation"]
    diff = StateDiff.model_validate(first["state_diff"])
    assert diff.summary == "+1 email(s) added"
    assert diff.scope == "tool_call" and diff.tool_name == "send_email" and diff.step_index == 0
    assert diff.before == {}
    sent = diff.after["emails"]["sent-0001"]
    assert sent == {
        "id": "sent-0001",
        "from": "ops@example.com",
        "to": ["bob@example.com", "dan@partner.org"],
        "cc": ["carol@example.com"],
        "subject": "Hello",
        "body": "Hi all",
        "folder": "sent",
        "timestamp": "2025-03-11T09:31:00Z",  # latest seeded mail + 1 minute
        "read": True,
        "in_reply_to": None,
    }
    second = step(client, seeded, "send_email", to="bob@example.com", subject="Again", body="x")
    assert second["state_diff"]["step_index"] == 1
    emails = state(client, seeded)["emails"]
    assert emails["sent-0002"]["timestamp"] == "2025-03-11T09:32:00Z"
    assert emails["sent-0001"] == sent


def test_send_email_rejects_a_bad_address_and_changes_nothing(client: httpx.Client, seeded: str) -> None:
    before = state(client, seeded)
    result = step(client, seeded, "send_email", to="bob@example.com, not-an-address", subject="s", body="b")
    assert result["is_error"] is True
    assert "not-an-address" in result["observation"] and "'to'" in result["observation"]
    assert "state_diff" not in result
    bad_cc = step(client, seeded, "send_email", to="bob@example.com", subject="s", body="b", cc="carol@")
    assert bad_cc["is_error"] is True and "carol@" in bad_cc["observation"] and "'cc'" in bad_cc["observation"]
    empty = step(client, seeded, "send_email", to=" , ", subject="s", body="b")
    assert empty["is_error"] is True and "recipient" in empty["observation"]
    assert state(client, seeded) == before


def test_reply_to_email(client: httpx.Client, seeded: str) -> None:
    result = step(client, seeded, "reply_to_email", email_id="e-002", body="Noted.")
    assert "is_error" not in result
    reply = result["state_diff"]["after"]["emails"]["sent-0001"]
    assert reply["to"] == ["carol@example.com"]
    assert reply["subject"] == "Re: Budget review"  # no double "Re:"
    assert reply["in_reply_to"] == "e-002" and reply["folder"] == "sent" and reply["cc"] == []
    first = step(client, seeded, "reply_to_email", email_id="e-001", body="Paid.")
    assert first["state_diff"]["after"]["emails"]["sent-0002"]["subject"] == "Re: Quarterly invoice"
    own = step(client, seeded, "reply_to_email", email_id="e-003", body="Update follows.")
    assert own["state_diff"]["after"]["emails"]["sent-0003"]["to"] == ["carol@example.com"]
    missing = step(client, seeded, "reply_to_email", email_id="e-999", body="x")
    assert missing == {"observation": "Email 'e-999' not found", "is_error": True}


def test_forward_email(client: httpx.Client, seeded: str) -> None:
    result = step(client, seeded, "forward_email", email_id="e-001", to="carol@example.com", note="FYI, please pay.")
    fwd = result["state_diff"]["after"]["emails"]["sent-0001"]
    assert fwd["subject"] == "Fwd: Quarterly invoice"
    assert fwd["to"] == ["carol@example.com"]
    assert fwd["body"].startswith("FYI, please pay.")
    assert "Please pay invoice Q-17 by Friday." in fwd["body"] and "From: bob@example.com" in fwd["body"]
    no_note = step(client, seeded, "forward_email", email_id="sent-0001", to="dan@partner.org")
    again = no_note["state_diff"]["after"]["emails"]["sent-0002"]
    assert again["subject"] == "Fwd: Quarterly invoice"
    assert again["body"].startswith("---------- Forwarded message ----------")
    missing = step(client, seeded, "forward_email", email_id="nope", to="carol@example.com")
    assert missing == {"observation": "Email 'nope' not found", "is_error": True}
    bad = step(client, seeded, "forward_email", email_id="e-001", to="carol")
    assert bad["is_error"] is True and "'carol'" in bad["observation"]


# -- reads -----------------------------------------------------------------------------------------------


def test_search_emails_kinds_case_and_paging(client: httpx.Client, seeded: str) -> None:
    by_body = step(client, seeded, "search_emails", query="budget")
    assert "is_error" not in by_body and "state_diff" not in by_body
    assert "[e-002]" in by_body["observation"] and "[e-001]" not in by_body["observation"]
    by_from = step(client, seeded, "search_emails", query="BOB@", kind="from")
    assert "[e-001]" in by_from["observation"] and "[e-002]" not in by_from["observation"]
    by_to = step(client, seeded, "search_emails", query="bob@example.com", kind="to")
    assert "[e-002]" in by_to["observation"] and "[e-001]" not in by_to["observation"]  # matched through cc
    everything = step(client, seeded, "search_emails", query="example.com", limit=2)
    lines = everything["observation"].splitlines()
    assert lines[0].startswith("3 email(s) match") and len(lines) == 3
    assert lines[1].startswith("[e-002]") and lines[2].startswith("[e-001]")  # newest first
    page = step(client, seeded, "search_emails", query="example.com", start=2, limit=2)
    assert page["observation"].splitlines()[1].startswith("[e-003]")
    past_end = step(client, seeded, "search_emails", query="example.com", start=10)
    assert "none at start=10" in past_end["observation"]
    assert "No emails match" in step(client, seeded, "search_emails", query="zebra")["observation"]
    too_many = step(client, seeded, "search_emails", query="x", limit=500)
    assert too_many["is_error"] is True and "'limit'" in too_many["observation"]
    bad_kind = step(client, seeded, "search_emails", query="x", kind="subject")
    assert bad_kind["is_error"] is True and "'kind'" in bad_kind["observation"]


def test_get_email_is_a_pure_read(client: httpx.Client, seeded: str) -> None:
    before = state(client, seeded)
    result = step(client, seeded, "get_email", email_id="e-002")
    assert "state_diff" not in result and "is_error" not in result
    text = result["observation"]
    assert "From: carol@example.com" in text and "Cc: bob@example.com" in text
    assert text.endswith("The BUDGET meeting is on Monday.")
    assert state(client, seeded) == before
    assert before["emails"]["e-002"]["read"] is False
    assert step(client, seeded, "get_email", email_id="e-404") == {
        "observation": "Email 'e-404' not found",
        "is_error": True,
    }


def test_list_emails_and_contacts(client: httpx.Client, email_url: str, seeded: str) -> None:
    inbox = step(client, seeded, "list_emails")["observation"].splitlines()
    assert inbox[0].startswith("inbox: 2 email(s)")
    assert inbox[1].startswith("[e-002]") and inbox[2].startswith("[e-001]")
    sent = step(client, seeded, "list_emails", folder="sent", limit=1)["observation"]
    assert "[e-003]" in sent
    assert step(client, seeded, "list_emails", folder="trash")["observation"] == "The trash folder is empty."
    bad = step(client, seeded, "list_emails", folder="spam")
    assert bad["is_error"] is True and "'folder'" in bad["observation"]
    contacts = step(client, seeded, "list_contacts")["observation"]
    assert "Bob Stone <bob@example.com> - Buyer" in contacts and "Carol Diaz <carol@example.com>" in contacts
    empty = new_workspace(client, email_url)
    assert step(client, empty, "list_contacts")["observation"] == "You have no contacts."


def test_delete_email_and_delete_all(client: httpx.Client, seeded: str) -> None:
    result = step(client, seeded, "delete_email", email_id="e-001")
    assert result["state_diff"]["summary"] == "~1 email(s) changed"
    assert result["state_diff"]["before"]["emails"]["e-001"]["folder"] == "inbox"
    assert result["state_diff"]["after"]["emails"]["e-001"]["folder"] == "trash"
    again = step(client, seeded, "delete_email", email_id="e-001")
    assert "already in the trash" in again["observation"] and "state_diff" not in again
    assert step(client, seeded, "delete_email", email_id="zz") == {
        "observation": "Email 'zz' not found",
        "is_error": True,
    }
    everything = step(client, seeded, "delete_all_emails")
    assert everything["observation"] == "Moved 1 email(s) from the inbox to the trash."
    assert everything["state_diff"]["summary"] == "~1 email(s) changed"
    folders = {k: e["folder"] for k, e in state(client, seeded)["emails"].items()}
    assert folders == {"e-001": "trash", "e-002": "trash", "e-003": "sent"}
    nothing_left = step(client, seeded, "delete_all_emails")
    assert "Moved 0" in nothing_left["observation"] and "state_diff" not in nothing_left


# -- validation and protocol -----------------------------------------------------------------------------


def test_parameter_validation_names_tool_and_parameter(client: httpx.Client, seeded: str) -> None:
    missing = step(client, seeded, "send_email", to="bob@example.com", body="b")
    assert missing == {
        "observation": "Invalid parameters for send_email: 'subject' is a required property",
        "is_error": True,
    }
    wrong_type = step(client, seeded, "send_email", to=["bob@example.com"], subject="s", body="b")
    assert wrong_type["is_error"] is True
    assert wrong_type["observation"].startswith("Invalid parameters for send_email: parameter 'to':")
    extra = step(client, seeded, "get_email", email_id="e-001", folder="inbox")
    assert extra["is_error"] is True
    assert "Invalid parameters for get_email" in extra["observation"] and "'folder'" in extra["observation"]
    not_int = step(client, seeded, "list_emails", limit="5")
    assert not_int["is_error"] is True and "'limit'" in not_int["observation"]
    assert "is_error" not in step(client, seeded, "list_emails", limit=5.0)  # JSON Schema counts 5.0 as an integer
    unknown = step(client, seeded, "launch_rockets")
    assert unknown["is_error"] is True
    assert "launch_rockets" in unknown["observation"] and "send_email" in unknown["observation"]
    StepResponse.model_validate(unknown)


def test_malformed_step_bodies_are_422(client: httpx.Client, seeded: str) -> None:
    not_json = client.post(f"{seeded}/step", content=b"{not json", headers={"content-type": "application/json"})
    assert not_json.status_code == 422
    assert isinstance(not_json.json()["detail"], list)
    assert client.post(f"{seeded}/step", json={"tool_name": "list_emails"}).status_code == 422
    no_params = {"action": {"tool_name": "list_emails", "parameters": "folder=inbox"}}
    assert client.post(f"{seeded}/step", json=no_params).status_code == 422


def test_step_index_counts_every_call(client: httpx.Client, seeded: str) -> None:
    step(client, seeded, "list_emails")
    step(client, seeded, "nope")
    step(client, seeded, "send_email", to="x", subject="s", body="b")
    result = step(client, seeded, "delete_email", email_id="e-001")
    assert result["state_diff"]["step_index"] == 3


# -- workspaces ----------------------------------------------------------------------------------------


def test_workspace_lifecycle_and_errors(client: httpx.Client, email_url: str) -> None:
    created = client.post(f"{email_url}/workspaces", json={"seed": [SEED]})
    assert created.status_code == 201
    workspace_id = created.json()["workspace_id"]
    assert len(workspace_id) == 32 and created.json()["path"] == f"/workspaces/{workspace_id}"
    no_body = client.post(f"{email_url}/workspaces")
    assert no_body.status_code == 201
    duplicate = client.post(f"{email_url}/workspaces", json={"workspace_id": workspace_id})
    assert duplicate.status_code == 409 and workspace_id in duplicate.json()["detail"]
    bad_id = client.post(f"{email_url}/workspaces", json={"workspace_id": "a/b"})
    assert bad_id.status_code == 422
    url = f"{email_url}/workspaces/{workspace_id}"
    assert client.delete(url).json() == {"workspace_id": workspace_id, "deleted": True}
    for method, suffix in [("GET", "/tools"), ("GET", "/health"), ("GET", "/snapshot"), ("DELETE", "")]:
        response = client.request(method, f"{url}{suffix}")
        assert response.status_code == 404
        assert response.json() == {"detail": f"workspace '{workspace_id}' not found"}
    gone = client.post(f"{url}/step", json={"action": {"tool_name": "list_emails", "parameters": {}}})
    assert gone.status_code == 404


@pytest.mark.parametrize(
    ("seed", "fragment"),
    [
        (["not an object"], "seed file 0"),
        ([{"mails": []}], "unknown key"),
        ([{"emails": [{"id": "x", "from": "a@b.com", "to": [], "subject": "s", "body": "b"}]}], "timestamp"),
        (
            [{"emails": [{"id": "x", "from": "a@b.com", "to": [], "subject": "s", "body": "b", "timestamp": "soon"}]}],
            "ISO",
        ),
        (
            [{"emails": [{"id": "x", "from": "nobody", "to": [], "subject": "s", "body": "b", "timestamp": "2025"}]}],
            "nobody",
        ),
        ([SEED, {"emails": [SEED["emails"][0]]}], "duplicate email id 'e-001'"),
        ([{"account": "me"}], "account"),
        ([{"contacts": [{"name": "No Address"}]}], "contacts[0]"),
    ],
)
def test_malformed_seed_is_400(client: httpx.Client, email_url: str, seed: list[Any], fragment: str) -> None:
    response = client.post(f"{email_url}/workspaces", json={"workspace_id": "bad-seed", "seed": seed})
    assert response.status_code == 400, response.text
    assert fragment in response.json()["detail"]
    assert client.get(f"{email_url}/workspaces/bad-seed/snapshot").status_code == 404  # nothing half-created


def test_seed_files_merge_and_snapshot(client: httpx.Client, email_url: str) -> None:
    extra = {"contacts": [{"email": "dan@partner.org", "name": "Dan"}], "emails": []}
    url = new_workspace(client, email_url, [SEED, extra])
    snapshot = client.get(f"{url}/snapshot").json()
    assert snapshot["tool_server"] == "email" and snapshot["workspace_id"] == url.rsplit("/", 1)[1]
    current = snapshot["state"]
    assert set(current) == {"emails", "contacts", "settings"}
    assert current["settings"] == {"account": {"email": "ops@example.com"}}
    assert set(current["contacts"]) == {"bob@example.com", "carol@example.com", "dan@partner.org"}
    assert current["contacts"]["dan@partner.org"] == {"email": "dan@partner.org", "name": "Dan", "title": ""}
    e2 = current["emails"]["e-002"]
    assert e2["from"] == "carol@example.com" and e2["to"] == ["ops@example.com"] and e2["cc"] == ["bob@example.com"]
    assert e2["timestamp"] == "2025-03-11T09:30:00Z" and e2["read"] is False and e2["folder"] == "inbox"
    assert current["emails"]["e-003"]["folder"] == "sent"  # sent by the seeded account
    text = snapshot["text"]
    assert "Account: ops@example.com" in text and "Inbox (2):" in text and "Sent (1):" in text
    empty = client.get(f"{new_workspace(client, email_url)}/snapshot").json()["state"]
    assert empty == {"emails": {}, "contacts": {}, "settings": {"account": {"email": "agent@example.com"}}}


def test_seeding_an_existing_workspace(client: httpx.Client, email_url: str) -> None:
    url = new_workspace(client, email_url)
    seeded = client.post(f"{url}/seed", json={"seed": [SEED]})
    assert seeded.status_code == 200 and seeded.json() == {"workspace_id": url.rsplit("/", 1)[1], "seeded_files": 1}
    before = state(client, url)
    assert set(before["emails"]) == {"e-001", "e-002", "e-003"}
    duplicate = client.post(f"{url}/seed", json={"seed": [{"contacts": [{"email": "z@y.org"}]}, SEED]})
    assert duplicate.status_code == 400 and "seed file 1" in duplicate.json()["detail"]
    assert state(client, url) == before  # the valid first file of a failed seed was not applied either
    assert client.post(f"{email_url}/workspaces/nope/seed", json={"seed": []}).status_code == 404
    assert client.post(f"{url}/seed", json={"seed": "x"}).status_code == 422


def test_root_step_uses_the_default_workspace(client: httpx.Client, email_url: str) -> None:
    result = step(client, email_url, "send_email", to="bob@example.com", subject="root", body="b")
    assert "is_error" not in result
    snapshot = client.get(f"{email_url}/snapshot").json()
    assert snapshot["workspace_id"] == "default"
    assert any(e["subject"] == "root" for e in snapshot["state"]["emails"].values())
    assert client.get(f"{email_url}/workspaces/default/snapshot").json()["state"] == snapshot["state"]


def test_workspace_cap_returns_503() -> None:
    with BackgroundServer(create_app(EmailServer(), max_workspaces=2)) as server, httpx.Client() as http:
        assert http.post(f"{server.url}/workspaces", json={}).status_code == 201
        assert http.post(f"{server.url}/workspaces", json={}).status_code == 201
        full = http.post(f"{server.url}/workspaces", json={})
        assert full.status_code == 503 and "full" in full.json()["detail"]


async def test_concurrent_workspaces_are_isolated(email_url: str) -> None:
    async with httpx.AsyncClient(timeout=20) as http:

        async def drive(n: int) -> tuple[int, dict[str, Any]]:
            created = await http.post(f"{email_url}/workspaces", json={"seed": [SEED]})
            assert created.status_code == 201
            url = f"{email_url}{created.json()['path']}"
            for k in range(5):
                body = {
                    "action": {
                        "tool_name": "send_email",
                        "parameters": {"to": f"w{n}@x.org", "subject": f"{n}-{k}", "body": "b"},
                    }
                }
                response = await http.post(f"{url}/step", json=body)
                assert response.json()["state_diff"]["step_index"] == k
            snapshot = (await http.get(f"{url}/snapshot")).json()["state"]
            await http.delete(url)
            return n, snapshot

        results = await asyncio.gather(*(drive(n) for n in range(20)))
    for n, snapshot in results:
        sent = {k: e for k, e in snapshot["emails"].items() if k.startswith("sent-")}
        assert sorted(sent) == [f"sent-{i:04d}" for i in range(1, 6)]
        assert sorted(e["subject"] for e in sent.values()) == [f"{n}-{k}" for k in range(5)]
        assert {tuple(e["to"]) for e in sent.values()} == {(f"w{n}@x.org",)}


# -- framework behaviour with a second, minimal server ------------------------------------------------------


class CounterServer(BuiltinToolServer):
    """A tiny real server used to exercise the framework paths the email server never takes."""

    name: ClassVar[str] = "counter"

    def tools(self) -> list[ToolDefinition]:
        schema = {"type": "object", "properties": {"by": {"type": "integer", "description": "step"}}, "required": []}
        return [
            ToolDefinition(
                name="bump_then_crash", description="mutates, then raises", parameters=schema, mutates_state=True
            ),
            ToolDefinition(
                name="bump_then_refuse", description="mutates, then ToolError", parameters=schema, mutates_state=True
            ),
            ToolDefinition(name="bump", description="mutates", parameters=schema, mutates_state=True),
            ToolDefinition(name="read_crash", description="reads, then raises", parameters=schema, mutates_state=False),
        ]

    def new_state(self) -> State:
        return {"counters": {"c": {"value": 0}}}

    def seed(self, state: State, seed_files: list[Any]) -> None:
        for item in seed_files:
            state["counters"]["c"]["value"] = int(item["start"])

    def call(self, ctx: ToolContext, tool_name: str, params: dict[str, Any]) -> str:
        if tool_name == "read_crash":
            raise RuntimeError("disk on fire")
        ctx.state["counters"]["c"]["value"] += params.get("by", 1)
        if tool_name == "bump_then_crash":
            raise ZeroDivisionError("division by zero")
        if tool_name == "bump_then_refuse":
            raise ToolError("refused after bumping")
        return str(ctx.state["counters"]["c"]["value"])

    def render_text(self, state: State) -> str:
        return f"counter={state['counters']['c']['value']}"


def test_tool_exceptions_become_error_observations_and_roll_back(client: httpx.Client) -> None:
    with BackgroundServer(create_app(CounterServer())) as server:
        url = new_workspace(client, server.url, [{"start": 10}])
        crash = step(client, url, "bump_then_crash")
        assert crash == {"observation": "Tool bump_then_crash failed: division by zero", "is_error": True}
        refused = step(client, url, "bump_then_refuse", by=5)
        assert refused == {"observation": "refused after bumping", "is_error": True}
        assert step(client, url, "read_crash") == {
            "observation": "Tool read_crash failed: disk on fire",
            "is_error": True,
        }
        assert state(client, url) == {"counters": {"c": {"value": 10}}}  # failed calls left no trace
        ok = step(client, url, "bump", by=2)
        assert ok["observation"] == "12"
        assert ok["state_diff"]["summary"] == "~1 counters changed"  # default noun: the collection name
        assert ok["state_diff"]["step_index"] == 3
        assert client.get(f"{url}/snapshot").json()["text"] == "counter=12"
        malformed = client.post(f"{server.url}/workspaces", json={"seed": [{"begin": 1}]})
        assert malformed.status_code == 400 and "'start'" in malformed.json()["detail"]
