"""What the built-in scenarios' tests share: replay tool calls on real tool servers the way the engine records
them, import a scenario's verifiers as a standalone package, and run them."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import uuid
from collections.abc import Callable, Collection, Iterator
from types import ModuleType
from typing import Any

import httpx

from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.schemas.artifacts import META_NPC_TRANSCRIPTS, META_STATE, META_STATE_DIFFS, RunArtifacts
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.schemas.tools import ToolCall, ToolCallResult
from eval_pipelines.toolservers.npc import npc_transcripts

#: (tool server, tool name, parameters)
Action = tuple[str, str, dict[str, Any]]
Verifiers = Callable[[str], ModuleType]


#: the second round of adversarial variants: what fooled keyword verifiers when a real small model was audited
#: by hand. Each task replays the kinds that apply to it, and each variant must fail.
SECOND_ROUND_KINDS = (
    "duplicate sends",
    "keyword list",
    "statement with a sign-off",
    "wrong answer without a negation word",
    "recipients in the wrong fields",
)
#: kind -> the variant's actions
SecondRound = dict[str, list[Action]]


def reference_actions(task: Task) -> list[Action]:
    return [(a.tool_server, a.tool_name, a.parameters) for a in task.reference_actions]


def with_duplicate_sends(actions: list[Action], sends: Collection[str]) -> list[Action]:
    """`actions` with every call of a tool in `sends` made twice in a row: the state the task asks for, reached
    with each message sent twice (the duplicate-sends variant of the second round)."""
    doubled: list[Action] = []
    for action in actions:
        doubled.extend([action, action] if action[1] in sends else [action])
    assert len(doubled) > len(actions), f"none of {sorted(sends)} is among the actions"
    return doubled


def second_round(
    task: Task, variants: dict[str, SecondRound], duplicate_sends: dict[str, tuple[str, ...]]
) -> SecondRound:
    """The task's second-round variants: the written ones, plus its reference actions with repeated sends
    where the task sends something."""
    found = dict(variants.get(task.task_id, {}))
    if task.task_id in duplicate_sends:
        found["duplicate sends"] = with_duplicate_sends(reference_actions(task), duplicate_sends[task.task_id])
    assert found, f"{task.task_id} has no second-round variant"
    assert set(found) <= set(SECOND_ROUND_KINDS), sorted(set(found) - set(SECOND_ROUND_KINDS))
    return found


def replay(
    http: httpx.Client, server_urls: dict[str, str], task: Task, seeds: dict[str, list[Any]], actions: list[Action]
) -> RunArtifacts:
    """One workspace per seeded server (`server_urls`: name -> the server's base URL), `actions` run in order,
    and the artifacts the engine would record: tool calls, per-call diffs, initial and final states, and the
    NPC transcripts when a chat server took part."""
    workspaces: dict[str, str] = {}
    initial: dict[str, Any] = {}
    for server, seed in seeds.items():
        created = http.post(f"{server_urls[server]}/workspaces", json={"seed": seed})
        assert created.status_code == 201, created.text
        workspaces[server] = f"{server_urls[server]}{created.json()['path']}"
        initial[server] = http.get(f"{workspaces[server]}/snapshot").json()["state"]
    artifacts = RunArtifacts(task_id=task.task_id, task=task.description)
    diffs: list[dict[str, Any]] = []
    for server, tool_name, parameters in actions:
        assert server in workspaces, f"{task.task_id}: {server} is not one of the task's tool servers"
        action = {"tool_name": tool_name, "parameters": parameters}
        body = http.post(f"{workspaces[server]}/step", json={"action": action}).json()
        assert not body.get("is_error"), f"{task.task_id}: {server}.{tool_name} failed: {body['observation']}"
        if "state_diff" in body:
            diffs.append(body["state_diff"])
        artifacts.record_tool_call(
            ToolCall(tool_server=server, tool_name=tool_name, parameters=parameters),
            ToolCallResult(observation=body["observation"]),
        )
    state: dict[str, Any] = {}
    for server, url in workspaces.items():
        state[server] = {"initial": initial[server], "final": http.get(f"{url}/snapshot").json()["state"]}
        assert http.delete(url).status_code == 200
    artifacts.metadata[META_STATE] = state
    artifacts.metadata[META_STATE_DIFFS] = diffs
    if "chat" in state:
        artifacts.metadata[META_NPC_TRANSCRIPTS] = npc_transcripts(state["chat"]["final"])
    return artifacts


def standalone_verifiers(scenario: ScenarioFiles) -> Iterator[Verifiers]:
    """Import the scenario's verifiers/ as a standalone package under a unique name (as a bundle would be);
    yields `name -> module` and removes the package afterwards. For a module-scoped fixture."""
    package = f"{scenario.root.name}_verifiers_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(
        package, scenario.verifiers_dir / "__init__.py", submodule_search_locations=[str(scenario.verifiers_dir)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    spec.loader.exec_module(module)
    yield lambda name: importlib.import_module(f"{package}.{name}")
    for key in [k for k in sys.modules if k == package or k.startswith(package + ".")]:
        del sys.modules[key]


def run_verifiers(
    verifiers: Verifiers, task: Task, artifacts: RunArtifacts | dict[str, Any]
) -> list[tuple[str, bool, str]]:
    """(name, ok, message) of each of the task's verifiers; each must read state and explain its verdict."""
    results = []
    for name in task.verifiers:
        module = verifiers(name)
        assert module.NEEDS == "state"
        ok, message = module.verify(artifacts)
        assert isinstance(ok, bool) and isinstance(message, str) and message
        results.append((name, ok, message))
    return results


def assert_verdicts(
    verifiers: Verifiers, task: Task, reference: RunArtifacts, idle: RunArtifacts, wrong: list[RunArtifacts]
) -> None:
    """The reference run changes some state and passes every verifier (as artifacts and as a dict); an agent
    that did nothing and each wrong variant fail every verifier."""
    task_id = task.task_id
    assert reference.metadata[META_STATE_DIFFS], f"{task_id}: a reference run must change some tool server's state"
    for name, ok, message in run_verifiers(verifiers, task, reference):
        assert ok, f"{task_id}/{name} rejected the reference actions: {message}"
    for name, ok, message in run_verifiers(verifiers, task, reference.to_dict()):
        assert ok, f"{task_id}/{name} rejected the reference actions given as a dict: {message}"
    for name, ok, message in run_verifiers(verifiers, task, idle):
        assert not ok, f"{task_id}/{name} passed an agent that did nothing: {message}"
    for index, artifacts in enumerate(wrong):
        for name, ok, message in run_verifiers(verifiers, task, artifacts):
            assert not ok, f"{task_id}/{name} passed wrong variant {index}: {message}"


def assert_second_round_fails(verifiers: Verifiers, task: Task, replays: dict[str, RunArtifacts]) -> None:
    """Every second-round variant (kind -> its replay) fails every verifier of the task."""
    for kind, artifacts in replays.items():
        for name, ok, message in run_verifiers(verifiers, task, artifacts):
            assert not ok, f"{task.task_id}/{name} passed the second-round variant {kind!r}: {message}"


def assert_verifiers_import_without_eval_pipelines(scenario: ScenarioFiles) -> None:
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
