"""Reads workspace_summary.md from the coding server after the run, as SimLab's custom_coding verifier does."""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any


def _call_tool(tool_server_url: str, tool_name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    payload = json.dumps({"action": {"tool_name": tool_name, "parameters": parameters}}).encode()
    request = urllib.request.Request(
        f"{tool_server_url}/step", data=payload, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read().decode("utf-8"))


def verify(run_artifacts: Any) -> tuple[bool, str]:
    tool_server_url = run_artifacts.server_url("coding-env") or run_artifacts.tool_server_url
    if not tool_server_url:
        return False, "coding-env tool server URL was not available to the verifier."
    observation = _call_tool(tool_server_url, "read_file", {"path": "workspace_summary.md"}).get("observation", {})
    if observation.get("is_error"):
        return False, f"workspace_summary.md missing: {observation.get('text', '')}"
    summary_text = str(observation.get("text", "")).lower()
    if len(summary_text.strip()) < 40:
        return False, "workspace_summary.md exists but is too short to be a useful summary."
    tools = ("read_file", "write_file", "list_dir", "run_command")
    if sum(1 for name in tools if re.search(rf"\b{name}\b", summary_text)) < 2:
        return False, "workspace_summary.md should mention at least two available tools."
    return True, "workspace_summary.md describes the available tools."
