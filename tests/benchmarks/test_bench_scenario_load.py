"""benchmarks/scenario_load.py at its smallest: each side loads the same scenario in a child of its own tree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import scenario_load
from eval_pipelines.inputs.scenarios import ScenarioCatalog

REPO = Path(__file__).resolve().parents[2]


def test_each_side_loads_every_task_from_its_own_tree(tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(REPO / "eval_pipelines", other / "eval_pipelines", ignore=shutil.ignore_patterns("__pycache__"))

    assert scenario_load.main(["--tasks", "12", "--repeats", "2", "--against", str(other), "--out", str(tmp_path)]) == 0

    report = json.loads((tmp_path / "scenario_load.json").read_text())
    assert set(report["results"]) == set(scenario_load.SHAPES)
    for by_side in report["results"].values():
        assert set(by_side) == {"this", "against"}
        for side in by_side.values():
            assert side["tasks"] == 12
            assert len(side["cpu_seconds"]) == 2 and all(s > 0 for s in side["cpu_seconds"])
    assert "| a seed per task | this checkout |" in (tmp_path / "scenario_load.md").read_text()


def test_a_seed_per_task_gives_every_task_its_own_files(tmp_path: Path) -> None:
    scenarios_dir = scenario_load.write_scenario(tmp_path, 3, scenario_load.SHAPES[1])
    scenario = ScenarioCatalog(scenarios_dir).get("bench_email")
    named = [name for task in scenario.tasks().values() for names in task.seed_data.values() for name in names]
    assert len(named) == len(set(named)) == 6  # two seed files a task, none shared
    assert all(scenario.seed_path(name).is_file() for name in named)


def test_a_checkout_without_the_package_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        scenario_load.main(["--tasks", "2", "--repeats", "1", "--against", str(tmp_path), "--out", ""])

    assert exit_info.value.code == 2
