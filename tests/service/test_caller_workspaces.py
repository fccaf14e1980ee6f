"""The `tool_server_url`s of a task listing: each listing's URLs reach seeded workspaces of their own, in the
shapes SimLab reads, and they are reclaimed. An imported scenario is listed under its bundle's server names."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.runtime.local import shared_tool_host
from eval_pipelines.toolservers import EmailServer
from tests.service.eval_service_support import SCENARIO, WRITE_KEY, RunningService, running_service

IMPORTED = "bundle_mail:1.0.0"
BUNDLE_MAILS = [
    {"id": f"seed-{n:03d}", "from": f"sender{n}@example.com", "to": ["agent@example.com"], "subject": f"Note {n}",
     "body": f"body {n}", "timestamp": "2025-01-06T09:00:00Z"}
    for n in range(1, 4)
]  # fmt: skip


def _write_imported_scenario(root: Path) -> None:
    """A scenario as a SimLab bundle's import leaves it: built-in servers in the catalog, the bundle's names in
    `simlab_servers`, and an HTTP server of the user's own in `http_servers`."""
    folder = root / "bundle_mail_1.0.0"
    (folder / "tasks").mkdir(parents=True)
    (folder / "seed_data").mkdir()
    template = {
        "scenario_id": IMPORTED,
        "name": "Bundle mail",
        "tool_servers": [{"name": "email", "server_type": "http"}, {"name": "files", "server_type": "http"}],
    }
    (folder / "template.json").write_text(json.dumps(template))
    (folder / "seed_data" / "triage_email.json").write_text(
        json.dumps({"account": "agent@example.com", "emails": BUNDLE_MAILS})
    )
    task = {
        "task_id": "triage",
        "name": "Triage the inbox",
        "description": "Triage the inbox.",
        "tool_servers": [{"name": "email"}, {"name": "files"}],
        "simlab_servers": {"email": "email-env", "files": "coding-env"},
        "http_servers": {"erp-env": "http://user:secret@erp.example:9000/erp"},
        "seed_data": {"email": ["triage_email.json"]},
    }
    (folder / "tasks" / "triage.json").write_text(json.dumps(task))


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    root = tmp_path_factory.mktemp("caller-workspaces")
    scenarios = root / "scenarios"
    shutil.copytree(builtin_scenarios_dir() / "email_ops", scenarios / "email_ops")
    _write_imported_scenario(scenarios)
    with running_service(root / "data", scenarios_dir=scenarios) as running:
        yield running


@pytest.fixture
def http(service: RunningService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, headers={"API-Key": WRITE_KEY}, timeout=30) as client:
        yield client


def _urls(http: httpx.Client, scenario: str, task_id: str) -> dict[str, str]:
    listing = http.get(f"/v1/scenarios/{scenario}/tasks")
    assert listing.status_code == 200, listing.text
    task = next(t for t in listing.json()["tasks"] if t["task_id"] == task_id)
    return {server["name"]: server["tool_server_url"] for server in task["tool_servers"]}


def _step(url: str, tool: str, **parameters: Any) -> dict[str, Any]:
    # No API key: SimLab's environment sends none to a tool server.
    response = httpx.post(f"{url}/step", json={"action": {"tool_name": tool, "parameters": parameters}}, timeout=30)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _folder_count(url: str, folder: str) -> int:
    text = _step(url, "list_emails", folder=folder, limit=200)["observation"]["text"]
    if "is empty" in text:
        return 0
    match = re.match(rf"{folder}: (\d+) email", text)
    assert match, text
    return int(match.group(1))


def _mail_count(url: str) -> int:
    return sum(_folder_count(url, folder) for folder in ("inbox", "sent", "trash"))


def test_two_listings_are_two_seeded_workspaces(http: httpx.Client, service: RunningService) -> None:
    mailbox = json.loads((service.service.catalog.get(SCENARIO).seed_dir / "mailbox.json").read_text())
    first = _urls(http, SCENARIO, "email_ops_001")["email"]
    second = _urls(http, SCENARIO, "email_ops_001")["email"]
    assert first != second and first.startswith(f"{service.url}/ws/")
    assert _mail_count(first) == _mail_count(second) == len(mailbox["emails"]) == 22
    inbox = _folder_count(first, "inbox")
    assert inbox and _step(first, "delete_all_emails")["is_error"] is False
    assert _folder_count(first, "inbox") == 0  # the same URL keeps reaching the same workspace
    assert _folder_count(second, "inbox") == inbox  # a write through one listing's URL is not seen through another's
    # Each task of one listing has a workspace of its own too.
    assert _folder_count(_urls(http, SCENARIO, "email_ops_002")["email"], "inbox") == inbox


def test_tools_carry_input_schema_with_the_real_properties(http: httpx.Client) -> None:
    url = _urls(http, SCENARIO, "email_ops_001")["email"]
    tools = httpx.get(f"{url}/tools", timeout=30).json()["tools"]
    expected = {tool.name: tool.parameters for tool in EmailServer().tools()}
    assert {tool["name"] for tool in tools} == set(expected)
    send = next(tool for tool in tools if tool["name"] == "send_email")
    assert set(send["input_schema"]["properties"]) == {"to", "subject", "body", "cc"}
    assert all(tool["input_schema"] == tool["parameters"] == expected[tool["name"]] for tool in tools)


def test_urls_that_reach_nothing_say_so(http: httpx.Client, service: RunningService) -> None:
    url = _urls(http, SCENARIO, "email_ops_001")["email"]
    token_part = url.rsplit("/", 2)[0]
    unknown = httpx.get(f"{service.url}/ws/not-a-token/email_ops_001/email/tools", timeout=30)
    assert unknown.status_code == 404 and "list the scenario's tasks again" in unknown.json()["detail"]
    assert httpx.get(f"{token_part}/no_such_task/email/tools", timeout=30).status_code == 404
    no_server = httpx.get(f"{token_part}/email_ops_001/calendar/tools", timeout=30)
    assert no_server.status_code == 404 and "'calendar'" in no_server.json()["detail"]
    bad_body = httpx.post(f"{url}/step", json={"action": {}}, timeout=30)
    assert bad_body.status_code == 422


def test_workspaces_are_reclaimed_past_the_bound_and_when_idle(http: httpx.Client, service: RunningService) -> None:
    workspaces = service.service.caller_workspaces
    bound, idle = workspaces.max_workspaces, workspaces.idle_seconds
    workspaces.max_workspaces = 2
    try:
        urls = [_urls(http, SCENARIO, "email_ops_001")["email"] for _ in range(3)]
        for url in urls:
            assert _mail_count(url) == 22
        assert len(workspaces) == workspaces.max_workspaces
        on_tool_host = [entry.url for entry in workspaces._workspaces.values()]
        gone = httpx.get(f"{urls[0]}/tools", timeout=30)  # the least recently used
        assert gone.status_code == 410 and "list the tasks again" in gone.json()["detail"]
        assert _mail_count(urls[2]) == 22
        workspaces.idle_seconds = 0.0
        assert httpx.get(f"{urls[1]}/tools", timeout=30).status_code == 410
        assert len(workspaces) == 0
        # Deleted on the tool host too, not only forgotten here.
        assert all(httpx.get(f"{url}/health", timeout=30).status_code == 404 for url in on_tool_host)
    finally:
        workspaces.max_workspaces, workspaces.idle_seconds = bound, idle


async def test_concurrent_first_calls_to_one_url_make_one_workspace(
    http: httpx.Client, service: RunningService
) -> None:
    workspaces = service.service.caller_workspaces
    url = _urls(http, SCENARIO, "email_ops_003")["email"]
    before = len(workspaces)
    async with httpx.AsyncClient(timeout=30) as client:
        answers = await asyncio.gather(*(client.get(f"{url}/tools") for _ in range(8)))
    assert [answer.status_code for answer in answers] == [200] * 8
    assert len(workspaces) == before + 1


def test_a_workspace_lost_with_the_tool_host_answers_410(http: httpx.Client) -> None:
    url = _urls(http, SCENARIO, "email_ops_001")["email"]
    assert _mail_count(url) == 22
    shared_tool_host().restart()  # as the monitor replaces a host that stopped answering
    lost = httpx.get(f"{url}/tools", timeout=30)
    assert lost.status_code == 410 and "list the tasks again" in lost.json()["detail"]
    assert _mail_count(_urls(http, SCENARIO, "email_ops_001")["email"]) == 22  # a new listing works at once


def test_an_imported_scenario_is_listed_under_its_bundle_names(http: httpx.Client) -> None:
    template = next(t for t in http.get("/v1/scenarios").json() if t["scenario_id"] == IMPORTED)
    assert [s["name"] for s in template["tool_servers"]] == ["email-env", "coding-env", "erp-env"]
    listing = http.get(f"/v1/scenarios/{IMPORTED}/tasks").json()
    task = listing["tasks"][0]
    servers = {s["name"]: s["tool_server_url"] for s in task["tool_servers"]}
    assert list(servers) == ["email-env", "coding-env", "erp-env"]
    assert servers["email-env"].endswith("/triage/email-env") and servers["coding-env"].endswith("/triage/coding-env")
    assert servers["erp-env"] == "http://erp.example:9000/erp"  # the user's server as it is, without credentials
    assert task["seed_data"] == {"email-env": ["triage_email.json"]}
    assert [m["subject"] for m in task["seed_emails"]] == [m["subject"] for m in BUNDLE_MAILS]
    assert _mail_count(servers["email-env"]) == len(BUNDLE_MAILS)
    files_tools = httpx.get(f"{servers['coding-env']}/tools", timeout=30).json()["tools"]
    assert any(tool["name"] == "read_file" and tool["input_schema"]["properties"] for tool in files_tools)
    # The built-in name reaches nothing: the listing named the server `email-env`.
    token_part = servers["email-env"].rsplit("/", 1)[0]
    assert httpx.get(f"{token_part}/email/tools", timeout=30).status_code == 404


def test_the_listing_s_spec_shape_and_the_built_in_names_are_unchanged(http: httpx.Client) -> None:
    template = next(t for t in http.get("/v1/scenarios").json() if t["scenario_id"] == SCENARIO)
    assert template["tool_servers"] == [{"name": "email", "server_type": "http"}]
    task = next(t for t in http.get(f"/scenarios/{SCENARIO}/tasks").json()["tasks"] if t["task_id"] == "email_ops_001")
    assert [s["name"] for s in task["tool_servers"]] == ["email"] and task["seed_data"]["email"]
    assert "/ws/" not in json.dumps(http.get("/openapi.json").json()["paths"])
