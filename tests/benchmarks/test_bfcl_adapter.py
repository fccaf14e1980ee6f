"""A BFCL category materialised as an ordinary scenario: tasks with a scripted user, held-out functions
unlocked at their turn, the FC handler's tools in the seed, and our verifier package with its gold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.benchmarks import catalog
from eval_pipelines.benchmarks.bfcl import adapter
from eval_pipelines.benchmarks.toolserver import tool_definition
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.verifiers.loader import load_verifier_package

FAMILY = "bfcl_multi_turn_miss_func"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> ScenarioFiles:
    data = tmp_path_factory.mktemp("data")
    folder = catalog.materialise(FAMILY, data)
    assert catalog.is_materialised(FAMILY, data)
    return ScenarioCatalog(folder.parent).get(adapter.scenario_id(FAMILY))


def _gold(scenario: ScenarioFiles) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((scenario.verifiers_dir / adapter.GOLD_FILE).read_text(encoding="utf-8"))
    return loaded


def test_every_entry_is_a_multi_turn_task_as_upstream_runs_it(scenario: ScenarioFiles) -> None:
    tasks = scenario.tasks()
    assert len(tasks) == 200 and scenario.template.scenario_id == f"{FAMILY}:{adapter.UPSTREAM_VERSION}"
    task = tasks["multi_turn_miss_func_0"]
    assert task.user is not None and task.user.kind == "scripted"
    assert task.description == task.user.turns[0] and task.description.startswith("Move 'final_report.pdf'")
    # turn 3 holds no user message upstream: it only adds the held-out `sort`
    assert task.user.turns[3] is None and task.user.unlocks == {"3": ["sort"]}
    assert task.user.unlock_message == "I have updated some more functions you can choose from. What about now?"
    assert task.system_prompt == "" and task.bare_tool_names and task.benchmark == adapter.BENCHMARK
    assert task.max_steps_per_turn == 21 and task.pass_at_max_steps
    gold = _gold(scenario)["multi_turn_miss_func_0"]
    assert [len(turn) for turn in task.reference_turns] == [len(turn["calls"]) for turn in gold["turns"]]
    # a positional gold argument (`sort('final_report.pdf')`) is named by the method's signature
    assert [(c.tool_name, c.parameters) for c in task.reference_turns[3]] == [
        ("sort", {"file_name": "final_report.pdf"})
    ]
    assert task.reference_actions == [call for turn in task.reference_turns for call in turn]


def test_the_seed_lists_the_involved_classes_tools_held_out_ones_included(scenario: ScenarioFiles) -> None:
    task = scenario.task("multi_turn_miss_func_0")
    (seed,) = scenario.seed_payload(task, adapter.SERVER)
    names = [tool_definition(raw).name for raw in seed["tools"]]
    assert "sort" in names and "cd" in names and "post_tweet" in names
    assert "book_flight" not in names  # TravelAPI is not involved in this entry
    assert sorted(seed["involved_classes"]) == ["GorillaFileSystem", "TwitterAPI"]
    assert seed["test_entry_id"] == "multi_turn_miss_func_0" and seed["long_context"] is False


def _artifacts(task_id: str, gold_turns: list[dict[str, Any]], *, turns: int) -> RunArtifacts:
    messages: list[dict[str, Any]] = []
    for index, turn in enumerate(gold_turns[:turns]):
        messages.append({"role": "user", "content": f"turn {index}"})
        if turn["calls"]:
            ids = [f"t{index}c{n}" for n in range(len(turn["calls"]))]
            wire = [{"id": i, "type": "function", "function": {"name": "x", "arguments": "{}"}} for i in ids]
            messages.append({"role": "assistant", "content": None, "tool_calls": wire})
            messages += [
                {"role": "tool", "tool_call_id": i, "content": r} for i, r in zip(ids, turn["results"], strict=True)
            ]
        messages.append({"role": "assistant", "content": "done"})
    states = [{adapter.SERVER: turn["state"]} for turn in gold_turns[:turns]]
    return RunArtifacts(task_id=task_id, task="", messages=messages, metadata={"turn_states": states})


def test_the_materialised_verifier_grades_with_its_gold(scenario: ScenarioFiles) -> None:
    package = load_verifier_package(scenario.verifiers_dir)
    verifier = package.get(adapter.VERIFIER_MODULE)
    assert verifier.verify is not None, verifier
    gold_turns = _gold(scenario)["multi_turn_miss_func_0"]["turns"]
    assert verifier.verify(_artifacts("multi_turn_miss_func_0", gold_turns, turns=len(gold_turns)))[0] is True
    passed, message = verifier.verify(_artifacts("multi_turn_miss_func_0", gold_turns, turns=len(gold_turns) - 1))
    assert passed is False and "force-terminated" in message
    passed, message = verifier.verify(_artifacts("multi_turn_miss_func_1", gold_turns, turns=len(gold_turns)))
    assert passed is False


def test_an_unknown_family_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown"):
        catalog.materialise("bfcl_multi_turn_nonexistent", Path("/nonexistent"))
