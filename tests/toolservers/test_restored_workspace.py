"""A workspace created from a snapshot's state is the server's own workspace again: every built-in server rebuilds
its state type from it, so a verifier querying the restored workspace reads what the rollout left. The files
server writes the mirrored files back to a directory of their own, and refuses to pass off what it could not
restore."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.toolservers import create_app
from eval_pipelines.toolservers.base import BuiltinToolServer
from eval_pipelines.toolservers.calendar import PRIMARY_CALENDAR, CalendarServer
from eval_pipelines.toolservers.chat import ChatServer
from eval_pipelines.toolservers.email import EmailServer
from eval_pipelines.toolservers.files import MIRROR_CONTENT_BYTES, FilesServer
from eval_pipelines.toolservers.records import RecordsServer

from ._helpers import SEED, new_workspace, step

Call = tuple[str, dict[str, Any]]
#: server, seed, the calls of a "rollout" (mutating), the read a verifier makes afterwards
KINDS: dict[str, tuple[type[BuiltinToolServer], list[Any], list[Call], Call]] = {
    "email": (
        EmailServer,
        [SEED],
        [("send_email", {"to": "bob@example.com", "subject": "Invoice Q-17", "body": "Paid today."})],
        ("list_emails", {"folder": "sent"}),
    ),
    "calendar": (
        CalendarServer,
        [],
        [
            (
                "create_event",
                {
                    "calendar_uid": PRIMARY_CALENDAR,
                    "title": "Ops sync",
                    "start": "2025-03-13T10:00:00Z",
                    "end": "2025-03-13T10:30:00Z",
                },
            )
        ],
        ("list_events", {"calendar_uid": PRIMARY_CALENDAR}),
    ),
    "chat": (
        ChatServer,
        [{"channels": [{"name": "facilities", "topic": "rooms", "messages": []}]}],
        [("send_channel_message", {"channel": "#facilities", "message": "The projector bulb is out."})],
        ("get_room_history", {"room_id": "#facilities"}),
    ),
    "records": (
        RecordsServer,
        [],
        [("create_ticket", {"title": "Projector", "description": "The bulb is out.", "priority": "high"})],
        ("list_tickets", {}),
    ),
    "files": (
        FilesServer,
        [{"files": [{"path": "notes/todo.txt", "content": "buy bulbs\n"}]}],
        [("write_file", {"path": "workspace_summary.md", "content": "read_file and write_file are there.\n"})],
        ("read_file", {"path": "workspace_summary.md"}),
    ),
}


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as http:
        yield http


def _snapshot(client: httpx.Client, url: str) -> dict[str, Any]:
    response = client.get(f"{url}/snapshot", params={"text": "false"})
    assert response.status_code == 200, response.text
    state: dict[str, Any] = response.json()["state"]
    return state


def _restore(client: httpx.Client, base: str, state: dict[str, Any]) -> httpx.Response:
    return client.post(f"{base}/workspaces", json={"state": state})


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_restored_workspace_answers_as_the_one_the_rollout_left(client: httpx.Client, kind: str) -> None:
    server_class, seed, calls, read = KINDS[kind]
    with BackgroundServer(create_app(server_class())) as served:
        rollout = new_workspace(client, served.url, seed)
        for tool_name, parameters in calls:
            assert not step(client, rollout, tool_name, **parameters).get("is_error")
        final = _snapshot(client, rollout)
        created = _restore(client, served.url, final)
        assert created.status_code == 201, created.text
        restored = f"{served.url}{created.json()['path']}"
        assert _snapshot(client, restored) == final
        tool_name, parameters = read
        expected = step(client, rollout, tool_name, **parameters)
        again = step(client, restored, tool_name, **parameters)
        assert not again.get("is_error") and again["observation"] == expected["observation"]
        # The hosted shape SimLab's verifiers read answers the same.
        hosted = client.post(
            f"{restored}/hosted/step", json={"action": {"tool_name": tool_name, "parameters": parameters}}
        ).json()
        assert hosted["observation"] == {"text": expected["observation"], "is_error": False}


def test_the_restored_files_are_on_disk_apart_from_the_rollouts_workspace(client: httpx.Client) -> None:
    with BackgroundServer(create_app(FilesServer())) as served:
        rollout = new_workspace(client, served.url, [{"files": [{"path": "a/b.txt", "content": "one"}]}])
        final = _snapshot(client, rollout)
        restored = f"{served.url}{_restore(client, served.url, final).json()['path']}"
        step(client, rollout, "write_file", path="a/b.txt", content="changed after the snapshot")
        assert step(client, restored, "read_file", path="a/b.txt")["observation"] == "one"
        listing = step(client, restored, "list_dir", path="a")["observation"]
        assert "b.txt (3 bytes)" in listing
        ran = step(client, restored, "run_command", command="cat a/b.txt")["observation"]
        assert "stdout:\none" in ran


def test_a_file_whose_content_was_not_recorded_is_never_shown_as_the_rollouts(client: httpx.Client) -> None:
    big = "x" * (MIRROR_CONTENT_BYTES + 10)
    seed = [{"files": [{"path": "big.log", "content": big}, {"path": "small.txt", "content": "kept"}]}]
    with BackgroundServer(create_app(FilesServer())) as served:
        rollout = new_workspace(client, served.url, seed)
        final = _snapshot(client, rollout)
        assert final["files"]["big.log"]["truncated"]
        restored = f"{served.url}{_restore(client, served.url, final).json()['path']}"
        assert step(client, restored, "read_file", path="small.txt")["observation"] == "kept"
        assert f"big.log ({len(big)} bytes)" in step(client, restored, "list_dir")["observation"]
        refused = client.post(
            f"{restored}/hosted/step", json={"action": {"tool_name": "read_file", "parameters": {"path": "big.log"}}}
        )
        assert refused.status_code == 409 and "did not record the content of 'big.log'" in refused.json()["detail"]
        command = client.post(
            f"{restored}/step",
            json={"action": {"tool_name": "run_command", "parameters": {"command": "wc -c big.log"}}},
        )
        assert command.status_code == 409 and "1 file(s) (big.log)" in command.json()["detail"]


def test_a_recorded_content_that_does_not_hash_as_recorded_is_not_trusted(client: httpx.Client) -> None:
    with BackgroundServer(create_app(FilesServer())) as served:
        final = _snapshot(client, new_workspace(client, served.url, [{"files": [{"path": "a.txt", "content": "ok"}]}]))
        final["files"]["a.txt"]["content"] = "edited"
        restored = f"{served.url}{_restore(client, served.url, final).json()['path']}"
        refused = client.post(
            f"{restored}/step", json={"action": {"tool_name": "read_file", "parameters": {"path": "a.txt"}}}
        )
        assert refused.status_code == 409


@pytest.mark.parametrize(
    ("state", "detail"),
    [
        ({"files": {"../escape": {"path": "../escape", "type": "file", "size": 1, "content": "x"}}}, "../escape"),
        ({"files": {"a": {"path": "b", "type": "file", "size": 1, "content": "x"}}}, "'path' is its key"),
        ({"files": [], "other": {}}, "one collection"),
    ],
)
def test_a_snapshot_the_files_server_cannot_rebuild_is_refused_with_a_reason(
    client: httpx.Client, state: dict[str, Any], detail: str
) -> None:
    with BackgroundServer(create_app(FilesServer())) as served:
        response = _restore(client, served.url, state)
    assert response.status_code == 422 and detail in response.json()["detail"]
