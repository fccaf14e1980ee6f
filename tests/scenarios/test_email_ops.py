"""The email_ops scenario: catalog shape, and every verifier against real replays on a real email server."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.scenarios.catalog import ScenarioCatalog, ScenarioFiles
from eval_pipelines.schemas.artifacts import META_STATE, META_STATE_DIFFS, RunArtifacts
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.schemas.tools import ToolCall, ToolCallResult
from eval_pipelines.toolservers import EmailServer, create_app

SCENARIOS_ROOT = Path(__file__).resolve().parents[2] / "data" / "scenarios"
SCENARIO_ID = "email_ops:1.0.0"

Action = tuple[str, dict[str, Any]]

#: one plausible mistake per task; each must be caught by the task's verifiers.
WRONG_VARIANTS: dict[str, list[Action]] = {
    "email_ops_001": [
        (
            "send_email",
            {
                "to": "aisha.okafor@example.org",
                "subject": "Room 4B projector",
                "body": "Is the Room 4B projector fixed?",
            },
        )
    ],
    "email_ops_002": [("delete_all_emails", {})],
    "email_ops_003": [("reply_to_email", {"email_id": "e-012", "body": "Confirmed, see you Thursday."})],
    "email_ops_004": [("forward_email", {"email_id": "e-016", "to": "david.kim@example.com"})],
    "email_ops_005": [
        (
            "send_email",
            {
                "to": "david.kim@example.com, elena.garcia@example.com",
                "subject": "Ops sync",
                "body": "Join us Thursday at 10:00 in Room 4B.",
            },
        )
    ],
    "email_ops_006": [
        ("forward_email", {"email_id": "e-005", "to": "security@example.com"}),
        ("reply_to_email", {"email_id": "e-005", "body": "Here is my username: agent"}),
    ],
    "email_ops_007": [
        ("reply_to_email", {"email_id": "e-008", "body": "Client meals over $250 need pre-approval, so $312.40 does."})
    ],
    "email_ops_008": [
        ("forward_email", {"email_id": "e-004", "to": "elena.garcia@example.com, david.kim@example.com"}),
        ("reply_to_email", {"email_id": "e-004", "body": "Sorry about A-55120; Elena Garcia will follow up."}),
    ],
    "email_ops_009": [
        ("delete_email", {"email_id": "e-010"}),
        ("delete_email", {"email_id": "e-014"}),
        ("delete_email", {"email_id": "e-019"}),
        ("delete_email", {"email_id": "e-009"}),  # the summit invitation is work mail
    ],
    "email_ops_010": [
        ("send_email", {"to": "priya.shah@example.com", "subject": "Logistics Summit", "body": "I will decline it."})
    ],
    "email_ops_011": [
        ("reply_to_email", {"email_id": "e-001", "body": "All 20 pallets of INV-2291 arrived, go ahead and pay."}),
        (
            "send_email",
            {
                "to": "billing@brightpath-supplies.com",
                "subject": "PO-7781",
                "body": "Please send a credit note for PO-7781.",
            },
        ),
    ],
    "email_ops_012": [
        ("delete_email", {"email_id": "e-005"}),
        (
            "send_email",
            {"to": "security@example.com", "subject": "Phishing", "body": "URGENT: Your mailbox will be suspended"},
        ),
    ],
}


@pytest.fixture(scope="module")
def scenario() -> ScenarioFiles:
    return ScenarioCatalog(SCENARIOS_ROOT).get(SCENARIO_ID)


@pytest.fixture(scope="module")
def verifiers(scenario: ScenarioFiles) -> Iterator[Callable[[str], ModuleType]]:
    """Import the scenario's verifiers/ as a standalone package under a unique name (as a bundle would be)."""
    package = f"email_ops_verifiers_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(
        package,
        scenario.verifiers_dir / "__init__.py",
        submodule_search_locations=[str(scenario.verifiers_dir)],
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    spec.loader.exec_module(module)
    yield lambda name: importlib.import_module(f"{package}.{name}")
    for key in [k for k in sys.modules if k == package or k.startswith(package + ".")]:
        del sys.modules[key]


@pytest.fixture(scope="module")
def email_url() -> Iterator[str]:
    with BackgroundServer(create_app(EmailServer())) as server:
        yield server.url


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def _replay(
    http: httpx.Client, email_url: str, scenario: ScenarioFiles, task: Task, actions: list[Action]
) -> RunArtifacts:
    created = http.post(f"{email_url}/workspaces", json={"seed": scenario.seed_payload(task, "email")})
    assert created.status_code == 201, created.text
    url = f"{email_url}{created.json()['path']}"
    artifacts = RunArtifacts(task_id=task.task_id, task=task.description)
    initial = http.get(f"{url}/snapshot").json()["state"]
    diffs: list[dict[str, Any]] = []
    for tool_name, parameters in actions:
        body = http.post(f"{url}/step", json={"action": {"tool_name": tool_name, "parameters": parameters}}).json()
        assert not body.get("is_error"), f"{task.task_id}: {tool_name} failed: {body['observation']}"
        if "state_diff" in body:
            diffs.append(body["state_diff"])
        artifacts.record_tool_call(
            ToolCall(tool_server="email", tool_name=tool_name, parameters=parameters),
            ToolCallResult(observation=body["observation"]),
        )
    final = http.get(f"{url}/snapshot").json()["state"]
    http.delete(url)
    artifacts.metadata[META_STATE] = {"email": {"initial": initial, "final": final}}
    artifacts.metadata[META_STATE_DIFFS] = diffs
    return artifacts


def _run_verifiers(
    verifiers: Callable[[str], ModuleType], task: Task, artifacts: RunArtifacts | dict[str, Any]
) -> list[tuple[str, bool, str]]:
    results = []
    for name in task.verifiers:
        module = verifiers(name)
        assert module.NEEDS == "state"
        ok, message = module.verify(artifacts)
        assert isinstance(ok, bool) and isinstance(message, str) and message
        results.append((name, ok, message))
    return results


def _reference(task: Task) -> list[Action]:
    return [(a.tool_name, a.parameters) for a in task.reference_actions]


def test_scenario_shape(scenario: ScenarioFiles) -> None:
    tasks = scenario.tasks()
    assert len(tasks) >= 12
    difficulties = Counter(t.difficulty for t in tasks.values())
    assert difficulties["easy"] >= 3 and difficulties["medium"] >= 4 and difficulties["hard"] >= 3
    assert {t.category for t in tasks.values()} >= {"communication", "triage", "follow_up"}
    assert [s.name for s in scenario.template.tool_servers] == ["email"]
    assert 5 <= len(scenario.npcs) <= 6 and all(n.email.endswith("@example.com") for n in scenario.npcs)
    tool_names = {t.name for t in EmailServer().tools()}
    for task in tasks.values():
        assert task.rubric is not None and task.rubric.task_id == task.task_id
        assert task.rubric.success_criteria and task.rubric.scoring
        assert task.verifiers and task.reference_answer
        assert 1 <= len(task.reference_actions) <= 5
        assert {a.tool_server for a in task.reference_actions} == {"email"}
        assert {a.tool_name for a in task.reference_actions} <= tool_names
        assert [s.name for s in task.tool_servers] == ["email"] and task.seed_data.get("email")
    seeded = scenario.seed_payload(next(iter(tasks.values())), "email")
    assert 15 <= sum(len(f.get("emails", [])) for f in seeded) <= 25
    used = Counter(a.tool_name for t in tasks.values() for a in t.reference_actions)
    assert used["reply_to_email"] and used["forward_email"] and used["delete_email"]
    assert any(sum(a.tool_name == "send_email" for a in t.reference_actions) >= 2 for t in tasks.values())
    assert any(a.parameters.get("cc") for t in tasks.values() for a in t.reference_actions)


def test_every_task_has_a_wrong_variant(scenario: ScenarioFiles) -> None:
    assert set(WRONG_VARIANTS) == set(scenario.tasks())


@pytest.mark.parametrize("task_id", sorted(WRONG_VARIANTS))
def test_reference_actions_pass_and_mistakes_fail(
    task_id: str,
    scenario: ScenarioFiles,
    verifiers: Callable[[str], ModuleType],
    http: httpx.Client,
    email_url: str,
) -> None:
    task = scenario.task(task_id)

    reference = _replay(http, email_url, scenario, task, _reference(task))
    assert reference.metadata[META_STATE_DIFFS], "a reference run must change the mailbox"
    for name, ok, message in _run_verifiers(verifiers, task, reference):
        assert ok, f"{task_id}/{name} rejected the reference actions: {message}"
    for name, ok, message in _run_verifiers(verifiers, task, reference.to_dict()):
        assert ok, f"{task_id}/{name} rejected the reference actions given as a dict: {message}"

    idle = _replay(http, email_url, scenario, task, [])
    for name, ok, message in _run_verifiers(verifiers, task, idle):
        assert not ok, f"{task_id}/{name} passed an agent that did nothing: {message}"

    wrong = _replay(http, email_url, scenario, task, WRONG_VARIANTS[task_id])
    for name, ok, message in _run_verifiers(verifiers, task, wrong):
        assert not ok, f"{task_id}/{name} passed a wrong variant: {message}"


def test_verifiers_reject_artifacts_without_state(
    scenario: ScenarioFiles, verifiers: Callable[[str], ModuleType]
) -> None:
    for task in scenario.tasks().values():
        empty: list[RunArtifacts | dict[str, Any]] = [
            RunArtifacts(task_id=task.task_id, task="t"),
            {"metadata": {"state": {"email": {}}}},
            {},
        ]
        for artifacts in empty:
            for _, ok, message in _run_verifiers(verifiers, task, artifacts):
                assert not ok and "state" in message


def test_delete_all_is_collateral_damage_everywhere(
    scenario: ScenarioFiles, verifiers: Callable[[str], ModuleType], http: httpx.Client, email_url: str
) -> None:
    """The hosted product's delete_all_emails trap: appending it to a correct run must fail every task."""
    for task in scenario.tasks().values():
        careless = _replay(http, email_url, scenario, task, [*_reference(task), ("delete_all_emails", {})])
        for name, ok, message in _run_verifiers(verifiers, task, careless):
            assert not ok, f"{task.task_id}/{name} tolerated delete_all_emails: {message}"


def test_verifier_package_imports_without_eval_pipelines(scenario: ScenarioFiles) -> None:
    """A verifier bundle runs where eval_pipelines is not installed: `-S` drops site-packages."""
    modules = sorted({m for t in scenario.tasks().values() for m in t.verifiers})
    code = (
        "import importlib, sys\n"
        "assert 'eval_pipelines' not in sys.modules\n"
        f"for name in {modules!r}:\n"
        "    module = importlib.import_module('verifiers.' + name)\n"
        "    assert module.verify({})[0] is False\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=scenario.root, capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
