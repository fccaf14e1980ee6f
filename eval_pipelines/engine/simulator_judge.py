"""The judge's check of a rollout's simulators: did what an NPC or a simulated user said contradict its
instructions. No code can tell (an NPC inventing a fact, a customer asking for something its scenario never
mentions), so a judge model reads each simulator's instructions beside the conversation and answers one JSON
object; its checks are labelled `CHECK_METHOD_JUDGE`, apart from the deterministic ones of `simulator_checks.py`.

The instructions and the conversation travel as JSON inside tags (`llm/tagged_json.py`), so a real model reads them
as delimited data. A judge that fails or answers something unreadable gives no check: what is unknown is not
counted as off script.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.errors import LLMError
from eval_pipelines.llm.tagged_json import extract_json_object, tagged
from eval_pipelines.llm.types import ChatMessage, ChatRequest
from eval_pipelines.schemas.artifacts import (
    CHECK_INSTRUCTIONS,
    CHECK_METHOD_JUDGE,
    META_STATE,
    SIMULATOR_NPC_PREFIX,
    SIMULATOR_USER,
    RunArtifacts,
    SimulatorCheck,
)
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.scenarios import SimulatedUserSpec, Task
from eval_pipelines.sim.npc import persona_system_prompt
from eval_pipelines.toolservers.chat import ChatServer
from eval_pipelines.toolservers.npc import NPCS, ROLE_NPC, npc_transcripts, persona_for

logger = logging.getLogger(__name__)

NPC_SERVER = ChatServer.name
INSTRUCTIONS_TAG = "simulator_instructions"
CONVERSATION_TAG = "simulator_conversation"
#: Who said a message of the conversation the judge reads.
SPEAKER_SIMULATOR = "simulator"
SPEAKER_OTHER = "other"
JUDGE_SYSTEM_PROMPT = (
    "You audit a simulated character in a test conversation: a colleague or a customer played by a model from "
    "its instructions. You get its instructions and the conversation (its own messages as 'simulator', the other "
    "side's as 'other'). Decide whether any message of the simulator contradicts its instructions: it states a "
    "fact they contradict, plays a role they do not give it, tells what they say to keep, asks for something its "
    "scenario does not want, or ends the conversation when they say not to. Staying vague, declining, or saying "
    "less than it could is not a contradiction. Answer with one JSON object and nothing else: "
    '{"followed": true or false, "reason": "one sentence; quote the message when false"}'
)
_MAX_REASON_CHARS = 300


def _judge_prompt(instructions: str, conversation: Sequence[Mapping[str, str]]) -> list[ChatMessage]:
    body = f"{tagged(INSTRUCTIONS_TAG, instructions)}\n{tagged(CONVERSATION_TAG, list(conversation))}"
    return [ChatMessage(role="system", content=JUDGE_SYSTEM_PROMPT), ChatMessage(role="user", content=body)]


def _verdict(text: str | None) -> tuple[bool, str] | None:
    reply = extract_json_object(text)
    if reply is None or not isinstance(reply.get("followed"), bool):
        return None
    reason = " ".join(str(reply.get("reason") or "").split())[:_MAX_REASON_CHARS]
    return reply["followed"], reason


def npc_judge_inputs(chat_state: Mapping[str, Any]) -> list[tuple[str, str, list[dict[str, str]]]]:
    """(simulator, instructions, conversation) of every NPC that replied: the persona prompt it was played from."""
    transcripts = npc_transcripts(chat_state)
    final: Mapping[str, Any] = chat_state
    for key in ("final", "state"):
        if isinstance(final.get(key), Mapping):
            final = final[key]
    npcs = final.get(NPCS) or {}
    inputs: list[tuple[str, str, list[dict[str, str]]]] = []
    for profile_id, turns in sorted(transcripts.items()):
        npc = npcs.get(profile_id)
        if not isinstance(npc, Mapping) or not any(t["role"] == ROLE_NPC for t in turns):
            continue
        conversation = [
            {"speaker": SPEAKER_SIMULATOR if t["role"] == ROLE_NPC else SPEAKER_OTHER, "text": t["content"]}
            for t in turns
        ]
        instructions = persona_system_prompt(persona_for(npc, ""))
        inputs.append((f"{SIMULATOR_NPC_PREFIX}{profile_id}", instructions, conversation))
    return inputs


def user_judge_inputs(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The conversation as the simulated user had it: its messages (`user` in the agent's record) and the agent's
    text replies; tool calls and results are not the user's to see."""
    conversation: list[dict[str, str]] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") not in ("user", "assistant") or not isinstance(content, str) or not content.strip():
            continue
        speaker = SPEAKER_SIMULATOR if message["role"] == "user" else SPEAKER_OTHER
        conversation.append({"speaker": speaker, "text": content})
    return conversation if any(m["speaker"] == SPEAKER_SIMULATOR for m in conversation) else []


async def _judge_one(
    client: ChatClient, config: ModelConfig, simulator: str, instructions: str, conversation: list[dict[str, str]]
) -> SimulatorCheck | None:
    request = ChatRequest(
        model=config.model, messages=_judge_prompt(instructions, conversation), temperature=config.temperature
    )
    try:
        completion = await client.complete(request)
    except LLMError as exc:
        logger.warning("the simulator judge gave no verdict on %s: %s", simulator, exc)
        return None
    verdict = _verdict(completion.choices[0].message.content if completion.choices else None)
    if verdict is None:
        logger.warning("the simulator judge's reply on %s holds no verdict", simulator)
        return None
    followed, reason = verdict
    return SimulatorCheck(
        simulator=simulator, check=CHECK_INSTRUCTIONS, method=CHECK_METHOD_JUDGE, passed=followed, detail=reason
    )


async def judge_checks(
    client: ChatClient, config: ModelConfig, task: Task, artifacts: RunArtifacts
) -> list[SimulatorCheck]:
    """The judge's check of every simulator that spoke in the rollout, one request each."""
    inputs: list[tuple[str, str, list[dict[str, str]]]] = []
    state = artifacts.metadata.get(META_STATE) or {}
    if isinstance(state.get(NPC_SERVER), Mapping):
        inputs += npc_judge_inputs(state[NPC_SERVER])
    if isinstance(task.user, SimulatedUserSpec):
        conversation = user_judge_inputs(artifacts.messages)
        if conversation:
            inputs.append((SIMULATOR_USER, task.user.system_prompt, conversation))
    checks = [await _judge_one(client, config, *one) for one in inputs]
    return [check for check in checks if check is not None]


__all__ = [
    "CONVERSATION_TAG",
    "INSTRUCTIONS_TAG",
    "JUDGE_SYSTEM_PROMPT",
    "judge_checks",
    "npc_judge_inputs",
    "user_judge_inputs",
]
