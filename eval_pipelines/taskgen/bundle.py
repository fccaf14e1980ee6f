"""Turn task-generation results into a scenario folder the catalog loads (scenarios/<id>/ of the project).

Layout written (see scenarios.catalog)::

    template.json       scenario id, name, description, tool servers (from the tasks)
    tasks/<id>.json     the task files, their inline `seed_files` moved out to seed_data/
    seed_data/<file>    the seed files the tasks name
    servers/<name>.json the tool definitions of each server of the user's (a `SimulatedServer`), moved out of
                        the tasks' inline `simulated_servers`: a sweep's tool host serves a stand-in for it
    verifiers/          __init__.py plus every verifier; `*.FAILED.py` files are kept for inspection but no
                        task lists them (the verifier loader skips them)
    npcs.json           the NPC profiles, when the results carry any (`npcs: [{filename: profiles.json, ...}]`)
    instructions/, rubrics/, skills.md, filter_summary.json   the rest of the results, for people

The folder is assembled next to its destination and renamed into place only after it loads cleanly, so a
catalog scan never sees a half-written scenario.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_pipelines.inputs.scenarios import (
    ScenarioError,
    ScenarioFiles,
    partition_key,
    safe_relative_path,
    staged_scenario_folder,
)
from eval_pipelines.schemas.scenarios import (
    SIMULATED_SERVERS_DIR,
    SIMULATED_SERVERS_KEY,
    SimulatedServer,
    Template,
    TemplateToolServer,
)
from eval_pipelines.schemas.taskgen import NPC_PROFILES_FILENAME, GeneratedFile, TaskGenResults
from eval_pipelines.taskgen.drafts import SEED_FILES_KEY


class BundleError(ValueError):
    """The results cannot become a scenario; the message names the file and the problem."""


def _safe_name(filename: str, what: str) -> str:
    try:
        path = safe_relative_path(filename)
    except ValueError as exc:
        raise BundleError(f"{what} {filename!r}: {exc}") from None
    if len(path.parts) != 1:
        raise BundleError(f"{what} {filename!r}: must be a plain file name")
    return path.name


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _title_from_skills(skills_md: str) -> str | None:
    for line in skills_md.splitlines():
        if line.startswith("# "):
            return line[2:].split(":")[0].strip() or None
    return None


def write_bundle(
    results: TaskGenResults,
    scenarios_dir: Path,
    scenario_id: str,
    *,
    name: str | None = None,
    description: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write `results` as scenario `scenario_id` under `scenarios_dir`; return the scenario folder."""
    try:
        template = Template(scenario_id=scenario_id, name=name or scenario_id)
    except ValueError as exc:
        raise BundleError(f"scenario_id {scenario_id!r}: {exc}") from None
    if not results.tasks:
        raise BundleError("the results hold no tasks")
    target = scenarios_dir / partition_key(scenario_id)
    if target.exists() and not overwrite:
        raise BundleError(f"{target} already exists (pass overwrite=True to replace it)")
    with staged_scenario_folder(target) as staging:
        servers = _write_contents(results, staging)
        template = template.model_copy(
            update={
                "name": name or _title_from_skills(results.skills_md) or scenario_id,
                "description": description
                or f"Generated from a toolset: {len(results.tasks)} task(s) with state-checking verifiers.",
                "tool_servers": [TemplateToolServer(name=s) for s in servers],
            }
        )
        _write(staging / "template.json", template.model_dump_json(indent=2, exclude={"num_tasks", "num_npcs"}))
        try:
            ScenarioFiles(root=staging, template=template).tasks()
        except ScenarioError as exc:
            raise BundleError(f"the generated scenario does not load: {exc}") from None
    return target


def _npc_profiles(file: GeneratedFile) -> Any:
    """The profiles of the results' NPC file (`profiles.json`, a JSON list)."""
    if _safe_name(file.filename, "NPC file") != NPC_PROFILES_FILENAME:
        raise BundleError(f"NPC file {file.filename!r}: expected {NPC_PROFILES_FILENAME!r}")
    try:
        return json.loads(file.content)
    except json.JSONDecodeError as exc:
        raise BundleError(f"NPC file {file.filename!r}: invalid JSON: {exc.msg}") from None


def _simulated_server(filename: str, name: Any, definition: Any) -> SimulatedServer:
    where = f"task file {filename!r}: {SIMULATED_SERVERS_KEY}.{name}"
    if not isinstance(definition, dict):
        raise BundleError(f"{where}: expected an object with the server's tools")
    try:
        return SimulatedServer.model_validate({**definition, "name": name})
    except ValueError as exc:
        raise BundleError(f"{where}: {exc}") from None


@dataclass
class _TaskFiles:
    """What the task files hold beside themselves: inline seeds and simulated servers, moved into files."""

    servers: list[str] = field(default_factory=list)
    seeds: dict[str, Any] = field(default_factory=dict)
    simulated: dict[str, SimulatedServer] = field(default_factory=dict)

    def take(self, filename: str, task: dict[str, Any]) -> None:
        """Take the task's inline seeds and simulated servers out of it; note the servers it uses."""
        for seed_name, content in (task.pop(SEED_FILES_KEY, None) or {}).items():
            seed_name = _safe_name(seed_name, "seed file")
            if self.seeds.setdefault(seed_name, content) != content:
                raise BundleError(f"seed file {seed_name!r}: two tasks give it different contents")
        for server_name, definition in (task.pop(SIMULATED_SERVERS_KEY, None) or {}).items():
            server = _simulated_server(filename, server_name, definition)
            if self.simulated.setdefault(server.name, server) != server:
                raise BundleError(f"simulated server {server.name!r}: two tasks give it different tools")
        for ref in task.get("tool_servers") or []:
            if isinstance(ref, dict) and isinstance(ref.get("name"), str) and ref["name"] not in self.servers:
                self.servers.append(ref["name"])

    def write(self, root: Path) -> None:
        for seed_name, content in self.seeds.items():
            _write(root / "seed_data" / seed_name, json.dumps(content, indent=2) + "\n")
        for server in self.simulated.values():
            _write(root / SIMULATED_SERVERS_DIR / f"{server.name}.json", server.model_dump_json(indent=2) + "\n")


def _write_contents(results: TaskGenResults, root: Path) -> list[str]:
    """Write every file; return the tool servers the tasks use, in first-use order."""
    taken = _TaskFiles()
    for file in results.tasks:
        filename = _safe_name(file.filename, "task file")
        try:
            task = json.loads(file.content)
        except json.JSONDecodeError as exc:
            raise BundleError(f"task file {filename!r}: invalid JSON: {exc.msg}") from None
        if not isinstance(task, dict):
            raise BundleError(f"task file {filename!r}: expected a JSON object")
        taken.take(filename, task)
        task_id = task.get("task_id")
        stem = _safe_name(f"{task_id}.json", "task id") if isinstance(task_id, str) else filename
        _write(root / "tasks" / stem, json.dumps(task, indent=2) + "\n")
    taken.write(root)
    verifiers = root / "verifiers"
    _write(
        verifiers / "__init__.py", '"""Generated verifiers (task generation); *.FAILED.py failed a quality gate."""\n'
    )
    for file in results.verifiers:
        _write(verifiers / _safe_name(file.filename, "verifier"), file.content)
    for folder, files in (("instructions", results.instructions), ("rubrics", results.rubrics)):
        for file in files:
            _write(root / folder / _safe_name(file.filename, folder[:-1]), file.content)
    for file in results.npcs:
        _write(root / "npcs.json", json.dumps(_npc_profiles(file), indent=2) + "\n")
    if results.skills_md:
        _write(root / "skills.md", results.skills_md)
    if results.filter_summary is not None:
        _write(root / "filter_summary.json", json.dumps(results.filter_summary, indent=2) + "\n")
    return taken.servers
