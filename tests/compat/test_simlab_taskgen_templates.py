"""SimLab's task-generation configs, run unchanged through the SimLab CLI against the local service.

Every template TOML of the sdist (`templates/task-gen/*.toml`: what `tasks-gen init --template` copies; the
five presets of `tasks-gen init --preset` are in test_simlab_cli) goes through `tasks-gen run --config`: each
job completes, or fails with a reason that names what is missing. A config whose categories, workflows, NPCs and
complexity carry keys SimLab's loose dict types allow is accepted, and the keys no generator reads are named
in the job's notes. The bundle written by `tasks-gen run --out` carries its seeds inline: SimLab's own task
loader (`tasks info --tasks-dir`) counts them.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest

from eval_pipelines.toolservers.calendar import CalendarServer
from eval_pipelines.toolservers.email import EmailServer
from tests.compat.conftest import EvalServiceUnderTest
from tests.compat.test_simlab_cli import SimLab, _check_bundle_with_simlab_loader, _generated_task_ids
from tests.support.simlab_sources import simlab_source_tree

pytestmark = pytest.mark.slow

TEMPLATES_DIR = Path("src/simlab/templates/task-gen")
#: Why a template's job may not complete: it names no tool (blank.toml is a form to fill in).
NO_TOOLSET = "toolset"


def _templates() -> list[Path]:
    return sorted((simlab_source_tree() / TEMPLATES_DIR).glob("*.toml"))


@pytest.fixture
def simlab(eval_service: EvalServiceUnderTest, tmp_path: Path) -> SimLab:
    return SimLab(eval_service, tmp_path)


def _job_id(output: str) -> str | None:
    found = re.search(r"Job ID:\s*(\S+)", output)
    return found.group(1) if found else None


def _results(simlab: SimLab, job_id: str) -> dict[str, Any]:
    response = httpx.get(
        f"{simlab.service.url}/v1/task-gen/{job_id}/results", headers={"API-Key": simlab.service.read_key}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_the_sdist_has_the_templates_this_suite_expects() -> None:
    names = {path.stem for path in _templates()}
    assert {"blank", "erp", "crm", "project-management", "coding", "hr", "customer-support"} <= names, names


@pytest.mark.parametrize("template", [p.name for p in _templates()])
def test_every_template_config_runs_or_fails_with_a_named_reason(simlab: SimLab, template: str) -> None:
    config = simlab_source_tree() / TEMPLATES_DIR / template
    raw = tomllib.loads(config.read_text())
    result = simlab.run("tasks-gen", "run", "--config", str(config), "--num-tasks", "3", "--out", "gen", "--verbose")
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    if not raw.get("toolset"):
        assert result.returncode != 0 and NO_TOOLSET in output.lower(), output
        return
    assert result.returncode == 0, output
    job_id = _job_id(output)
    assert job_id is not None, output
    _check_bundle_with_simlab_loader(simlab, simlab.cwd / "gen")
    notes = _results(simlab, job_id)["filter_summary"].get("notes", [])
    for entry in raw["toolset"]:
        if "operations" in entry:  # a service entry: the notes say what plays it, or that nothing does
            assert any(note.startswith(f"{entry['name']}:") for note in notes), (entry["name"], notes)


def test_a_config_with_keys_simlabs_loose_types_allow_is_accepted_and_the_keys_named(simlab: SimLab) -> None:
    config = tomllib.loads((simlab_source_tree() / TEMPLATES_DIR / "crm.toml").read_text())
    config["categories"][0]["description"] = "Score inbound leads"
    config["workflows"] = [{"name": "Qualify", "steps": [{"action": "Read the lead", "tool": "crm"}], "owner": "x"}]
    config["npcs"][0]["name"] = "Dana Reyes"
    config["generation"]["complexity"]["expert"] = 0.1
    path = simlab.cwd / "loose.toml"
    path.write_text(_toml(config))
    output = simlab.ok("tasks-gen", "run", "--config", str(path), "--num-tasks", "3", "--out", "gen", "--verbose")
    job_id = _job_id(output)
    assert job_id is not None, output
    notes = _results(simlab, job_id)["filter_summary"]["notes"]
    for expected in ("categories[0]: description", "workflows[0]: owner", "npcs[0]: name", "complexity: expert"):
        assert any(note.startswith(expected) for note in notes), (expected, notes)


def test_simlabs_task_loader_counts_the_seeds_of_a_generated_bundle(simlab: SimLab) -> None:
    tools = [dict(t.as_task_gen_tool(), tool_server=s.name) for s in (EmailServer(), CalendarServer())
             for t in s.tools()]  # fmt: skip
    (simlab.cwd / "tools.json").write_text(json.dumps(tools))
    simlab.ok("tasks-gen", "run", "--tools", "tools.json", "--num-tasks", "4", "--model", "schema", "--out", "gen")
    bundle = simlab.cwd / "gen"
    counted = 0
    for task_id in _generated_task_ids(bundle):
        task = json.loads((bundle / "tasks" / f"{task_id}.json").read_text())
        emails, events = len(task.get("seed_emails", [])), len(task.get("seed_calendar_events", []))
        info = simlab.ok("tasks", "info", "--tasks-dir", str(bundle), "--task", task_id)
        if emails:
            assert re.search(rf"Emails:\s+{emails}\b", info), info
        if events:
            assert re.search(rf"Calendar events:\s+{events}\b", info), info
        counted += emails + events
    assert counted > 0


def _toml(data: dict[str, Any]) -> str:
    """Enough TOML for a task-gen config (tables, arrays of tables, strings, numbers, lists, inline tables)."""

    def value(item: Any) -> str:
        if isinstance(item, dict):
            return "{ " + ", ".join(f"{k} = {value(v)}" for k, v in item.items()) + " }"
        if isinstance(item, list):
            return "[" + ", ".join(value(v) for v in item) + "]"
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, (int, float)):
            return repr(item)
        return json.dumps(str(item))

    lines: list[str] = []
    for key, item in data.items():
        if not isinstance(item, (dict, list)) or (
            isinstance(item, list) and not all(isinstance(i, dict) for i in item)
        ):
            lines.append(f"{key} = {value(item)}")
    for key, item in data.items():
        if isinstance(item, dict):
            lines += [f"[{key}]", *(f"{k} = {value(v)}" for k, v in item.items()), ""]
        elif isinstance(item, list) and item and all(isinstance(i, dict) for i in item):
            for entry in item:
                lines += [f"[[{key}]]", *(f"{k} = {value(v)}" for k, v in entry.items()), ""]
    return "\n".join(lines) + "\n"
