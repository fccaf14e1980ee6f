"""LlmUser: a model plays the task's user from its persona and instructions, as τ²-bench's user simulator does.

The simulator sees the conversation with the roles flipped (the agent's messages as `user`, its own as
`assistant`) and only the text of it: the agent's tool calls are not the user's to see. Saying one of the task's
stop tokens ends the conversation.
"""

from __future__ import annotations

from typing import Any

from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.deadline import ROLE_USER, request_role
from eval_pipelines.llm.errors import LLMError
from eval_pipelines.llm.types import ChatMessage, ChatRequest
from eval_pipelines.schemas.artifacts import USER_ENDING_MAX_TURNS
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.scenarios import SimulatedUserSpec
from eval_pipelines.users.base import UserSimulatorError, UserTurn


class LlmUser:
    def __init__(
        self, spec: SimulatedUserSpec, client: ChatClient, model_config: ModelConfig, user_tag: str | None = None
    ) -> None:
        self.spec = spec
        self.client = client
        self.model_config = model_config
        #: the request's `user` field (the rollout, and for a simulated user model the task it plays)
        self.user_tag = user_tag
        self.agent_greeting = spec.agent_greeting
        self.ending: str | None = None
        self._history: list[dict[str, Any]] = [{"role": "system", "content": spec.system_prompt}]
        self._said = 0

    async def opening(self) -> str | None:
        if self.agent_greeting is not None:
            self._history.append({"role": "user", "content": self.agent_greeting})
        text = await self._speak()
        self.ending = self._stop_token(text)
        return text

    async def reply(self, agent_text: str) -> UserTurn | None:
        if self.ending is not None:
            return None
        if self._said >= self.spec.max_turns:
            self.ending = USER_ENDING_MAX_TURNS
            return None
        self._history.append({"role": "user", "content": agent_text})
        text = await self._speak()
        self.ending = self._stop_token(text)
        return UserTurn(text=text, ending=self.ending)

    def _stop_token(self, text: str) -> str | None:
        return next((token for token in self.spec.stop_tokens if token and token in text), None)

    async def _speak(self) -> str:
        request = ChatRequest(
            model=self.model_config.model,
            messages=[ChatMessage.model_validate(message) for message in self._history],
            temperature=self.model_config.temperature,
            **({"user": self.user_tag} if self.user_tag else {}),
        )
        try:
            with request_role(ROLE_USER):
                completion = await self.client.complete(request)
        except LLMError as exc:
            raise UserSimulatorError(f"the model playing the user failed: {exc}") from None
        text = completion.choices[0].message.content if completion.choices else None
        if not isinstance(text, str) or not text.strip():
            raise UserSimulatorError(
                f"the model playing the user ({self.model_config.model!r}) answered without any text"
            )
        self._history.append({"role": "assistant", "content": text})
        self._said += 1
        return text
