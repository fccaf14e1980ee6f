"""A SimLab task's `npcs` entries and its bundle's NPC profiles lose nothing on import: an NPC SimLab's NPC chat
plays (traits, context, quirks) is played here by the chat server with its personality, with or without a
profile; a `secret` becomes one of the task's npc_secrets (never listed, never in a seed file); a profile's
rocketchat_username is the NPC's chat handle; everything else is noted with its field named."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.inputs.simlab_bundle import ImportReport, import_bundle
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.sim.npc import parse_persona_prompt
from eval_pipelines.toolservers.base import ToolContext
from eval_pipelines.toolservers.chat import ChatServer
from eval_pipelines.toolservers.npc import npc_seed_item
from tests.support.ask_sarah import ASK_SARAH_ID, SARAH, make_ask_sarah_the_only_task
from tests.support.npc_responder import RecordingResponder
from tests.support.task_runs import run_one_task

from .test_bundle_import import SCENARIO_ID, write_bundle

TASK = "ask_projector"
AISHA_CHAT = {
    "id": "aisha_okafor",
    "name": "Aisha Okafor",
    "role": "facilities_lead",
    "traits": "busy, precise",
    "context": "The Room 4B projector bulb was replaced on Monday.",
    "quirks": "answers in one line",
    "secret": "the spare bulb is in cabinet 7",
}


def _import(tmp_path: Path, npcs: list[Any], profiles: list[dict[str, Any]] | None = None, **task: Any) -> Any:
    bundle = write_bundle(tmp_path)
    path = bundle / "tasks" / f"{TASK}.json"
    raw = json.loads(path.read_text())
    raw["npcs"] = npcs
    raw.update(task)
    path.write_text(json.dumps(raw))
    if profiles is not None:
        (bundle / "npcs" / "profiles.json").write_text(json.dumps(profiles))
    report = import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID)
    scenario = ScenarioCatalog(tmp_path / "scenarios").get(SCENARIO_ID)
    return report, scenario, scenario.task(TASK)


def _chat_as_the_engine_seeds_it(scenario: ScenarioFiles, task: Task) -> tuple[ChatServer, RecordingResponder, Any]:
    """The chat server seeded as a rollout seeds it: the task's chat seed files, then its NPCs and their secrets."""
    responder = RecordingResponder()
    server = ChatServer(responder=responder)
    state = server.new_state()
    seed = [*copy.deepcopy(scenario.seed_payload(task, "chat")), npc_seed_item(task.npc_profiles, task.npc_secrets)]
    server.seed(state, seed)
    return server, responder, ToolContext(workspace_id="w", state=state)


def _notes(report: ImportReport) -> list[str]:
    return report.notes.get(TASK, [])


def test_an_npc_simlab_chats_with_is_played_with_its_personality_and_keeps_its_secret(tmp_path: Path) -> None:
    report, scenario, task = _import(tmp_path, [AISHA_CHAT])
    assert report.unrunnable == {} and _notes(report) == []  # every field has its place
    assert [p.profile_id for p in task.npc_profiles] == ["aisha_okafor"]
    assert task.npc_secrets == {"aisha_okafor": {"value": "the spare bulb is in cabinet 7"}}
    # SimLab starts its NPC chat for such a task: here the chat server, under SimLab's namespace
    assert {s.name for s in task.tool_servers} == {"email", "chat"}
    assert task.simlab_servers == {"email": "email-env", "chat": "npc-chat"}
    # the secret is never in a seed file (seed files are listed to callers); the personality is
    seed_text = "".join(p.read_text() for p in (scenario.root / "seed_data").iterdir())
    assert "cabinet 7" not in seed_text and "busy, precise" in seed_text

    server, responder, ctx = _chat_as_the_engine_seeds_it(scenario, task)
    reply = server.call(ctx, "npc_send_message", {"to": "Aisha Okafor", "message": "Is the projector fixed?"})
    assert "Aisha Okafor replied" in reply
    persona = parse_persona_prompt(responder.prompts[0][0].content or "")
    assert persona is not None
    assert (persona.occupation, persona.part, persona.traits, persona.situation, persona.style) == (
        "Facilities",
        "facilities_lead",
        "busy, precise",
        "The Room 4B projector bulb was replaced on Monday.",
        "answers in one line",
    )
    assert persona.secret == "the spare bulb is in cabinet 7" and persona.reveal_when == ()


def test_an_npc_with_no_profile_is_played_from_its_entry_as_simlab_plays_it(tmp_path: Path) -> None:
    name_only = {"name": "Raj Patel", "role": "vendor", "quirks": "very formal"}
    report, scenario, task = _import(tmp_path, [{"id": "aisha_okafor"}, SARAH, name_only])
    assert report.unrunnable == {}
    assert [p.profile_id for p in task.npc_profiles] == ["aisha_okafor", "sarah_chen", "raj_patel"]
    sarah = task.npc_profiles[1]
    assert (sarah.first_name, sarah.last_name, sarah.email, sarah.occupation) == (
        "Sarah",
        "Chen",
        "sarah_chen@example.com",
        "frustrated_customer",
    )
    assert {p.profile_id for p in scenario.npcs} == {"aisha_okafor", "sarah_chen", "raj_patel"}
    assert (
        "npcs[1]: no profile 'sarah_chen' in npcs/profiles.json; made from its name and role, with the address "
        "sarah_chen@example.com" in _notes(report)
    )
    # SimLab's agent writes to an NPC by the name npc_list_contacts gives it
    server, responder, ctx = _chat_as_the_engine_seeds_it(scenario, task)
    contacts = server.call(ctx, "npc_list_contacts", {})
    assert "Sarah Chen <sarah_chen@example.com> - frustrated_customer" in contacts and "Raj Patel" in contacts
    assert "Sarah Chen replied" in server.call(ctx, "npc_send_message", {"to": "Sarah Chen", "message": "Hi"})
    persona = parse_persona_prompt(responder.prompts[0][0].content or "")
    assert persona is not None and persona.traits == "impatient" and persona.part == ""  # role said once
    assert persona.occupation == "frustrated_customer"


def test_what_has_no_place_in_an_npc_entry_is_noted_by_field(tmp_path: Path) -> None:
    plain = {"id": "aisha_okafor", "name": "A. Okafor", "role": "lead", "mood": "grumpy", "secret": "likes tea"}
    report, _, task = _import(tmp_path, [plain])
    assert report.unrunnable == {}
    notes = _notes(report)
    assert "npcs[0].mood: has no place in a scenario's NPC; left out" in notes
    assert "npcs[0].name: SimLab reads it only with traits, context or quirks; left out" in notes
    assert "npcs[0].role: SimLab reads it only with traits, context or quirks; left out" in notes
    # the secret is kept, and the report says that this task gives no conversation in which it could come up
    assert task.npc_secrets == {"aisha_okafor": {"value": "likes tea"}}
    assert "npcs[0].secret: kept, but the task has no chat server: no conversation can reveal it" in notes
    assert {s.name for s in task.tool_servers} == {"email"}


def test_a_secret_the_task_already_has_a_bad_secret_and_a_missing_role_are_noted(tmp_path: Path) -> None:
    own = {"aisha_okafor": {"value": "4827#", "reveal_when": ["door code"]}}
    no_role = {"id": "sarah_chen", "name": "Sarah Chen", "traits": ["impatient", "curt"], "secret": {"v": 1}}
    report, _, task = _import(tmp_path, [AISHA_CHAT, no_role], npc_secrets=own)
    notes = _notes(report)
    assert task.npc_secrets == own
    assert "npcs[0].secret: the task's npc_secrets has one for 'aisha_okafor', which is kept; left out" in notes, notes
    assert "npcs[1].secret: expected text or {value, reveal_when: [topics]}; left out" in notes
    assert "npcs[1].role: missing (SimLab's NPC chat skips such an NPC); played here without one" in notes
    [seed] = [item for item in _chat_seed_npcs(tmp_path) if item["profile_id"] == "sarah_chen"]
    assert seed["personality"]["traits"] == "impatient, curt"


def _chat_seed_npcs(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "scenarios" / "ops_bundle_1.0.0" / "seed_data" / f"{TASK}_npc_chat.json"
    return list(json.loads(path.read_text())["npcs"])


def test_a_profile_keeps_its_chat_handle_and_notes_every_key_it_has_no_place_for(tmp_path: Path) -> None:
    profiles = [
        {
            "profile_id": "aisha_okafor",
            "first_name": "Aisha",
            "last_name": "Okafor",
            "email": "aisha.okafor@example.com",
            "occupation": "Facilities",
            "title": "Facilities Lead",
            "rocketchat_username": "aisha.okafor",
            "personality_and_values": "Calm and thorough.",
            "age": 41,
        },
        {"profile_id": "no_mail", "first_name": "No", "last_name": "Mail", "age": 30},
    ]
    report, scenario, task = _import(tmp_path, [AISHA_CHAT], profiles)
    assert task.npc_profiles[0].username == "aisha.okafor"
    bundle_notes = report.notes["bundle"]
    assert "npcs/profiles.json: age (in 1 profile(s)): no place in a profile; left out" in bundle_notes
    assert (
        "npcs/profiles.json: personality_and_values (in 1 profile(s)): no place in a profile; left out" in bundle_notes
    )
    assert "npcs/profiles.json: title (in 1 profile(s)): occupation is kept; left out" in bundle_notes
    assert "npcs/profiles.json[1]: missing ['email']; left out" in bundle_notes
    # the handle takes effect: the agent may write to the NPC by it
    server, _, ctx = _chat_as_the_engine_seeds_it(scenario, task)
    assert "Aisha Okafor replied" in server.call(ctx, "npc_send_message", {"to": "@aisha.okafor", "message": "Hi"})


# -- end to end: a rollout talks to the imported NPC, and a SimLab verifier sees it under npc-chat --------------------

NPC_VERIFIER = '''"""Checks, as a SimLab verifier would, that the agent wrote to Sarah on npc-chat."""

import json
import urllib.request


def verify(run_artifacts):
    sent = [
        m["content"]
        for m in run_artifacts.messages
        if m.get("role") == "tool"
        and isinstance(m.get("content"), dict)
        and m["content"].get("tool_server") == "npc-chat"
        and m["content"].get("tool_name") == "npc_send_message"
        and not m["content"].get("is_error")
    ]
    if not sent:
        return False, "no npc_send_message call on npc-chat"
    if "Sarah Chen replied" not in str(sent[0].get("summary")):
        return False, "Sarah did not reply: " + str(sent[0].get("summary"))
    url = run_artifacts.server_url("npc-chat")
    body = json.dumps({"action": {"tool_name": "npc_list_contacts", "parameters": {}}}).encode()
    request = urllib.request.Request(url + "/step", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = json.loads(response.read().decode("utf-8")).get("observation", {}).get("text", "")
    if "frustrated_customer" not in text:
        return False, "npc_list_contacts does not list Sarah as a frustrated customer: " + text
    return True, "Sarah was asked about her order"
'''


@pytest.mark.slow
def test_a_rollout_talks_to_the_imported_npc_and_a_simlab_verifier_sees_it_under_npc_chat(
    tmp_path: Path, local_backend: Callable[..., EvaluationBackend]
) -> None:
    bundle = write_bundle(tmp_path)
    make_ask_sarah_the_only_task(bundle, "sarah_order", NPC_VERIFIER, secret="she is a reseller")
    report = import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID)
    assert report.unrunnable == {}, report.lines()
    backend = local_backend(tmp_path / "data", ScenarioCatalog(tmp_path / "scenarios"))

    def run(model: str) -> Any:
        rollout = run_one_task(backend, SCENARIO_ID, ASK_SARAH_ID, model=model, run_label="npc")
        [verdict] = rollout.result.verifiers
        return verdict

    oracle = run("sim-oracle")
    assert oracle.success and oracle.message == "Sarah was asked about her order", oracle.message
    idle = run("sim-noop")
    assert not idle.success and not idle.is_error and idle.message == "no npc_send_message call on npc-chat"
