"""Acceptance: from the calendar server's `/tools` listing alone (real HTTP), the schema-driven generator makes a
20-task scenario with the requested complexity mix; written with write_bundle, the simulated oracle passes it
and the no-op model fails it, through the embedded evaluation service."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.runs import RunLaunchRequest
from eval_pipelines.taskgen import SchemaTaskGenerator, apportion, parse_request, toolset_from_server, write_bundle

MIX = {"easy": 0.25, "medium": 0.45, "hard": 0.30}
SCENARIO_ID = "calendar_generated:1.0.0"
ACTIONS = {"easy": {1}, "medium": {2}, "hard": {3, 4}}


def _pass_rate(service: EvaluationBackend, task_ids: list[str], model: str) -> float:
    request = RunLaunchRequest.model_validate(
        {
            "scenario_id": SCENARIO_ID,
            "task_ids": task_ids,
            "model_config": {"model": model, "base_url": "sim://local", "api_key": "x"},
            "rollout_count": 1,
            "run_name": f"taskgen-acceptance-{model}",
        }
    )
    run_id = service.launch_or_resume(request)
    service.complete_run(run_id, request, timeout_seconds=120)
    rollouts = service.list_rollouts(run_id)
    assert len(rollouts) == len(task_ids)
    return sum(1 for r in rollouts if r.result is not None and r.result.success) / len(rollouts)


def test_calendar_listing_becomes_a_scenario_oracle_passes_and_noop_fails(
    calendar_url: str, tmp_path: Path, local_backend: Callable[..., EvaluationBackend]
) -> None:
    toolset = toolset_from_server(calendar_url)
    assert {t["name"] for t in toolset} >= {"create_event", "update_event", "delete_event", "search_events"}
    assert all("inputSchema" in t for t in toolset)

    progress: list[str] = []
    request = parse_request({"toolset": toolset, "num_tasks": 20, "complexity": MIX})
    results = asyncio.run(SchemaTaskGenerator().generate(request, progress.append))

    tasks = [json.loads(f.content) for f in results.tasks]
    assert len(tasks) == 20
    wanted = apportion(20, MIX)
    assert wanted == {"easy": 5, "medium": 9, "hard": 6}
    assert Counter(t["difficulty"] for t in tasks) == wanted
    for task in tasks:
        assert len(task["reference_actions"]) in ACTIONS[task["difficulty"]], task["task_id"]
    assert results.filter_summary is not None
    assert results.filter_summary["produced"]["complexity"] == wanted
    assert results.filter_summary["verifiers"] == {"total": 20, "passed": 20, "failed": 0, "ungated": 0}
    assert len({t["description"] for t in tasks}) == 20
    assert any(p.startswith("Step 2/6: generating tasks (") for p in progress)
    assert progress[-1] == "Step 6/6: running quality gates (20/20)"

    scenarios = tmp_path / "scenarios"
    folder = write_bundle(results, scenarios, SCENARIO_ID)
    assert (folder / "verifiers" / "__init__.py").is_file()
    catalog = ScenarioCatalog(scenarios)
    assert catalog.ids() == [SCENARIO_ID]
    task_ids = sorted(catalog.get(SCENARIO_ID).tasks())

    service = local_backend(tmp_path / "data", catalog)
    assert _pass_rate(service, task_ids, "sim-oracle") >= 0.9
    assert _pass_rate(service, task_ids, "sim-noop") <= 0.1
