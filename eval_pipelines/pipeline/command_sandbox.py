"""Whether a sweep's model-chosen commands run in the namespace sandbox here, said where a person looks: a line in
the sweep's output and the `eval_run` materialisation's metadata. Only scenarios that serve `run_command` (the
files server) are concerned; the probe is the tool host's own (`toolservers/files.py`), run once per process."""

from __future__ import annotations

from collections.abc import Iterable

from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.toolservers.files import SANDBOX_NAMESPACES, CommandSandbox, FilesServer, command_sandbox


def runs_commands(scenario: ScenarioFiles) -> bool:
    return any(server.name == FilesServer.name for server in scenario.template.tool_servers)


def sandbox_for(scenarios: Iterable[ScenarioFiles]) -> CommandSandbox | None:
    """How `run_command` is isolated on this host, or None when none of the scenarios serves it."""
    return command_sandbox() if any(runs_commands(s) for s in scenarios) else None


def sandbox_warning(sandbox: CommandSandbox | None) -> str | None:
    """The line a sweep prints when its commands are not in namespaces; None when they are (or none run)."""
    if sandbox is None or sandbox.mode == SANDBOX_NAMESPACES:
        return None
    return (
        f"warning: run_command is NOT sandboxed in namespaces on this host ({sandbox.mode}"
        + (f": {sandbox.reason}" if sandbox.reason else "")
        + "): a model's commands can read every file this user can read, see every process and reach the network"
    )
