"""Checks the mail to Aisha the way a SimLab verifier does: transcript objects and a live query."""

import json
import urllib.request


def _step(url, tool_name, parameters):
    body = json.dumps({"action": {"tool_name": tool_name, "parameters": parameters}}).encode()
    request = urllib.request.Request(f"{url}/step", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read().decode("utf-8"))


def verify(run_artifacts):
    sends = [
        m["content"]
        for m in run_artifacts.messages
        if m.get("role") == "tool"
        and isinstance(m.get("content"), dict)
        and m["content"].get("tool_server") == "email-env"
        and m["content"].get("tool_name") == "send_email"
    ]
    if not sends:
        return False, "no send_email call on email-env"
    url = run_artifacts.server_url("email-env")
    if not url:
        return False, "email-env URL was not available"
    observation = _step(url, "list_emails", {"folder": "sent"}).get("observation", {})
    if observation.get("is_error"):
        return False, "listing the sent folder failed: " + str(observation.get("text"))
    text = str(observation.get("text", "")).lower()
    if "aisha.okafor@example.com" not in text or "projector" not in text:
        return False, "no mail about the projector reached Aisha"
    return True, "Aisha was asked about the projector"
