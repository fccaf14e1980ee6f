"""The sim-oracle on a few tasks of every BFCL multi-turn category, through the real engine and the `bfcl` tool
server: every rollout passes our verifier, and upstream's own grader agrees on each."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.benchmarks import catalog
from eval_pipelines.benchmarks.bfcl import adapter, parity
from eval_pipelines.benchmarks.environments import ensure
from eval_pipelines.benchmarks.worker import UpstreamWorker
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutSpec
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import RolloutStatus, TerminationReason
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.toolservers.host import ToolServerHost
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.engine.test_engine import _execute
from tests.support.scripted_llm import Script, create_scripted_app, text_reply, tool_call_reply

#: Per category: the first entries (which open with the same message in three categories), and the hard ones:
#: base_40 and base_43 open alike within a category, long_context_38 holds 34 gold calls in one turn (more than
#: the per-turn step cap), and miss_func_49's gold calls a function before its turn lists it.
SUBSET = {
    "bfcl_multi_turn_base": ["multi_turn_base_0", "multi_turn_base_1", "multi_turn_base_40", "multi_turn_base_43"],
    "bfcl_multi_turn_miss_func": ["multi_turn_miss_func_0", "multi_turn_miss_func_1", "multi_turn_miss_func_49"],
    "bfcl_multi_turn_miss_param": ["multi_turn_miss_param_0", "multi_turn_miss_param_1"],
    "bfcl_multi_turn_long_context": ["multi_turn_long_context_0", "multi_turn_long_context_38"],
}
#: Enough steps for every turn of a task to use its whole per-turn cap.
MAX_STEPS = 400


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScenarioFiles]:
    data = tmp_path_factory.mktemp("data")
    for family in SUBSET:
        catalog.materialise(family, data)
    found = ScenarioCatalog(data / "benchmarks")
    return {family: found.get(adapter.scenario_id(family)) for family in SUBSET}


@pytest.fixture(scope="module")
def bfcl_host() -> Iterator[ToolServerHost]:
    host = ToolServerHost([adapter.SERVER], extra={adapter.SERVER: adapter.BfclToolServer}).start()
    yield host
    host.stop()
    server = host.servers[adapter.SERVER]
    assert isinstance(server, adapter.BfclToolServer)
    asyncio.run(server.aclose())


def _spec(scenario: ScenarioFiles, task_id: str, model_url: str, host: ToolServerHost) -> RolloutSpec:
    task = scenario.task(task_id)
    return RolloutSpec(
        rollout_id=f"ro_{task_id}",
        run_id="run_bfcl_oracle",
        scenario_id=scenario.scenario_id,
        task=task,
        model_config=ModelConfig(model="sim-oracle", api_key="k", base_url=f"{model_url}/v1", max_steps=MAX_STEPS),
        tool_server_urls={adapter.SERVER: host.base_url(adapter.SERVER)},
        seed={adapter.SERVER: scenario.seed_payload(task, adapter.SERVER)},
        verifiers=load_verifier_package(scenario.verifiers_dir),
        timeout_seconds=120,
    )


@pytest.mark.slow
async def test_the_oracle_passes_every_task_and_upstream_agrees(
    scenarios: dict[str, ScenarioFiles], bfcl_host: ToolServerHost, serve: Any
) -> None:
    # One sim for every category, as a sweep has: each request marks the task it plays, so tasks that open with
    # the same message (across categories and within one) are told apart.
    any_scenario = next(iter(scenarios.values()))
    model = serve(create_sim_app(ReferenceBook.from_catalog(ScenarioCatalog(any_scenario.root.parent))))
    worker = UpstreamWorker(ensure(adapter.ENVIRONMENT), adapter.WORKER_SCRIPT, adapter.ENVIRONMENT.worker_env)
    # One engine for every task, as a run's rollouts share one: the `bfcl` server lists each task's own classes.
    engine = RolloutEngine(ChatClientPool(), ToolServerAdmin())
    try:
        for family, task_ids in SUBSET.items():
            for task_id in task_ids:
                outcome = await engine.execute(_spec(scenarios[family], task_id, model.url, bfcl_host))
                assert outcome.status == RolloutStatus.COMPLETED, (task_id, outcome.artifacts.error)
                assert outcome.result.success, (task_id, outcome.result.message)
                request = parity.grade_request(task_id, outcome.artifacts.messages)
                upstream = await worker.request("grade", **request)
                assert upstream["valid"] is True, (task_id, upstream)
    finally:
        await worker.close()
        await engine.clients.aclose()
        await engine.admin.aclose()


def test_subset_names_real_tasks(scenarios: dict[str, ScenarioFiles]) -> None:
    for family, task_ids in SUBSET.items():
        assert set(task_ids) <= set(scenarios[family].tasks()), family
        assert Path(scenarios[family].verifiers_dir / adapter.GOLD_FILE).is_file()


def _replies(task: Any, *, capped_turn: int) -> list[dict[str, Any]]:
    """The gold calls one per reply and a text reply per turn, except that in `capped_turn`, after its gold
    calls, the model keeps calling `pwd` past the per-turn step cap."""
    replies: list[dict[str, Any]] = []
    for turn, calls in enumerate(task.reference_turns):
        replies += [
            tool_call_reply(call.tool_name, call.parameters, f"call_{turn}_{i}") for i, call in enumerate(calls)
        ]
        if turn == capped_turn:
            replies += [tool_call_reply("pwd", {}, f"pwd_{i}") for i in range(task.max_steps_per_turn)]
            break
        replies.append(text_reply("done"))
    return replies


@pytest.mark.slow
@pytest.mark.parametrize("last", [True, False], ids=["last turn", "earlier turn"])
async def test_the_step_cap_grades_as_upstream_force_quits(
    scenarios: dict[str, ScenarioFiles], bfcl_host: ToolServerHost, serve: Any, last: bool
) -> None:
    """Upstream force-quits a turn at its 21st calling step: inside the last turn the entry is still graded
    (here it passes), inside an earlier one it is force-terminated. Ours and upstream's verdicts agree."""
    scenario = scenarios["bfcl_multi_turn_base"]
    task = scenario.task("multi_turn_base_0")
    capped = len(task.reference_turns) - 1 if last else 1
    model = serve(create_scripted_app(Script(_replies(task, capped_turn=capped))))
    spec = _spec(scenario, task.task_id, model.url, bfcl_host)
    spec = replace(spec, model_config=spec.model_config.model_copy(update={"model": "scripted"}))
    outcome = await _execute(spec)
    assert outcome.termination_reason == TerminationReason.MAX_STEPS
    worker = UpstreamWorker(ensure(adapter.ENVIRONMENT), adapter.WORKER_SCRIPT, adapter.ENVIRONMENT.worker_env)
    try:
        upstream = await worker.request("grade", **parity.grade_request(task.task_id, outcome.artifacts.messages))
    finally:
        await worker.close()
    assert outcome.result.success is last and upstream["valid"] is last, (outcome.result.message, upstream)
