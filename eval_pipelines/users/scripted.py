"""ScriptedUser: the task's user turns said in order (BFCL multi-turn), with tools unlocked per turn."""

from __future__ import annotations

from eval_pipelines.schemas.artifacts import USER_ENDING_SCRIPTED
from eval_pipelines.schemas.scenarios import ScriptedUserSpec
from eval_pipelines.users.base import UserTurn


class ScriptedUser:
    def __init__(self, spec: ScriptedUserSpec) -> None:
        self.spec = spec
        self.agent_greeting: str | None = None
        self.ending: str | None = None
        self._next_turn = 0

    def _say(self, turn: int) -> str:
        # A turn without text only brings tools in; the model still needs a message to answer.
        return self.spec.turns[turn] or self.spec.unlock_message

    async def opening(self) -> str | None:
        self._next_turn = 1
        return self._say(0)

    async def reply(self, agent_text: str) -> UserTurn | None:
        turn = self._next_turn
        if turn >= len(self.spec.turns):
            self.ending = USER_ENDING_SCRIPTED
            return None
        self._next_turn = turn + 1
        return UserTurn(text=self._say(turn), unlocked_tools=self.spec.unlocked_at(turn))
