"""A scenario's seed files are read once: every rollout of a run sends the seeds the run started with."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError

SCENARIOS_ROOT = Path(__file__).resolve().parents[2] / "eval_pipelines" / "builtin" / "scenarios"


def test_seed_payloads_are_read_once_and_survive_an_edit_of_the_folder(tmp_path: Path) -> None:
    shutil.copytree(SCENARIOS_ROOT, tmp_path / "scenarios")
    catalog = ScenarioCatalog(tmp_path / "scenarios")
    scenario = next(s for s in catalog.all() if any(t.seed_data for t in s.tasks().values()))
    task = next(t for t in scenario.tasks().values() if t.seed_data)
    server, names = next((server, names) for server, names in task.seed_data.items() if names)
    first = scenario.seed_payload(task, server)
    assert len(first) == len(names) and all(item is not None for item in first)
    for name in names:
        (scenario.root / "seed_data" / name).write_text("not json any more", encoding="utf-8")
    assert scenario.seed_payload(task, server) == first
    # A fresh load of the folder reads the files as they are now.
    fresh = ScenarioCatalog(tmp_path / "scenarios").get(scenario.scenario_id)
    with pytest.raises(ScenarioError, match="invalid JSON"):
        fresh.seed_payload(fresh.task(task.task_id), server)
