"""The bundle's own file for the task's `simlab.verifiers.custom_coding` module (SimLab looks in the bundle's
verifiers/ first): the summary must name at least two of the workspace's tools."""

from __future__ import annotations

import re

from ._workspace import read_workspace_file

TOOLS = ("read_file", "write_file", "list_dir", "run_command")


def verify(run_artifacts):
    text, problem = read_workspace_file(run_artifacts, "workspace_summary.md")
    if text is None:
        return False, problem
    named = [tool for tool in TOOLS if re.search(rf"\b{tool}\b", text)]
    if len(named) < 2:
        return False, f"workspace_summary.md names {named}; at least two of {list(TOOLS)} expected"
    return True, f"workspace_summary.md names {', '.join(named)}"
