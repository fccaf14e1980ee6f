"""BFCL adapter against bfcl_eval itself: gold replays through our worker pass upstream's checker and our
verifier alike, perturbed ones fail under both, and a call name that is code is refused without eval."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.benchmarks.bfcl import adapter, parity, verifier_template
from eval_pipelines.benchmarks.environments import EnvironmentInstallError, ensure
from eval_pipelines.benchmarks.worker import UpstreamWorker

ENTRIES_PER_CATEGORY = 25


@pytest.fixture(scope="module")
def bfcl() -> Iterator[tuple[asyncio.AbstractEventLoop, UpstreamWorker]]:
    try:
        python = ensure(adapter.ENVIRONMENT)
    except EnvironmentInstallError as exc:
        pytest.fail(f"the bfcl environment could not be made: {exc}")
    loop = asyncio.new_event_loop()
    worker = UpstreamWorker(python, adapter.WORKER_SCRIPT, adapter.ENVIRONMENT.worker_env)
    yield loop, worker
    loop.run_until_complete(worker.close())
    loop.close()


def _ask(bfcl: tuple[asyncio.AbstractEventLoop, UpstreamWorker], op: str, **args: Any) -> Any:
    loop, worker = bfcl
    return loop.run_until_complete(worker.request(op, timeout=600, **args))


@pytest.fixture(scope="module")
def categories(bfcl: tuple[asyncio.AbstractEventLoop, UpstreamWorker]) -> dict[str, dict[str, Any]]:
    return {category: _ask(bfcl, "tasks", category=category) for category in adapter.FAMILIES.values()}


def _replay(bfcl: Any, entry: dict[str, Any], turns: list[list[dict[str, Any]]]) -> tuple[list, dict]:
    """Run `turns` (per turn, the calls of one step) through the worker as a rollout would, and record the
    messages and turn states our engine would."""
    workspace = f"replay-{entry['id']}"
    _ask(
        bfcl,
        "create",
        workspace=workspace,
        test_entry_id=entry["id"],
        initial_config=entry["initial_config"],
        involved_classes=entry["involved_classes"],
        long_context="long_context" in entry["id"],
    )
    messages: list[dict[str, Any]] = []
    turn_states = []
    counter = 0
    for index, calls in enumerate(turns):
        messages.append({"role": "user", "content": f"turn {index}"})
        state = _ask(bfcl, "state", workspace=workspace)["state"]
        if calls:
            wire = []
            answers = []
            for call in calls:
                counter += 1
                call_id = f"c{counter}"
                wire.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
                    }
                )
                answer = _ask(bfcl, "call", workspace=workspace, name=call["name"], arguments=call["arguments"])
                answers.append({"role": "tool", "tool_call_id": call_id, "content": answer["result"]})
                state = answer["state"]
            messages.append({"role": "assistant", "content": None, "tool_calls": wire})
            messages.extend(answers)
        messages.append({"role": "assistant", "content": "done"})
        turn_states.append({adapter.SERVER: state})
    _ask(bfcl, "delete", workspace=workspace)
    return messages, {"turn_states": turn_states}


def _verdicts(bfcl: Any, entry: dict[str, Any], turns: list[list[dict[str, Any]]]) -> tuple[bool, bool]:
    messages, metadata = _replay(bfcl, entry, turns)
    ours, _ = verifier_template.grade(adapter.gold(entry)["turns"], messages, metadata)
    upstream = _ask(bfcl, "grade", **parity.grade_request(entry["id"], messages))
    return ours, upstream["valid"]


@pytest.mark.slow
@pytest.mark.parametrize("category", list(adapter.FAMILIES.values()))
def test_gold_replay_passes_upstream_and_ours_and_a_dropped_call_fails_both(
    bfcl: Any, categories: dict, category: str
) -> None:
    for entry in categories[category]["tasks"][:ENTRIES_PER_CATEGORY]:
        gold_turns = [turn["reference"] for turn in entry["gold"]]
        assert _verdicts(bfcl, entry, gold_turns) == (True, True), entry["id"]
        last = max(index for index, turn in enumerate(gold_turns) if turn)
        dropped = [list(turn) for turn in gold_turns]
        dropped[last] = dropped[last][:-1]
        assert _verdicts(bfcl, entry, dropped) == (False, False), entry["id"]


def test_a_changed_argument_fails_both(bfcl: Any, categories: dict) -> None:
    entry = categories["multi_turn_base"]["tasks"][0]
    turns = [[dict(call) for call in turn["reference"]] for turn in entry["gold"]]
    first = next(turn for turn in turns if turn)
    first[-1] = {
        **first[-1],
        "arguments": {k: (v + "_x" if isinstance(v, str) else v) for k, v in first[-1]["arguments"].items()},
    }
    assert _verdicts(bfcl, entry, turns) == (False, False)


def test_a_call_name_that_is_code_is_refused_without_eval(bfcl: Any, categories: dict, tmp_path: Path) -> None:
    entry = categories["multi_turn_base"]["tasks"][0]
    marker = tmp_path / "evaluated"
    _ask(
        bfcl,
        "create",
        workspace="hostile",
        test_entry_id=entry["id"],
        initial_config=entry["initial_config"],
        involved_classes=entry["involved_classes"],
    )
    name = f"__import__('pathlib').Path({str(marker)!r}).touch"
    answer = _ask(bfcl, "call", workspace="hostile", name=name, arguments={})
    assert answer["refused"] is True and "not an identifier" in answer["result"]
    answer = _ask(bfcl, "call", workspace="hostile", name="cd", arguments={"folder='x'),__import__('os').getpid(": 1})
    assert answer["refused"] is True
    answer = _ask(bfcl, "call", workspace="hostile", name="eval", arguments={"source": "1"})
    assert answer["refused"] is True
    graded = _ask(
        bfcl, "grade", test_entry_id=entry["id"], model_result=[[[{name: "{}"}]]] + [[] for _ in entry["gold"][1:]]
    )
    assert graded["valid"] is None and graded["error_type"] == "refused"
    assert not marker.exists()


def test_state_dump_equality_matches_upstream_state_checker(bfcl: Any, categories: dict) -> None:
    """Equal dumps <=> upstream's state check passes: the gold replay equals the gold state; one extra
    mutating call changes both."""
    for category in adapter.FAMILIES.values():
        for entry in categories[category]["tasks"][:5]:
            gold_turns = [turn["reference"] for turn in entry["gold"]]
            _, metadata = _replay(bfcl, entry, gold_turns)
            for index, turn in enumerate(entry["gold"]):
                assert metadata["turn_states"][index][adapter.SERVER] == turn["state"], (entry["id"], index)
