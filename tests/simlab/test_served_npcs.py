"""An imported task's NPCs served back in the task listing carry what SimLab's `tasks seed`/`run` read of them
(`npc_profiles[]`: profile_id, first_name, last_name, email, rocketchat_username), and the chat server that plays
the NPCs SimLab's NPC chat would play is listed as `npc-chat`. Never served: an NPC's secret, and its chat
personality (SimLab builds a listed task's `npcs` from the profile ids alone, so it reads none of it, and the
listing may be read by the agent under test: an NPC's `context` is for the agent to find out by asking)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from eval_pipelines.inputs.simlab_bundle import import_bundle
from tests.service.eval_service_support import READ_KEY, running_service

from .test_bundle_import import SCENARIO_ID, write_bundle
from .test_bundle_npcs import AISHA_CHAT, TASK

PROFILE = {
    "profile_id": "aisha_okafor",
    "first_name": "Aisha",
    "last_name": "Okafor",
    "email": "aisha.okafor@example.com",
    "occupation": "Facilities",
    "rocketchat_username": "aisha.okafor",
}


def test_a_listed_tasks_npcs_carry_simlabs_fields_and_never_a_secret(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path)
    path = bundle / "tasks" / f"{TASK}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "npcs": [AISHA_CHAT]}))
    (bundle / "npcs" / "profiles.json").write_text(json.dumps([PROFILE]))
    assert import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID).unrunnable == {}

    with running_service(tmp_path / "data", scenarios_dir=tmp_path / "scenarios") as service:
        response = httpx.get(
            f"{service.url}/v1/scenarios/{SCENARIO_ID}/tasks", headers={"API-Key": READ_KEY}, timeout=30
        )
    assert response.status_code == 200, response.text
    [task] = [t for t in response.json()["tasks"] if t["task_id"] == TASK]
    listed: list[dict[str, Any]] = task["npc_profiles"]
    assert listed == [PROFILE], listed
    assert "npc-chat" in {server["name"] for server in task["tool_servers"]}
    for private in (AISHA_CHAT["secret"], AISHA_CHAT["context"], AISHA_CHAT["quirks"]):
        assert private not in response.text
