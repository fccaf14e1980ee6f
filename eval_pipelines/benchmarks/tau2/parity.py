"""τ² parity: a rollout as τ²'s orchestrator records it (a `SimulationRun`), and upstream's verdict on it.

The messages are those upstream's trajectory would hold: the agent's greeting first, then user and agent
messages, each tool result right after its call with the call's id, upstream's own content and error flag, and
the termination reason upstream's orchestrator would have recorded (the same walk our verifier makes).
`upstream_verdicts` grades them with `evaluate_simulation(..., EvaluationType.ALL)` in the tau2 venv (the `grade`
op of `upstream_worker.py`), which replays every call on a fresh environment and fails loudly when a recorded
result differs from what upstream's tool returns.

pass^k is τ²'s rule (`tau2.metrics.agent_metrics`), which the warehouse view `tau2_pass_hat_k` implements: drop
infrastructure errors, call a rollout successful when `|reward - 1| <= 1e-6`, take per task C(successes, k) /
C(trials, k), average over the tasks with equal weight, for k = 1 .. the smallest trial count of any task.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipelines.benchmarks.environments import ensure
from eval_pipelines.benchmarks.parity import ParityItem, UpstreamVerdict
from eval_pipelines.benchmarks.tau2 import verifier_template
from eval_pipelines.benchmarks.tau2.adapter import (
    AGENT_GREETING,
    BENCHMARK,
    ENVIRONMENT,
    STOP_TOKENS,
    UPSTREAM_VERSION,
    WORKER_SCRIPT,
)
from eval_pipelines.benchmarks.worker import UpstreamOpError, UpstreamWorker
from eval_pipelines.llm.types import split_wire_tool_name
from eval_pipelines.schemas.scenarios import SimulatedUserSpec, Task

#: One grading replays the conversation's calls and the gold actions on fresh environments (airline ~0.75 s).
GRADE_TIMEOUT_SECONDS = 120.0
#: The fixed times of a converted run: upstream's evaluator reads neither.
_EPOCH = "1970-01-01T00:00:00"


def _tool_name(wire_name: str, task: Task) -> str:
    """The upstream tool name of a call: the wire name, less the server prefix when the task did not use bare
    names."""
    split = None if task.bare_tool_names else split_wire_tool_name(wire_name)
    if split is not None and split[0] in {server.name for server in task.tool_servers}:
        return split[1]
    return wire_name


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        parsed = None
    # Arguments no JSON object could be made of were never run; upstream replays them as no arguments, and its
    # replay then reports the difference.
    return parsed if isinstance(parsed, dict) else {}


def simulation_messages(said: Sequence[Mapping[str, Any]], task: Task) -> list[dict[str, Any]]:
    """Our conversation (`verifier_template.conversation`) as τ² `Message` dicts."""
    out: list[dict[str, Any]] = []
    for message in said:
        role = message.get("role")
        content = message.get("content")
        if role == "tool":
            out.append(
                {
                    "role": "tool",
                    "id": str(message.get("tool_call_id") or ""),
                    "content": str(message.get("content") or ""),
                    "requestor": "assistant",
                    "error": bool(message.get("is_error")),
                }
            )
            continue
        converted: dict[str, Any] = {"role": role, "content": content if isinstance(content, str) else None}
        calls = message.get("tool_calls") or []
        if role == "assistant" and calls:
            converted["tool_calls"] = [
                {
                    "id": str(call.get("id") or ""),
                    "name": _tool_name(str((call.get("function") or {}).get("name") or ""), task),
                    "arguments": _arguments((call.get("function") or {}).get("arguments")),
                    "requestor": "assistant",
                }
                for call in calls
            ]
        out.append(converted)
    return out


def _user_spec(task: Task) -> tuple[str | None, list[str]]:
    if isinstance(task.user, SimulatedUserSpec):
        return task.user.agent_greeting, list(task.user.stop_tokens)
    return AGENT_GREETING, list(STOP_TOKENS)


def simulation_run(
    rollout_id: str, upstream_task_id: str, messages: list[dict[str, Any]], task: Task
) -> dict[str, Any]:
    """The `SimulationRun` (as JSON) upstream's evaluator reads for this rollout."""
    greeting, stop_tokens = _user_spec(task)
    said = verifier_template.conversation(messages, greeting)
    return {
        "id": rollout_id,
        "task_id": upstream_task_id,
        "start_time": _EPOCH,
        "end_time": _EPOCH,
        "duration": 0.0,
        "termination_reason": verifier_template.termination_reason(said, stop_tokens),
        "messages": simulation_messages(said, task),
    }


def upstream_task(task: Task) -> tuple[str, str]:
    """(domain, upstream task id) of one of our τ² tasks: its category is the domain, its id ends in upstream's."""
    domain = task.category
    prefix = f"{BENCHMARK}_{domain}_"
    if not task.task_id.startswith(prefix):
        raise ValueError(f"task {task.task_id!r} is not a τ² {domain} task")
    return domain, task.task_id[len(prefix) :]


async def upstream_verdicts(worker: UpstreamWorker, items: Sequence[ParityItem]) -> list[UpstreamVerdict]:
    """Upstream's verdict on each rollout, in order, one request each. A trajectory upstream's replay refuses (a
    recorded result that upstream's tool would not return) is a failure that says why."""
    verdicts = []
    for item in items:
        domain, upstream_id = upstream_task(item.task)
        run = simulation_run(item.rollout_id, upstream_id, item.artifacts.messages, item.task)
        try:
            answer = await worker.request(
                "grade", timeout=GRADE_TIMEOUT_SECONDS, domain=domain, task_id=upstream_id, simulation=run
            )
        except UpstreamOpError as exc:
            verdicts.append(UpstreamVerdict(item.rollout_id, False, 0.0, message=f"upstream refused the run: {exc}"))
            continue
        reward = float(answer.get("reward") or 0.0)
        verdicts.append(
            UpstreamVerdict(
                rollout_id=item.rollout_id,
                success=abs(reward - 1.0) <= verifier_template.SUCCESS_TOLERANCE,
                reward=reward,
                components={str(k): v >= 1.0 for k, v in (answer.get("reward_breakdown") or {}).items()},
                message=str(answer.get("note") or ""),
            )
        )
    return verdicts


@dataclass(frozen=True)
class Tau2Parity:
    benchmark: str = BENCHMARK
    upstream_version: str = UPSTREAM_VERSION
    #: NL assertions are upstream's judged component; airline and retail do not grade them under ALL.
    judged_components: frozenset[str] = frozenset({"NL_ASSERTION"})

    async def start_worker(self) -> UpstreamWorker:
        python = await asyncio.to_thread(ensure, ENVIRONMENT)
        return UpstreamWorker(python, WORKER_SCRIPT, ENVIRONMENT.worker_env)

    async def upstream_verdicts(self, worker: Any, items: Sequence[ParityItem]) -> list[UpstreamVerdict]:
        return await upstream_verdicts(worker, items)


PARITY_ADAPTER = Tau2Parity()
