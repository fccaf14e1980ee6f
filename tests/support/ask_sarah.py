"""The "ask Sarah" SimLab task: an agent with no tool server of its own messages the NPC Sarah Chen on npc-chat.
Tests of NPC imports, NPC chat transcripts and scenario guidance each write it into a bundle with their own
verifier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SARAH = {"id": "sarah_chen", "name": "Sarah Chen", "role": "frustrated_customer", "traits": "impatient"}
ASK_SARAH_ID = "ask_sarah"
ASK_SARAH_TEXT = "Message Sarah Chen and ask her which order she is waiting for."
SARAH_CONTEXT = "Her laptop order #4411 is three weeks late."


def ask_sarah_task(verifier_module: str, *, text: str = ASK_SARAH_TEXT, **npc: Any) -> dict[str, Any]:
    """The task file, checked by the bundle's `verifiers/<verifier_module>.py`; `npc` adds to Sarah's entry."""
    return {
        "meta": {"task_id": ASK_SARAH_ID, "display_name": "Ask Sarah", "difficulty": "easy", "category": "support"},
        "task": text,
        "tool_servers": [],
        "npcs": [{**SARAH, "context": SARAH_CONTEXT, **npc}],
        "verifiers": [{"func": "python_module", "module": f"collinear.scenarios.ops.verifiers.{verifier_module}"}],
        "reference_actions": [
            {
                "tool_server": "chat",
                "tool_name": "npc_send_message",
                "parameters": {"to": "Sarah Chen", "message": "Which order are you waiting for?"},
            }
        ],
    }


def make_ask_sarah_the_only_task(
    bundle: Path, verifier_module: str, verifier_source: str, *, text: str = ASK_SARAH_TEXT, **npc: Any
) -> None:
    """Turn a copy of a bundle into one whose only task is "ask Sarah", checked by `verifier_source` (saved as
    `verifiers/<verifier_module>.py`)."""
    for task_file in (bundle / "tasks").glob("*.json"):
        task_file.unlink()
    (bundle / "verifiers" / f"{verifier_module}.py").write_text(verifier_source)
    task = ask_sarah_task(verifier_module, text=text, **npc)
    (bundle / "tasks" / f"{ASK_SARAH_ID}.json").write_text(json.dumps(task))
