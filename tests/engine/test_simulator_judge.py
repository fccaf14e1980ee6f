"""The judge's check that a rollout's simulators followed their instructions: what it reads, how its verdict makes
the rollout a simulator error (labelled judge), and a judge without a verdict, which counts nothing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.engine.simulator_judge import (
    CONVERSATION_TAG,
    INSTRUCTIONS_TAG,
    npc_judge_inputs,
    user_judge_inputs,
)
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.llm.tagged_json import extract_tagged
from eval_pipelines.pipeline.steps import launch_request
from eval_pipelines.schemas.artifacts import CHECK_INSTRUCTIONS, META_SIMULATOR_CHECKS
from eval_pipelines.schemas.runs import ErrorClass
from eval_pipelines.schemas.sweep import SweepConfig
from eval_pipelines.sim.endpoint import SIM_USER, ReferenceBook, create_sim_app
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.engine.test_engine import _execute
from tests.support.scripted_llm import Script, create_scripted_app, text_reply
from tests.users.test_users import OPENING, TASK, USER_SPEC, VERIFIER, _config, _spec


def test_an_npc_is_judged_against_the_persona_prompt_it_was_played_from() -> None:
    chat = {
        "npcs": {
            "priya": {
                "email": "priya@example.com",
                "first_name": "Priya",
                "last_name": "Raman",
                "occupation": "Lab manager",
                "secret": {"value": "4827#", "reveal_when": ["door code"]},
            },
            "quiet": {"email": "quiet@example.com", "first_name": "Quiet", "last_name": "One"},
        },
        "messages": {
            "1": {"room_id": "dm-priya", "sender": "me@example.com", "text": "Door code?", "timestamp": "1"},
            "2": {"room_id": "dm-priya", "sender": "priya@example.com", "text": "It is 4827#.", "timestamp": "2"},
        },
    }
    [(simulator, instructions, conversation)] = npc_judge_inputs({"initial": {}, "final": chat})
    assert simulator == "npc:priya"  # the NPC nobody wrote to is not judged
    assert "Name: Priya Raman" in instructions and "Role: Lab manager" in instructions and "4827#" in instructions
    assert conversation == [
        {"speaker": "other", "text": "Door code?"},
        {"speaker": "simulator", "text": "It is 4827#."},
    ]


def test_the_user_is_judged_on_its_text_and_the_agent_s_text_only() -> None:
    messages = [
        {"role": "system", "content": "agent prompt"},
        {"role": "user", "content": "My order is late."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
        {"role": "tool", "content": "order found"},
        {"role": "assistant", "content": "It ships today."},
    ]
    assert user_judge_inputs(messages) == [
        {"speaker": "simulator", "text": "My order is late."},
        {"speaker": "other", "text": "It ships today."},
    ]
    assert user_judge_inputs([{"role": "assistant", "content": "Hello"}]) == []


@pytest.fixture
def verifiers(tmp_path: Path) -> Any:
    package = tmp_path / "verifiers"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ending.py").write_text(VERIFIER)
    return load_verifier_package(package)


async def _run_judged(serve: Any, tool_host: Any, verifiers: Any, judge_reply: str) -> tuple[Any, Script]:
    book = ReferenceBook()
    book.add_task(TASK)
    sim = serve(create_sim_app(book))
    judge_script = Script([text_reply(judge_reply)])
    judge = serve(create_scripted_app(judge_script))
    spec = _spec(sim.url, tool_host.base_url("email"), verifiers, _config(f"{sim.url}/v1", SIM_USER))
    spec = dataclasses.replace(spec, simulator_judge_config=_config(f"{judge.url}/v1", "judge-model"))
    return await _execute(spec), judge_script


async def test_a_judge_that_finds_the_user_contradicting_its_instructions_makes_the_rollout_a_simulator_error(
    serve: Any, tool_host: Any, verifiers: Any
) -> None:
    reason = "The customer asks about a refund its scenario never mentions."
    outcome, judge = await _run_judged(serve, tool_host, verifiers, json.dumps({"followed": False, "reason": reason}))
    assert outcome.error_class == ErrorClass.SIMULATOR_OFF_SCRIPT and not outcome.result.success
    assert f"simulator user went off script (followed_its_instructions, judge): {reason}" in outcome.result.message
    judged = [c for c in outcome.artifacts.metadata[META_SIMULATOR_CHECKS] if c["method"] == "judge"]
    assert judged == [
        {"simulator": "user", "check": CHECK_INSTRUCTIONS, "method": "judge", "passed": False, "detail": reason}
    ]
    [request] = judge.requests
    prompt = request["messages"][-1]["content"]
    assert extract_tagged(prompt, INSTRUCTIONS_TAG) == USER_SPEC.system_prompt
    conversation = extract_tagged(prompt, CONVERSATION_TAG)
    assert {"speaker": "simulator", "text": OPENING} in conversation
    assert any(m["speaker"] == "other" for m in conversation)


@pytest.mark.parametrize("reply", ['{"followed": true, "reason": "It stays within its scenario."}', "no idea"])
async def test_a_judge_that_agrees_or_gives_no_verdict_leaves_the_rollout_the_agent_s(
    reply: str, serve: Any, tool_host: Any, verifiers: Any
) -> None:
    outcome, _ = await _run_judged(serve, tool_host, verifiers, reply)
    assert outcome.error_class is None and outcome.result.success, outcome.result.message
    judged = [c for c in outcome.artifacts.metadata[META_SIMULATOR_CHECKS] if c["method"] == "judge"]
    assert [c["passed"] for c in judged] == ([True] if reply.startswith("{") else [])


def test_a_sweep_s_simulator_judge_goes_into_every_launch_request() -> None:
    sweep = SweepConfig.model_validate(
        {
            "name": "judged",
            "scenarios": ["team_chat:1.0.0"],
            "models": [{"name": "agent", "model": "sim-oracle", "base_url": "sim://local"}],
            "simulator_judge": {
                "name": "auditor",
                "model": "sim-judge",
                "base_url": "sim://local",
                "max_concurrency": 3,
            },
        }
    )
    scenario = ScenarioCatalog().get("team_chat:1.0.0")
    request = launch_request(sweep, sweep.models[0], scenario, "s")
    assert request.simulator_judge_config is not None and request.simulator_judge_config.model == "sim-judge"
    assert request.max_parallel == 3  # a judge call per rollout: its cap caps the run too
    plain = sweep.model_copy(update={"simulator_judge": None})
    assert launch_request(plain, plain.models[0], scenario, "s").simulator_judge_config is None
