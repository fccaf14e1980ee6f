"""Helpers shared by the tool-server tests (imported relatively so test packages stay self-contained)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

SEED: dict[str, Any] = {
    "account": "ops@example.com",
    "contacts": [
        {"email": "Bob@Example.com", "name": "Bob Stone", "title": "Buyer"},
        {"email": "carol@example.com", "name": "Carol Diaz", "title": "Controller"},
    ],
    "emails": [
        {
            "id": "e-001",
            "from": "bob@example.com",
            "to": ["ops@example.com"],
            "subject": "Quarterly invoice",
            "body": "Please pay invoice Q-17 by Friday.",
            "timestamp": "2025-03-10T08:00:00Z",
        },
        {
            "id": "e-002",
            "from": "Carol Diaz <carol@example.com>",
            "to": "ops@example.com",
            "cc": ["bob@example.com"],
            "subject": "Re: Budget review",
            "body": "The BUDGET meeting is on Monday.",
            "timestamp": "2025-03-11T09:30:00+00:00",
        },
        {
            "id": "e-003",
            "from": "ops@example.com",
            "to": ["carol@example.com"],
            "subject": "Status",
            "body": "All shipments on time.",
            "timestamp": "2025-03-09T17:00:00Z",
        },
    ],
}


def new_workspace(client: httpx.Client, base_url: str, seed: list[Any] | None = None) -> str:
    workspace_id = f"t-{uuid.uuid4().hex[:12]}"
    response = client.post(f"{base_url}/workspaces", json={"workspace_id": workspace_id, "seed": seed or []})
    assert response.status_code == 201, response.text
    return f"{base_url}{response.json()['path']}"


def step(client: httpx.Client, url: str, tool_name: str, **parameters: Any) -> dict[str, Any]:
    response = client.post(f"{url}/step", json={"action": {"tool_name": tool_name, "parameters": parameters}})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def state(client: httpx.Client, url: str) -> dict[str, Any]:
    response = client.get(f"{url}/snapshot")
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["state"]
    return result
