"""Grow a new scenario from a toolset: the step behind the `generated_tasks` asset and `eval-pipelines
generate-tasks`, Dagster-free."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.schemas.taskgen import TaskGenResults
from eval_pipelines.taskgen import generate_scenario, toolset_from_server
from eval_pipelines.toolservers.registry import BUILTIN_SERVERS


def toolset_of_scenario(scenario: ScenarioFiles) -> list[dict[str, Any]]:
    """The tool definitions of a scenario's built-in tool servers, in task-generation form."""
    toolset: list[dict[str, Any]] = []
    for server in scenario.template.tool_servers:
        if server.name in BUILTIN_SERVERS:
            toolset += [
                {**t.as_task_gen_tool(), "tool_server": server.name} for t in BUILTIN_SERVERS[server.name]().tools()
            ]
    return toolset


def load_toolset(path: Path) -> list[dict[str, Any]]:
    """A toolset file: a JSON list of tool definitions, or a tool server's `{"tools": [...]}` listing."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    tools = raw.get("tools") if isinstance(raw, dict) else raw
    if not isinstance(tools, list):
        raise ValueError(f"{path}: expected a JSON list of tools or an object with a 'tools' list")
    return tools


def generate_into_catalog(
    toolset: list[dict[str, Any]],
    scenarios_dir: Path,
    scenario_id: str,
    options: Mapping[str, Any],
    *,
    progress: Callable[[str], None] = lambda _text: None,
    overwrite: bool = False,
) -> tuple[TaskGenResults, Path]:
    """Generate tasks for `toolset` (request fields in `options`) and write them as `scenarios_dir/<id>/`."""
    body = {"toolset": toolset, **{k: v for k, v in options.items() if v is not None}}
    return asyncio.run(generate_scenario(body, scenarios_dir, scenario_id, progress=progress, overwrite=overwrite))


__all__ = ["generate_into_catalog", "load_toolset", "toolset_from_server", "toolset_of_scenario"]
