"""BFCL parity: a rollout as upstream's FC handler records it, and upstream's verdict on it from the worker.

Upstream records, per user turn, one entry per model reply: the reply's calls as `{name: arguments_json}` dicts,
or the reply's text when it made no call (its decoder drops those). `upstream_verdicts` grades them with
bfcl_eval's own checker in the bfcl venv (`grade` op of `upstream_worker.py`), on upstream's own entry and
ground truth.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipelines.benchmarks.bfcl import verifier_template
from eval_pipelines.benchmarks.bfcl.adapter import BENCHMARK, ENVIRONMENT, UPSTREAM_VERSION, WORKER_SCRIPT
from eval_pipelines.benchmarks.environments import ensure
from eval_pipelines.benchmarks.parity import ParityItem, UpstreamVerdict
from eval_pipelines.benchmarks.worker import UpstreamWorker

#: Arguments that upstream's decoder cannot read, so it drops the step as it would drop the model's own
#: unparseable text (the reference agent never called such a tool).
_UNDECODABLE_ARGUMENTS = "<arguments the agent could not parse>"
#: One grading replays at most a few dozen calls on upstream's in-memory backends.
GRADE_TIMEOUT_SECONDS = 120.0


def upstream_model_result(messages: list[dict[str, Any]]) -> list[list[Any]]:
    """Per user turn, per model reply: its calls as `{name: arguments_json}` dicts, or its text."""
    return [
        [
            [
                {call["name"]: call["arguments"] if step["decodable"] else _UNDECODABLE_ARGUMENTS}
                for call in step["calls"]
            ]
            if step["calls"]
            else step["text"]
            for step in steps
        ]
        for steps in verifier_template.model_turns(messages)
    ]


def grade_request(task_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The worker's `grade` arguments for one rollout: upstream reads the entry and its ground truth itself."""
    return {"test_entry_id": task_id, "model_result": upstream_model_result(messages)}


async def upstream_verdicts(worker: UpstreamWorker, items: Sequence[ParityItem]) -> list[UpstreamVerdict]:
    """Upstream's verdict on each rollout, in order; one request each, graded under a fresh model name so
    upstream's cached instances never carry over. A rollout whose call names would be code in upstream's `eval`
    is not handed to upstream's checker: its verdict is a failure saying so."""
    verdicts = []
    for item in items:
        request = grade_request(item.task_id, item.artifacts.messages)
        answer = await worker.request("grade", timeout=GRADE_TIMEOUT_SECONDS, **request)
        success = answer.get("valid") is True
        words = (answer.get("error_type"), answer.get("error_message"))
        verdicts.append(
            UpstreamVerdict(
                rollout_id=item.rollout_id,
                success=success,
                reward=1.0 if success else 0.0,
                message=" ".join(str(part) for part in words if part),
            )
        )
    return verdicts


@dataclass(frozen=True)
class BfclParity:
    benchmark: str = BENCHMARK
    upstream_version: str = UPSTREAM_VERSION
    #: BFCL has no judge: every component is deterministic.
    judged_components: frozenset[str] = frozenset()

    async def start_worker(self) -> UpstreamWorker:
        python = await asyncio.to_thread(ensure, ENVIRONMENT)
        return UpstreamWorker(python, WORKER_SCRIPT, ENVIRONMENT.worker_env)

    async def upstream_verdicts(self, worker: Any, items: Sequence[ParityItem]) -> list[UpstreamVerdict]:
        return await upstream_verdicts(worker, items)


PARITY_ADAPTER = BfclParity()
