"""Reads a file of the coding workspace the way a SimLab verifier does: POST <server_url>/step read_file."""

from __future__ import annotations

import json
import urllib.request


def read_workspace_file(run_artifacts, path):
    """(text, None) or (None, why not)."""
    url = run_artifacts.server_url("coding-env")
    if not url:
        return None, "no coding-env server to read the workspace from"
    body = json.dumps({"action": {"tool_name": "read_file", "parameters": {"path": path}}}).encode()
    request = urllib.request.Request(f"{url}/step", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        observation = json.loads(response.read()).get("observation", {})
    if observation.get("is_error"):
        return None, f"{path} cannot be read: {observation.get('text', '')}"
    return str(observation.get("text", "")), None
