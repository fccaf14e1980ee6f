"""Lists the workspace's root folder on the coding server after the run and looks for the summary in it."""

from __future__ import annotations

import json
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
    observation = _call_tool(tool_server_url, "list_dir", {"path": "."}).get("observation", {})
    if observation.get("is_error"):
        return False, f"listing the workspace failed: {observation.get('text', '')}"
    listing = str(observation.get("text", ""))
    if "workspace_summary.md" not in listing:
        return False, f"workspace_summary.md is not in the workspace: {listing}"
    return True, "workspace_summary.md is in the workspace."
