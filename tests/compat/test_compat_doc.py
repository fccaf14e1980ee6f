"""docs/compat.md names every SimLab command, every field of SimLab's wire models and every task-file key SimLab's
loader reads, so a SimLab point cannot go unmentioned: the commands and models are read from SimLab 0.2.0 itself
(its click group and `simlab.api.schemas`, in its own venv), the task-file keys from the inventory below."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.compat.conftest import client_venv

COMPAT = Path(__file__).resolve().parents[2] / "docs" / "compat.md"

#: Every top-level task-file key a SimLab 0.2.0 code path reads (its task loader, `tasks info/seed/run/validate`,
#: the NPC chat, the verifier runner), and the `meta` keys and NPC entry keys it reads.
SIMLAB_TASK_KEYS = (
    "meta",
    "task",
    "name",
    "description",
    "difficulty",
    "category",
    "apps",
    "tool_servers",
    "seed_emails",
    "seed_calendar_events",
    "seed_group_channels",
    "npcs",
    "verifiers",
    "evaluators",
    "verifier_modules",
)
SIMLAB_META_KEYS = ("task_id", "display_name", "difficulty", "category")
SIMLAB_NPC_KEYS = ("id", "name", "role", "traits", "context", "quirks", "secret")

#: Walks SimLab's click group (lazily loaded commands included) and its API models, in SimLab's interpreter.
_SURVEY = """
import json, click
from pydantic import BaseModel
from simlab.cli.main import cli
import simlab.api.schemas as schemas

def walk(group, prefix):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        if isinstance(command, click.Group):  # a group does nothing itself: its commands have the rows
            yield from walk(command, f"{prefix} {name}")
        else:
            yield f"{prefix} {name}"

models = {
    name: list(model.model_fields)
    for name, model in vars(schemas).items()
    if isinstance(model, type) and issubclass(model, BaseModel) and model.__module__ == schemas.__name__
}
print(json.dumps({"commands": list(walk(cli, "simlab")), "models": models}))
"""


def _code_spans() -> list[str]:
    return re.findall(r"`([^`]+)`", COMPAT.read_text(encoding="utf-8"))


def _words_in_code() -> set[str]:
    return {word for span in _code_spans() for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span)}


def test_every_task_file_key_simlab_reads_is_in_the_doc() -> None:
    spans = _code_spans()
    words = _words_in_code()
    missing = [key for key in SIMLAB_TASK_KEYS if not any(re.match(rf"{key}\b", span) for span in spans)]
    missing += [f"meta.{key}" for key in SIMLAB_META_KEYS if f"meta.{key}" not in spans]
    missing += [f"npcs[].{key}" for key in SIMLAB_NPC_KEYS if key not in words]
    assert not missing, f"docs/compat.md does not name these task-file keys: {missing}"


@pytest.mark.slow
def test_every_simlab_command_and_wire_field_is_in_the_doc() -> None:
    python = client_venv("simlab") / "python"
    survey = subprocess.run([str(python), "-c", _SURVEY], capture_output=True, text=True, timeout=120, check=True)
    found = json.loads(survey.stdout)
    assert "simlab tasks run" in found["commands"] and len(found["commands"]) > 20  # the walk saw the whole CLI
    spans = _code_spans()
    missing = [command for command in found["commands"] if command not in spans]
    assert not missing, f"docs/compat.md has no row for these SimLab commands: {missing}"
    words = _words_in_code()
    assert "ScenarioTask" in found["models"] and "TaskGenRequest" in found["models"]
    unnamed = [f"{model}.{name}" for model, fields in found["models"].items() for name in fields if name not in words]
    assert not unnamed, f"docs/compat.md does not name these fields of SimLab's API models: {unnamed}"
