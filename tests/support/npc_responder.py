"""`RecordingResponder`: the deterministic simulated NPC, keeping every prompt it is given, for tests that check
what an NPC was told (its persona, its personality, its secret)."""

from __future__ import annotations

from eval_pipelines.llm.types import ChatMessage, ChatRequest
from eval_pipelines.sim.npc import SIM_NPC, sim_npc_persona


class RecordingResponder:
    """Plays every NPC with the deterministic simulated NPC, and keeps each prompt it was given."""

    def __init__(self) -> None:
        self.prompts: list[list[ChatMessage]] = []

    @property
    def model(self) -> str:
        return SIM_NPC

    async def reply(self, messages: list[ChatMessage]) -> str:
        self.prompts.append(messages)
        return sim_npc_persona(ChatRequest(model=SIM_NPC, messages=messages))
