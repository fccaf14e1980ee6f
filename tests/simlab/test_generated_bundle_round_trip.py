"""A bundle made by the service's task generation, written out in SimLab's format and imported again, is the same
scenario: the same tasks, servers, seeds, NPC profiles and verifiers as the scenario the generation wrote itself."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.simlab_bundle import import_bundle
from eval_pipelines.schemas.taskgen import TaskGenResults
from eval_pipelines.taskgen import parse_request, write_bundle
from eval_pipelines.taskgen.default import DefaultTaskGenerator
from tests.taskgen.conftest import calendar_toolset


def simlab_bundle(results: TaskGenResults, root: Path) -> Path:
    """The results as a SimLab task bundle folder: tasks/, verifiers/, npcs/profiles.json, rubrics/."""
    for folder, files in (("tasks", results.tasks), ("verifiers", results.verifiers), ("rubrics", results.rubrics)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for file in files:
            (root / folder / file.filename).write_text(file.content)
    for file in results.npcs:
        (root / "npcs").mkdir(exist_ok=True)
        (root / "npcs" / file.filename).write_text(file.content)
    return root


def test_a_generated_bundle_reimported_keeps_its_seeds_npcs_and_servers(tmp_path: Path) -> None:
    request = parse_request(
        {
            "toolset": calendar_toolset(),
            "num_tasks": 3,
            "workspace": {"email_domain": "acme.test", "agent_email": "ops@acme.test"},
            "npcs": [{"role": "Chief Financial Officer", "typical_asks": ["book the budget review"]}],
        }
    )
    results = asyncio.run(DefaultTaskGenerator(endpoint=None).generate(request, lambda _: None))
    assert results.npcs, "the generation was asked for an NPC"
    write_bundle(results, tmp_path / "generated", "cal_gen:1.0.0")
    report = import_bundle(simlab_bundle(results, tmp_path / "bundle"), tmp_path / "imported", "cal_gen:1.0.0")

    generated = ScenarioCatalog(tmp_path / "generated").get("cal_gen")
    imported = ScenarioCatalog(tmp_path / "imported").get("cal_gen")
    assert report.unrunnable == {} and report.notes == {}  # nothing of it is left out
    assert set(imported.tasks()) == set(generated.tasks()) and len(report.tasks) == 3
    assert [p.model_dump() for p in imported.npcs] == [p.model_dump() for p in generated.npcs] != []
    assert imported.template.tool_servers == generated.template.tool_servers
    for task_id, original in generated.tasks().items():
        again = imported.task(task_id)
        assert [s.name for s in again.tool_servers] == [s.name for s in original.tool_servers]
        assert again.simlab_servers == {s.name: s.name for s in original.tool_servers}
        assert again.npc_profiles == original.npc_profiles
        assert again.verifiers == original.verifiers and again.reference_actions == original.reference_actions
        for server in original.seed_data:
            assert imported.seed_payload(again, server) == generated.seed_payload(original, server), (task_id, server)
        assert (
            again.simlab_origin["meta"]
            == json.loads(next(f.content for f in results.tasks if json.loads(f.content)["task_id"] == task_id))["meta"]
        )
