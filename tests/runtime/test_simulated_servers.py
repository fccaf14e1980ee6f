"""The tool host serves a scenario's simulated servers: a stand-in built from the tools' schemas, mounted on
first use under a name that is a digest of the definition, found again by a replaced host, deterministic."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError, ScenarioFiles
from eval_pipelines.runtime.local import SIMULATED_SERVER_FACTORY, LocalRuntime
from eval_pipelines.schemas.scenarios import SIMULATED_SERVERS_DIR, SIMULATED_SERVERS_KEY, SimulatedServer, Template
from eval_pipelines.taskgen import SchemaTaskGenerator, parse_request, write_bundle
from eval_pipelines.taskgen.bundle import BundleError
from eval_pipelines.toolservers.host import ToolServerHost, ToolServerProcess
from tests.service.eval_service_support import WRITE_KEY, running_service
from tests.support.user_toolsets import ticketing

HELPDESK = SimulatedServer.model_validate({"name": "tools", "tools": ticketing()})


def _create_ticket(base: str) -> dict[str, Any]:
    workspace = httpx.post(f"{base}/workspaces", json={"seed": []}).json()["path"]
    action = {"tool_name": "create_ticket", "parameters": {"subject": "Printer", "customer_email": "a@b.co",
                                                            "priority": "high"}}  # fmt: skip
    step = httpx.post(f"{base}{workspace}/step", json={"action": action})
    assert step.status_code == 200, step.text
    return dict(httpx.get(f"{base}{workspace}/snapshot", params={"text": "false"}).json()["state"])


def test_a_host_serves_the_stand_in_of_a_definition_under_its_digest() -> None:
    with ToolServerHost(["email"], simulated_factory=SIMULATED_SERVER_FACTORY) as host:
        url = host.simulated_url(HELPDESK)
        assert url.endswith("/" + HELPDESK.host_name)
        tools = httpx.get(f"{url}/tools").json()["tools"]
        assert [t["name"] for t in tools] == [t["name"] for t in ticketing()]
        assert tools[0]["parameters"] == ticketing()[0]["inputSchema"]
        first, again = _create_ticket(url), _create_ticket(url)
        assert first == again  # each workspace starts empty and numbers its tickets the same way
        assert list(first["tickets"]) == ["TIC-1001"]
        # a name no definition was registered under, or one that is no digest, is not served
        assert httpx.get(f"{host.url}/sim-{'0' * 32}/tools").status_code == 404
        assert httpx.get(f"{host.url}/sim-..%2Fetc/tools").status_code == 404


@pytest.mark.slow
def test_a_replaced_child_host_serves_the_registered_definitions_again() -> None:
    with ToolServerProcess(["email"], simulated_factory=SIMULATED_SERVER_FACTORY) as host:
        url = host.simulated_url(HELPDESK)
        before = _create_ticket(url)
        host.restart()
        assert _create_ticket(url) == before


def _scenario(root: Path, server: dict[str, Any]) -> ScenarioFiles:
    folder = root / "helpdesk"
    (folder / SIMULATED_SERVERS_DIR).mkdir(parents=True)
    template = Template(scenario_id="helpdesk", name="Helpdesk")
    (folder / "template.json").write_text(template.model_dump_json())
    (folder / SIMULATED_SERVERS_DIR / "tools.json").write_text(json.dumps(server))
    return ScenarioCatalog(root).get("helpdesk")


def test_a_scenario_gives_its_simulated_servers_the_hosts_urls_under_their_own_names(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, HELPDESK.model_dump(mode="json"))
    hosted = {"email": "http://h/email", HELPDESK.host_name: "http://h/" + HELPDESK.host_name}
    assert scenario.tool_server_urls(hosted)["tools"] == hosted[HELPDESK.host_name]
    runtime = LocalRuntime(ScenarioCatalog(tmp_path))
    urls = scenario.tool_server_urls(runtime.tool_server_urls())
    assert httpx.get(f"{urls['tools']}/tools").json()["tools"][0]["name"] == "create_ticket"


def test_a_server_file_that_is_not_a_definition_names_the_file_and_the_field(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, {"name": "tools", "tools": []})
    with pytest.raises(ScenarioError, match=r"tools\.json.*tools"):
        _ = scenario.simulated_servers


def test_a_task_listing_reaches_the_simulated_server_of_a_generated_scenario(tmp_path: Path) -> None:
    request = parse_request({"toolset": ticketing(), "num_tasks": 2})
    results = asyncio.run(SchemaTaskGenerator().generate(request, lambda _text: None))
    write_bundle(results, tmp_path / "scenarios", "helpdesk")
    with running_service(tmp_path / "data", scenarios_dir=tmp_path / "scenarios") as service:
        listing = httpx.get(f"{service.url}/v1/scenarios/helpdesk/tasks", headers={"API-Key": WRITE_KEY}, timeout=30)
        assert listing.status_code == 200, listing.text
        task = listing.json()["tasks"][0]
        (server,) = task["tool_servers"]
        assert server["name"] == "tools" and server["tool_server_url"].startswith(f"{service.url}/ws/")
        tools = httpx.get(f"{server['tool_server_url']}/tools", timeout=30).json()["tools"]
        assert [t["name"] for t in tools] == [t["name"] for t in ticketing()]
        action = {"tool_name": "list_tickets", "parameters": {}}
        step = httpx.post(f"{server['tool_server_url']}/step", json={"action": action}, timeout=30)
        assert step.status_code == 200 and step.json()["is_error"] is False, step.text


def test_two_tasks_giving_one_simulated_server_different_tools_are_refused(tmp_path: Path) -> None:
    results = asyncio.run(
        SchemaTaskGenerator().generate(parse_request({"toolset": ticketing(), "num_tasks": 2}), lambda _text: None)
    )
    first, second = (json.loads(f.content) for f in results.tasks[:2])
    assert first[SIMULATED_SERVERS_KEY] == second[SIMULATED_SERVERS_KEY]  # the same server, carried by each task
    second[SIMULATED_SERVERS_KEY]["tools"]["tools"] = second[SIMULATED_SERVERS_KEY]["tools"]["tools"][:1]
    changed = results.tasks[1].model_copy(update={"content": json.dumps(second)})
    broken = results.model_copy(update={"tasks": [results.tasks[0], changed]})
    with pytest.raises(BundleError, match="simulated server 'tools': two tasks give it different tools"):
        write_bundle(broken, tmp_path, "helpdesk")


def test_a_definition_no_stand_in_can_serve_is_answered_with_the_reason() -> None:
    tools = ticketing()
    tools[1]["inputSchema"]["properties"]["ticket_id"]["pattern"] = "^[0-9a-f]{32}$"
    unservable = SimulatedServer.model_validate({"name": "tools", "tools": tools})
    with ToolServerHost(["email"], simulated_factory=SIMULATED_SERVER_FACTORY) as host:
        answer = httpx.get(f"{host.simulated_url(unservable)}/tools")
        assert answer.status_code == 500
        detail = answer.json()["detail"]
        assert "simulated server 'tools' cannot be served" in detail and "ticket_id" in detail, detail
        assert httpx.get(f"{host.url}/health").status_code == 200  # the host serves the others on
