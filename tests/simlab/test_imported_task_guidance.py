"""An imported SimLab task's instruction is what SimLab's `tasks run` gives the agent: the task text, then the
scenario guidance under "Scenario guidance:" (env.yaml's `scenario_guidance_md`, kept as the scenario's
guidance.md). Built-in tasks keep their description as the instruction, guided or not. The simulated oracle is
told its task by the request's `user` field, so it still finds and passes the task."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.hosted import simlab_instruction
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.simlab_bundle import import_bundle
from eval_pipelines.schemas.scenarios import Task
from tests.support.ask_sarah import ASK_SARAH_ID, ASK_SARAH_TEXT, make_ask_sarah_the_only_task
from tests.support.task_runs import run_one_task

from .test_bundle_import import SCENARIO_ID, write_bundle
from .test_bundle_npcs import NPC_VERIFIER

GUIDANCE = "Sign every message as the operations desk.\nNever promise a refund."
TEXT = ASK_SARAH_TEXT


def test_only_an_imported_tasks_instruction_carries_the_guidance() -> None:
    imported = Task(task_id="t", name="t", description=TEXT, simlab_origin={"text_key": "task"})
    assert simlab_instruction(imported, f"\n{GUIDANCE}\n") == f"{TEXT}\n\nScenario guidance:\n{GUIDANCE}"
    assert simlab_instruction(imported, None) == simlab_instruction(imported, "  ") == TEXT
    built_in = Task(task_id="t", name="t", description=TEXT)
    assert simlab_instruction(built_in, GUIDANCE) == TEXT


@pytest.mark.slow
def test_an_imported_tasks_rollout_is_instructed_with_the_scenario_guidance(
    tmp_path: Path, local_backend: Callable[..., EvaluationBackend]
) -> None:
    bundle = write_bundle(tmp_path)
    make_ask_sarah_the_only_task(bundle, "sarah_order", NPC_VERIFIER, text=TEXT)
    (bundle / "env.yaml").write_text(json.dumps({"name": "ops", "scenario_guidance_md": GUIDANCE}))
    assert import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID).unrunnable == {}
    backend = local_backend(tmp_path / "data", ScenarioCatalog(tmp_path / "scenarios"))
    rollout = run_one_task(backend, SCENARIO_ID, ASK_SARAH_ID, run_label="guided")
    assert rollout.result is not None
    [verdict] = rollout.result.verifiers
    assert verdict.success, verdict.message
    artifacts = backend.get_artifacts(rollout.rollout_id)
    assert artifacts is not None
    instructed = f"{TEXT}\n\nScenario guidance:\n{GUIDANCE}"
    assert artifacts.task == instructed
    assert any(m.get("role") == "user" and m.get("content") == instructed for m in artifacts.messages)
