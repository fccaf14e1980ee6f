"""The sim-oracle with the simulated user (`sim-user`) on a few τ² airline and retail tasks, through the real
engine and the `tau2_<domain>` tool servers: every rollout passes our verifier, and upstream's own
`evaluate_simulation` agrees on each, component by component."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.benchmarks.environments import ensure
from eval_pipelines.benchmarks.parity import ParityItem
from eval_pipelines.benchmarks.tau2 import adapter, parity
from eval_pipelines.benchmarks.worker import UpstreamWorker
from eval_pipelines.engine.rollout import RolloutSpec
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import RolloutStatus
from eval_pipelines.schemas.tools import STATE_DIFF_MARKER
from eval_pipelines.sim.endpoint import SIM_USER, ReferenceBook, create_sim_app
from eval_pipelines.toolservers.host import ToolServerHost
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.engine.test_engine import _execute

#: upstream ids per domain: airline 7 and retail 2 must also communicate a figure.
SUBSET = {"airline": ["2", "7", "8"], "retail": ["1", "2", "5"]}
SERVERS = {
    adapter.server_of(domain): cls
    for domain, cls in (("airline", adapter.Tau2AirlineToolServer), ("retail", adapter.Tau2RetailToolServer))
}
MAX_STEPS = 60


def _worker() -> UpstreamWorker:
    return UpstreamWorker(ensure(adapter.ENVIRONMENT), adapter.WORKER_SCRIPT, adapter.ENVIRONMENT.worker_env)


def write_scenarios(root: Path, subset: dict[str, list[str]]) -> dict[str, ScenarioFiles]:
    """Scenario folders holding the named upstream tasks per domain, written by the adapter from the worker (a
    whole family takes a minute to make)."""

    async def write() -> None:
        worker = _worker()
        try:
            for domain, ids in subset.items():
                entries = await worker.request("tasks", timeout=600, domain=domain, task_ids=ids)
                adapter.write_scenario(f"tau2_{domain}", entries, root / f"tau2_{domain}")
        finally:
            await worker.close()

    asyncio.run(write())
    found = ScenarioCatalog(root)
    return {domain: found.get(adapter.scenario_id(f"tau2_{domain}")) for domain in subset}


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScenarioFiles]:
    return write_scenarios(tmp_path_factory.mktemp("benchmarks"), SUBSET)


@pytest.fixture(scope="module")
def tau2_host() -> Iterator[ToolServerHost]:
    host = ToolServerHost(list(SERVERS), extra=dict(SERVERS)).start()
    yield host
    host.stop()
    for name in SERVERS:
        server = host.servers[name]
        assert isinstance(server, adapter.Tau2ToolServer)
        asyncio.run(server.aclose())


def _spec(scenario: ScenarioFiles, task_id: str, model_url: str, host: ToolServerHost) -> RolloutSpec:
    task = scenario.task(task_id)
    server = task.tool_servers[0].name
    return RolloutSpec(
        rollout_id=f"ro_{task_id}",
        run_id="run_tau2_oracle",
        scenario_id=scenario.scenario_id,
        task=task,
        model_config=ModelConfig(model="sim-oracle", api_key="k", base_url=f"{model_url}/v1", max_steps=MAX_STEPS),
        user_model_config=ModelConfig(model=SIM_USER, api_key="k", base_url=f"{model_url}/v1"),
        tool_server_urls={server: host.base_url(server)},
        seed={server: scenario.seed_payload(task, server)},
        verifiers=load_verifier_package(scenario.verifiers_dir),
        timeout_seconds=120,
    )


@pytest.mark.slow
async def test_the_oracle_passes_every_task_and_upstream_agrees(
    scenarios: dict[str, ScenarioFiles], tau2_host: ToolServerHost, serve: Any
) -> None:
    book = ReferenceBook()
    tasks = [(domain, adapter.task_id_of(domain, upstream_id)) for domain, ids in SUBSET.items() for upstream_id in ids]
    for domain, task_id in tasks:
        book.add_task(scenarios[domain].task(task_id))
    model = serve(create_sim_app(book))
    worker = _worker()
    try:
        for domain, task_id in tasks:
            outcome = await _execute(_spec(scenarios[domain], task_id, model.url, tau2_host))
            assert outcome.status == RolloutStatus.COMPLETED, (task_id, outcome.artifacts.error)
            assert outcome.result.success, (task_id, outcome.result.message)
            assert outcome.artifacts.metadata.get("user_ending") == "###STOP###"
            # the model read upstream's tool messages as upstream sends them, nothing appended
            tool_texts = [m["content"] for m in outcome.artifacts.messages if m["role"] == "tool"]
            assert tool_texts and not any(STATE_DIFF_MARKER in text for text in tool_texts)
            item = ParityItem(f"ro_{task_id}", task_id, outcome.artifacts, scenarios[domain].task(task_id))
            [upstream] = await parity.upstream_verdicts(worker, [item])
            assert upstream.success and upstream.components == {"DB": True, "COMMUNICATE": True}, (task_id, upstream)
    finally:
        await worker.close()


def test_subset_names_real_tasks(scenarios: dict[str, ScenarioFiles]) -> None:
    for domain, ids in SUBSET.items():
        assert {adapter.task_id_of(domain, i) for i in ids} == set(scenarios[domain].tasks()), domain
        assert Path(scenarios[domain].verifiers_dir / adapter.GOLD_FILE).is_file()
