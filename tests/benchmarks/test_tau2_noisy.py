"""The noisy sim through the engine on τ² tasks, its user played by `sim-user`: per rollout, our verifier's
verdict and components equal upstream's `evaluate_simulation`, over 200 rollouts of airline and retail tasks with
passes and failures both present."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from eval_pipelines.benchmarks.environments import ensure
from eval_pipelines.benchmarks.parity import ParityItem, compare
from eval_pipelines.benchmarks.tau2 import adapter, parity
from eval_pipelines.benchmarks.worker import UpstreamWorker
from eval_pipelines.engine.rollout import RolloutOutcome
from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import RolloutStatus
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.toolservers.host import ToolServerHost
from tests.benchmarks.test_tau2_oracle import _spec, tau2_host, write_scenarios  # noqa: F401 - fixture
from tests.engine.test_engine import _execute

#: Tasks per domain (the first ones); EVAL_PIPELINES_TAU2_TASKS=114 runs every task of both domains.
TASKS_PER_DOMAIN = int(os.environ.get("EVAL_PIPELINES_TAU2_TASKS", "34"))
#: Distinct rollout ids draw distinct deviations.
ROLLOUTS_PER_TASK = 3
NOISE = 0.15
#: Rollouts in flight at once: each mostly waits on the sim endpoint, the tool host and the worker.
CONCURRENT_ROLLOUTS = 4
DOMAIN_SIZES = {"airline": 50, "retail": 114}


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScenarioFiles]:
    subset = {domain: [str(i) for i in range(min(TASKS_PER_DOMAIN, size))] for domain, size in DOMAIN_SIZES.items()}
    return write_scenarios(tmp_path_factory.mktemp("benchmarks"), subset)


@pytest.mark.slow
async def test_our_verdict_equals_upstream_s_on_noisy_rollouts(
    scenarios: dict[str, ScenarioFiles],
    tau2_host: ToolServerHost,  # noqa: F811
    serve: Any,
) -> None:
    rollouts = asyncio.Semaphore(CONCURRENT_ROLLOUTS)

    async def run(scenario: ScenarioFiles, model_url: str, task: Task, index: int) -> ParityItem:
        spec = _spec(scenario, task.task_id, model_url, tau2_host)
        noisy = ModelConfig(model="sim-noisy", api_key="k", base_url=f"{model_url}/v1", max_steps=60)
        rollout_id = f"ro_{task.task_id}_{index}"
        async with rollouts:
            outcome = await _execute(type(spec)(**{**vars(spec), "rollout_id": rollout_id, "model_config": noisy}))
        assert outcome.status == RolloutStatus.COMPLETED, (rollout_id, outcome.artifacts.error)
        ours[rollout_id] = outcome
        return ParityItem(rollout_id, task.task_id, outcome.artifacts, task)

    ours: dict[str, RolloutOutcome] = {}
    items: list[ParityItem] = []
    for scenario in scenarios.values():
        book = ReferenceBook()
        for task in scenario.tasks().values():
            book.add_task(task)
        model = serve(create_sim_app(book, noise=NOISE))
        tasks = scenario.tasks().values()
        items += await asyncio.gather(
            *(run(scenario, model.url, t, i) for t in tasks for i in range(ROLLOUTS_PER_TASK))
        )
    worker = UpstreamWorker(ensure(adapter.ENVIRONMENT), adapter.WORKER_SCRIPT, adapter.ENVIRONMENT.worker_env)
    try:
        upstream = {v.rollout_id: v for v in await parity.upstream_verdicts(worker, items)}
    finally:
        await worker.close()
    rows: list[tuple[str, bool, bool, tuple[str, ...]]] = []
    for item in items:
        [verdict] = ours[item.rollout_id].result.verifiers
        components = verdict.output.get("components", {}) if isinstance(verdict.output, dict) else {}
        theirs = upstream[item.rollout_id]
        # every component both sides report is compared, as `eval-pipelines parity` compares them
        flips = compare(verdict.success, components, theirs, parity.PARITY_ADAPTER.judged_components).flips
        rows.append((item.rollout_id, verdict.success, theirs.success, flips))
    passes = sum(1 for row in rows if row[1])
    print(f"tau2 noisy parity: {len(rows)} rollouts, {passes} pass")
    disagreements = [row for row in rows if row[3]]
    assert not disagreements, disagreements
    assert len(rows) >= 200 and {row[1] for row in rows} == {True, False}
