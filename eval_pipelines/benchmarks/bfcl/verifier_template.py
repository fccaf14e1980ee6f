"""BFCL v4 multi-turn: this project's grader, copied into each materialised scenario's verifiers/ package beside
`gold.json` (written by the adapter from upstream's own execution of the ground truth).

Standard library only and no import of eval_pipelines: it runs in the verifier worker. It mirrors bfcl_eval's
`_evaluate_single_multi_turn_entry` and `multi_turn_checker` on what the rollout recorded:

1. force-terminated: the rollout must have entered as many user turns as the task has (a turn cap hit in the
   last turn still grades, as upstream's does);
2. per turn, the model's steps are its replies with tool calls; a step whose arguments were not a JSON object
   is dropped whole, as upstream's decoder drops it;
3. for each turn whose gold calls are not empty: the turn has at least one step; the state after the turn
   (`metadata["turn_states"][t]`) equals the gold state after the turn; and the gold results of the turn are
   an unordered sub-multiset of every result of the model's steps so far.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

NEEDS = "state"
SERVER = "bfcl"
GOLD_FILE = Path(__file__).with_name("gold.json")
#: How the reference agent answers a call whose arguments it could not parse (the tool is then not called).
INVALID_ARGUMENTS_PREFIX = "Invalid arguments for "

Result = tuple[bool, str]


@functools.lru_cache(maxsize=1)
def _gold() -> dict[str, Any]:
    with GOLD_FILE.open(encoding="utf-8") as handle:
        loaded: dict[str, Any] = json.load(handle)
    return loaded


def _field(record: Any, name: str) -> Any:
    return record.get(name) if isinstance(record, dict) else getattr(record, name, None)


def undecodable(tool_message: dict[str, Any] | None) -> bool:
    if tool_message is None:
        return False
    content = tool_message.get("content")
    return (
        bool(tool_message.get("is_error")) and isinstance(content, str) and content.startswith(INVALID_ARGUMENTS_PREFIX)
    )


def model_turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Per user turn, the model's replies: `{"text", "calls": [{"name", "arguments"}], "results": [str],
    "decodable": bool}`. A reply's calls are answered by the tool messages right after it (call ids are only
    unique within a reply: some endpoints number them per reply)."""
    turns: list[list[dict[str, Any]]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "user":
            turns.append([])
        elif role == "assistant" and turns:
            answers: dict[Any, dict[str, Any]] = {}
            for following in messages[index + 1 :]:
                if following.get("role") != "tool":
                    break
                answers.setdefault(following.get("tool_call_id"), following)
            calls, results, decodable = [], [], True
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                answer = answers.get(call.get("id"))
                decodable = decodable and not undecodable(answer)
                calls.append({"name": function.get("name"), "arguments": function.get("arguments")})
                if answer is not None:
                    content = answer.get("content")
                    results.append(content if isinstance(content, str) else json.dumps(content))
            text = message.get("content")
            step = {"text": text if isinstance(text, str) else "", "calls": calls, "results": results}
            turns[-1].append({**step, "decodable": decodable})
    return turns


def _turn_state(metadata: dict[str, Any], turn: int, last: bool) -> Any:
    snapshots = metadata.get("turn_states") or []
    if turn < len(snapshots) and isinstance(snapshots[turn], dict):
        return snapshots[turn].get(SERVER)
    if last:
        # a rollout the step cap ended inside its last turn has no snapshot of that turn: its final state is
        # the turn's state, which upstream grades as it grades any other
        final = ((metadata.get("state") or {}).get(SERVER) or {}).get("final")
        return final if isinstance(final, dict) else None
    return None


def _missing(expected: list[str], produced: list[str]) -> list[str]:
    pool = list(produced)
    missing = []
    for item in expected:
        try:
            pool.remove(item)
        except ValueError:
            missing.append(item)
    return missing


def grade(gold_turns: list[dict[str, Any]], messages: list[dict[str, Any]], metadata: dict[str, Any]) -> Result:
    turns = model_turns(messages)
    if len(turns) != len(gold_turns):
        return False, (f"force-terminated: the rollout entered {len(turns)} of the task's {len(gold_turns)} turns")
    results_so_far: list[str] = []
    for index, (gold, steps) in enumerate(zip(gold_turns, turns, strict=True)):
        decoded = [step for step in steps if step["calls"] and step["decodable"]]
        for step in decoded:
            results_so_far.extend(step["results"])
        if not gold["calls"]:
            continue
        if not decoded:
            return False, f"turn {index}: no tool call, where the gold makes {len(gold['calls'])}"
        state = _turn_state(metadata, index, last=index == len(turns) - 1)
        if state != gold["state"]:
            classes = sorted(
                name for name in gold["state"] if not isinstance(state, dict) or state.get(name) != gold["state"][name]
            )
            return False, f"turn {index}: state check: {', '.join(classes) or 'the state'} differs from the gold state"
        missing = _missing(gold["results"], results_so_far)
        if missing:
            return False, (
                f"turn {index}: response check: {len(missing)} gold result(s) missing from the model's results, "
                f"first: {missing[0][:200]!r}"
            )
    return True, f"all {len(gold_turns)} turns pass the state and response checks"


def verify(run_artifacts: Any) -> Result:
    task_id = _field(run_artifacts, "task_id")
    gold = _gold().get(task_id) if isinstance(task_id, str) else None
    if gold is None:
        return False, f"no gold for task {task_id!r} in {GOLD_FILE.name}"
    metadata = _field(run_artifacts, "metadata")
    messages = _field(run_artifacts, "messages")
    return grade(
        gold["turns"], messages if isinstance(messages, list) else [], metadata if isinstance(metadata, dict) else {}
    )
