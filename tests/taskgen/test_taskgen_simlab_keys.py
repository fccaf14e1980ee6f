"""What SimLab sends that its loose request types allow, and what its task loader reads of a generated bundle.

- `categories`, `workflows`, `npcs` and `complexity` are plain dicts in SimLab's request: any key may come.
  What can be used is (a category's `name` as its label, a workflow step given as an object), the rest is named
  in the job's notes, and nothing is refused for a key alone.
- A config's service entry (`operations`, `service_name`, `service_url`) says in the notes what became of it.
- Generated task files carry the mail, calendar and chat seeds inline in SimLab's lists as well, matching the
  seed files the import reads (and the import does not seed them twice).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.simlab_bundle import import_bundle
from eval_pipelines.inputs.simlab_seeds import channels
from eval_pipelines.schemas.taskgen import TaskGenResults
from eval_pipelines.taskgen import SchemaTaskGenerator, TaskGenRequestError, parse_request
from eval_pipelines.taskgen.drafts import SEED_FILES_KEY, seed_group_channels
from eval_pipelines.taskgen.request import resolve_request
from eval_pipelines.toolservers.calendar import CalendarServer
from eval_pipelines.toolservers.email import EmailServer
from tests.simlab.test_generated_bundle_round_trip import simlab_bundle


def _tools(*servers: Any) -> list[dict[str, Any]]:
    return [dict(t.as_task_gen_tool(), tool_server=s.name) for s in servers for t in s.tools()]


def _generate(body: dict[str, Any]) -> TaskGenResults:
    return asyncio.run(SchemaTaskGenerator().generate(parse_request(body), lambda _text: None))


def test_loose_keys_are_accepted_used_where_they_can_be_and_named_in_the_notes() -> None:
    body = {
        "toolset": _tools(EmailServer()),
        "num_tasks": 3,
        "categories": [{"name": "Inbox triage", "description": "sorting mail"}, {"id": "replies", "label": "Replies"}],
        "workflows": [{"name": "Reply", "steps": [{"action": "Read the email", "tool": "get_email"}], "owner": "x"}],
        "npcs": [{"role": "Account Manager", "typical_asks": "status updates", "name": "Dana"}],
        "complexity": {"easy": 1, "medium": 1, "hard": 0, "expert": 0.5},
    }
    resolved = resolve_request(body)
    assert [(c.id, c.label) for c in resolved.categories] == [("inbox_triage", "Inbox triage"), ("replies", "Replies")]
    assert resolved.workflows[0].steps == ["Read the email"]
    notes = _generate(body).filter_summary["notes"]  # type: ignore[index]
    for expected in (
        "categories[0]: description ignored",
        "workflows[0]: owner ignored",
        "npcs[0]: name ignored",
        "complexity: expert ignored",
    ):
        assert any(note.startswith(expected) for note in notes), (expected, notes)


def test_a_loose_item_still_needs_what_it_is_for() -> None:
    with pytest.raises(TaskGenRequestError) as caught:
        parse_request({"toolset": _tools(EmailServer()), "categories": [{"description": "no id, no label"}]})
    assert caught.value.field == "categories.0" and "id or a label" in caught.value.message
    with pytest.raises(TaskGenRequestError) as caught:
        parse_request({"toolset": _tools(EmailServer()), "complexity": {"easy": "lots"}})
    assert caught.value.field == "complexity.easy"


def test_a_service_entry_says_what_became_of_its_operations_and_url() -> None:
    entry = {"name": "Email", "operations": ["send", "read"], "service_name": "email-env",
             "service_url": "http://email-env:8040"}  # fmt: skip
    notes = _generate({"toolset": [entry], "num_tasks": 2}).filter_summary["notes"]  # type: ignore[index]
    (note,) = [n for n in notes if n.startswith("Email:")]
    assert "built-in 'email' server" in note and "operations ['send', 'read']" in note
    assert "'http://email-env:8040' is SimLab's own container" in note


def test_generated_task_files_carry_their_seeds_in_simlabs_lists_too(tmp_path: Path) -> None:
    results = _generate({"toolset": _tools(EmailServer(), CalendarServer()), "num_tasks": 6})
    counted = {"seed_emails": 0, "seed_calendar_events": 0}
    for file in results.tasks:
        task = json.loads(file.content)
        seeds = {server: task[SEED_FILES_KEY][names[0]] for server, names in task["seed_data"].items()}
        emails = seeds.get("email", {}).get("emails", [])
        assert [e["subject"] for e in task.get("seed_emails", [])] == [e["subject"] for e in emails]
        events = seeds.get("calendar", {}).get("events", [])
        assert [e["summary"] for e in task.get("seed_calendar_events", [])] == [e["title"] for e in events]
        for key in counted:
            counted[key] += len(task.get(key, []))
    assert all(counted.values()), counted

    # imported again, each server is seeded from its seed file alone, not from the inline lists as well
    report = import_bundle(simlab_bundle(results, tmp_path / "bundle"), tmp_path / "imported", "office:1.0.0")
    assert report.unrunnable == {}
    imported = ScenarioCatalog(tmp_path / "imported").get("office")
    for file in results.tasks:
        task = json.loads(file.content)
        again = imported.task(task["task_id"])
        for server, names in task["seed_data"].items():
            assert again.seed_data[server] == names
            assert imported.seed_payload(again, server) == [task[SEED_FILES_KEY][names[0]]]


def test_a_chat_seed_becomes_simlabs_group_channels_and_reads_back_the_same() -> None:
    scenario = ScenarioCatalog().get("team_chat")
    seed = json.loads((scenario.root / "seed_data" / "chat.json").read_text())
    listed = seed_group_channels([seed], scenario.npcs)
    assert [c["channel_name"] for c in listed] == [c["name"] for c in seed["channels"]]
    profile_ids = {p.profile_id for p in scenario.npcs}
    senders = [m["from_profile_id"] for c in listed for m in c["messages"]]
    assert senders and all(s in profile_ids or "@" in s for s in senders) and set(senders) & profile_ids
    assert all(set(c["member_profile_ids"]) <= profile_ids for c in listed)
    # SimLab's lists, read by the import, give the chat server the same channels and messages
    profiles = {p.profile_id: p.model_dump() for p in scenario.npcs}
    back = channels(listed, profiles, "t", lambda *_: None)
    assert back is not None
    assert [(c["name"], [(m["from"], m["text"]) for m in c["messages"]]) for c in back["channels"]] == [
        (c["name"], [(m["from"], m["text"]) for m in c["messages"]]) for c in seed["channels"]
    ]
