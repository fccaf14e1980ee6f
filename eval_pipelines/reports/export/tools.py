"""Kept apart from the transcripts: the tools a task offered are not in the catalog, so they come from the
scenarios on disk, and only the jsonl export reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError
from eval_pipelines.llm.types import wire_tool_name
from eval_pipelines.toolservers.registry import BUILTIN_SERVERS


class TaskTools:
    """The tools a task's agent is offered, in OpenAI's `tools` form, when they can be known from the scenario on
    disk: the definitions of its built-in tool servers, named as the reference agent names them. None for a task
    that also uses MCP servers (their tools are listed only at run time) or whose scenario is not on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._catalog: ScenarioCatalog | None = None
        self._by_scenario: dict[str, dict[str, list[dict[str, Any]] | None]] = {}

    def of(self, scenario_id: str, task_id: str) -> list[dict[str, Any]] | None:
        if scenario_id not in self._by_scenario:
            self._by_scenario[scenario_id] = self._load(scenario_id)
        return self._by_scenario[scenario_id].get(task_id)

    def _load(self, scenario_id: str) -> dict[str, list[dict[str, Any]] | None]:
        try:
            if self._catalog is None:
                self._catalog = ScenarioCatalog(self.root)
            scenario = self._catalog.get(scenario_id)
            if scenario.scenario_id != scenario_id:
                return {}  # a family id resolved to some version: not necessarily the one that ran
            tasks = scenario.tasks()
        except (KeyError, OSError, ScenarioError):
            return {}
        listed: dict[str, list[dict[str, Any]] | None] = {}
        for task_id, task in tasks.items():
            servers = [BUILTIN_SERVERS.get(ts.name) for ts in task.tool_servers]
            if task.mcp_servers or any(server is None for server in servers):
                listed[task_id] = None
                continue
            listed[task_id] = [
                {
                    "type": "function",
                    "function": {
                        "name": wire_tool_name(server.name, definition.name),
                        "description": definition.description,
                        "parameters": definition.parameters or {"type": "object", "properties": {}},
                    },
                }
                for server in servers
                if server is not None
                for definition in server.tool_definitions
            ]
        return listed
