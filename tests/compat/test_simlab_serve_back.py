"""Imported SimLab bundles served back to the SimLab CLI 0.2.0, unmodified, under the bundle's own server names;
and each caller's `tool_server_url`s as SimLab's own environment reaches them: seeded workspaces of its own.

The service serves a copy of the built-in scenarios plus bundles imported with the project's import machinery:
SimLab's cookbook bundles `langgraph-email-agent/examples/task-bundle` (`email-env`) and
`langgraph-vendor-agent/examples/task-bundle` (`email-env` and `erp-env`, a server the user names at import), from
the pinned sdist (`tests/support/simlab_sources.py`), and a small coding bundle in the format of SimLab's own
`env init` sample tasks (`coding-env`).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.simlab_bundle import import_bundle
from eval_pipelines.toolservers.email import EmailServer
from tests.compat.conftest import EvalServiceUnderTest, describe, run_client, served_eval_service
from tests.compat.test_simlab_cli import SimLab
from tests.support.simlab_sources import cookbook_dir

pytestmark = pytest.mark.slow

EMAIL_BUNDLE = Path("langgraph-email-agent", "examples", "task-bundle")
EMAIL_FAMILY = "langgraph_email"
VENDOR_BUNDLE = Path("langgraph-vendor-agent", "examples", "task-bundle")
VENDOR_FAMILY = "langgraph_vendor"
#: Where the user says the vendor bundle's ERP server answers (never called here: SimLab's tasks info only lists it).
ERP_URL = "http://127.0.0.1:9/erp"
CODING_FAMILY = "coding_bundle"
#: A task as SimLab's `env init` writes its coding samples (src/simlab/cli/env.py `_CODING_SAMPLE_TASKS`).
CODING_TASK = {
    "name": "Build a Word Count CLI",
    "category": "task",
    "apps": ["coding"],
    "meta": {"task_id": "build_cli_task", "display_name": "Build a Word Count CLI", "difficulty": "medium"},
    "task": "Build `wordcount.py`: count words, lines, and chars in a file.",
    "tool_servers": [{"name": "coding-env", "tool_server_url": "http://localhost:8020"}],
    "verifiers": [],
}


def _bundle_task(name: str) -> dict[str, Any]:
    task: dict[str, Any] = json.loads((cookbook_dir() / EMAIL_BUNDLE / "tasks" / f"{name}.json").read_text())
    return task


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalServiceUnderTest]:
    root = tmp_path_factory.mktemp("serve-back")
    scenarios = root / "scenarios"
    shutil.copytree(builtin_scenarios_dir(), scenarios)
    import_bundle(cookbook_dir() / EMAIL_BUNDLE, scenarios, f"{EMAIL_FAMILY}:1.0.0")
    servers = root / "servers.yaml"
    servers.write_text(f"servers:\n  erp-env:\n    url: {ERP_URL}\n")
    import_bundle(cookbook_dir() / VENDOR_BUNDLE, scenarios, f"{VENDOR_FAMILY}:1.0.0", servers_file=servers)
    coding = root / "coding-bundle"
    (coding / "tasks").mkdir(parents=True)
    (coding / "tasks" / "build_cli_task.json").write_text(json.dumps(CODING_TASK))
    import_bundle(coding, scenarios, f"{CODING_FAMILY}:1.0.0")
    with served_eval_service(root) as service:
        yield service


@pytest.fixture
def simlab(served: EvalServiceUnderTest, tmp_path: Path) -> SimLab:
    return SimLab(served, tmp_path)


def test_env_init_and_tasks_list_info_show_the_bundle_s_own_server_names(simlab: SimLab) -> None:
    out = simlab.ok("env", "init", "lg", "--template", EMAIL_FAMILY, "--non-interactive")
    assert f"Starting from template '{EMAIL_FAMILY}:1.0.0': email" in out, out
    env_yaml = (simlab.cwd / "environments" / "lg" / "env.yaml").read_text()
    assert f"template: {EMAIL_FAMILY}:1.0.0" in env_yaml and "- email" in env_yaml
    listing = simlab.ok("tasks", "list", "--env", "lg")
    tasks = sorted(p.stem for p in (cookbook_dir() / EMAIL_BUNDLE / "tasks").glob("*.json"))
    assert all(task in listing for task in tasks) and re.search(rf"\b{len(tasks)} task\(s\) total", listing), listing
    assert "email-env" in listing, listing  # the apps column: the task's servers by the bundle's names
    bundle_task = _bundle_task("meeting_prep_packet")
    info = simlab.ok("tasks", "info", "--env", "lg", "--task", "meeting_prep_packet")
    assert re.search(r"Apps:\s+email-env\b", info), info
    # SimLab points `email-env` at its own environment's mail server, as it does for its hosted scenarios.
    assert re.search(r"Tool servers:\s+email-env\s+http://localhost:\d+", info), info
    assert re.search(rf"Emails:\s+{len(bundle_task['seed_emails'])}\b", info), info
    assert f"collinear.scenarios.{EMAIL_FAMILY}.verifiers.meeting_prep_packet" in info, info

    out = simlab.ok("env", "init", "cb", "--template", CODING_FAMILY, "--non-interactive")
    assert f"Starting from template '{CODING_FAMILY}:1.0.0': coding" in out, out
    assert "- coding" in (simlab.cwd / "environments" / "cb" / "env.yaml").read_text()
    assert "coding-env" in simlab.ok("tasks", "list", "--env", "cb")
    info = simlab.ok("tasks", "info", "--env", "cb", "--task", "build_cli_task")
    assert re.search(r"Tool servers:\s+coding-env\s+http://localhost:\d+", info), info


def test_a_server_the_user_named_is_served_back_under_its_name(simlab: SimLab) -> None:
    out = simlab.ok("env", "init", "vendor", "--template", VENDOR_FAMILY, "--non-interactive")
    assert f"Starting from template '{VENDOR_FAMILY}:1.0.0': email, erp" in out, out
    listing = simlab.ok("tasks", "list", "--env", "vendor")
    assert "email-env, erp-env" in listing, listing
    info = simlab.ok("tasks", "info", "--env", "vendor", "--task", "vendor_erp_review")
    assert re.search(r"Apps:\s+email-env, erp-env\b", info), info
    assert re.search(r"email-env\s+http://localhost:\d+\s+erp-env\s+http://localhost:\d+", info), info


#: Run in SimLab's venv: two callers list a task through SimLab's client, rewrite its URLs as SimLab's CLI does,
#: and use them through SimLab's own environment and tool descriptors.
_TWO_CALLERS = r"""
import asyncio, json, re, sys
from simlab.agents.adapters.core import alist_tool_descriptors
from simlab.agents.environment import UnifiedToolEnvironment
from simlab.api.client import ScenarioManagerClient
from simlab.cli.tasks import _rewrite_tool_server_urls

scenario, task_id, server = sys.argv[1:4]


def listed():
    task = next(t for t in ScenarioManagerClient().list_scenario_tasks(scenario).tasks if t.task_id == task_id)
    local = _rewrite_tool_server_urls(task.model_dump(), {})
    return len(task.seed_emails), {s["name"]: s["tool_server_url"] for s in local["tool_servers"]}


async def count(env, folder):
    result = await env.acall_tool(server, "list_emails", {"folder": folder, "limit": 200})
    text = result.observation["observation"]["text"]
    found = re.match(rf"{folder}: (\d+) email", text)
    return int(found.group(1)) if found else 0


async def main():
    seeds, urls_a = listed()
    _, urls_b = listed()
    a, b = UnifiedToolEnvironment({server: urls_a[server]}), UnifiedToolEnvironment({server: urls_b[server]})
    folders = ("inbox", "sent", "trash")
    before = [sum([await count(env, f) for f in folders]) for env in (a, b)]
    inbox_b = await count(b, "inbox")
    deleted = await a.acall_tool(server, "delete_all_emails", {})
    descriptors = await alist_tool_descriptors(a)
    print(json.dumps({
        "seed_emails": seeds,
        "urls": [urls_a[server], urls_b[server]],
        "mails": before,
        "deleted": deleted.observation,
        "inbox_after": [await count(a, "inbox"), await count(b, "inbox")],
        "inbox_b_before": inbox_b,
        "schemas": {d.tool_name: d.input_schema for d in descriptors},
    }))


asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("scenario", "task_id", "server"),
    [("email_ops", "email_ops_001", "email"), (EMAIL_FAMILY, "meeting_prep_packet", "email-env")],
)
def test_two_callers_get_seeded_workspaces_of_their_own_with_real_schemas(
    simlab: SimLab, scenario: str, task_id: str, server: str
) -> None:
    script = simlab.cwd / "two_callers.py"
    script.write_text(_TWO_CALLERS)
    env = simlab.env(simlab.service.write_key)
    result = run_client([simlab.python, str(script), scenario, task_id, server], env, simlab.cwd)
    assert result.returncode == 0, describe(result)
    seen = json.loads(result.stdout.splitlines()[-1])
    first, second = seen["urls"]
    assert first != second, seen["urls"]
    assert all(re.match(rf"http://localhost:\d+/ws/[\w-]+/{task_id}/{server}$", url) for url in seen["urls"]), seen
    # each caller's workspace holds the task's seed mail
    assert seen["seed_emails"] > 0 and seen["mails"] == [seen["seed_emails"], seen["seed_emails"]], seen
    if scenario == "email_ops":
        assert seen["seed_emails"] == 22
    else:
        assert seen["seed_emails"] == len(_bundle_task(task_id)["seed_emails"])
    assert seen["deleted"]["is_error"] is False, seen["deleted"]
    # one caller's write is not seen by the other
    assert seen["inbox_after"] == [0, seen["inbox_b_before"]] and seen["inbox_b_before"] > 0, seen
    expected = {tool.name: tool.parameters for tool in EmailServer().tools()}
    assert seen["schemas"] == expected
    assert set(seen["schemas"]["send_email"]["properties"]) == {"to", "subject", "body", "cc"}


def test_the_served_listing_still_validates_in_simlab_s_client(simlab: SimLab) -> None:
    """Every listed task, built-in and imported, parses into SimLab's own response models."""
    code = (
        "import json\n"
        "from simlab.api.client import ScenarioManagerClient\n"
        "client = ScenarioManagerClient()\n"
        "print(json.dumps({s.scenario_id: [{ts.name: ts.tool_server_url for ts in task.tool_servers}"
        " for task in client.list_scenario_tasks(s.scenario_id).tasks] for s in client.list_scenarios()}))\n"
    )
    listed: dict[str, list[dict[str, str]]] = json.loads(simlab.python_ok(code).splitlines()[-1])
    names = {scenario: [list(servers) for servers in tasks] for scenario, tasks in listed.items()}
    assert names[f"{EMAIL_FAMILY}:1.0.0"] == [["email-env"]] * 3, names
    assert names[f"{CODING_FAMILY}:1.0.0"] == [["coding-env"]]
    assert names[f"{VENDOR_FAMILY}:1.0.0"] == [["email-env", "erp-env"]] * 2
    assert names["email_ops:1.0.0"] == [["email"]] * 12
    # the user's own server is listed where the user said it answers; the built-in ones at workspaces of the listing
    assert all(servers["erp-env"] == ERP_URL for servers in listed[f"{VENDOR_FAMILY}:1.0.0"])
    assert all("/ws/" in servers["email-env"] for servers in listed[f"{VENDOR_FAMILY}:1.0.0"])
