"""Custom agents for tests, loaded by the engine from 'tests.support.custom_agents:<Class>'."""

from __future__ import annotations

import asyncio
from typing import Any

from eval_pipelines.agents.base import BaseAgent
from eval_pipelines.environments.base import BaseEnvironment
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.types import ChatRequest
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.tools import ToolCall


class SyncMailerAgent(BaseAgent):
    """A synchronous, LLM-free agent: it uses the deprecated sync environment wrappers from its worker thread."""

    def __init__(self, user_tag: str) -> None:
        self.user_tag = user_tag

    @staticmethod
    def name() -> str:
        return "sync_mailer"

    def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        parameters = {"to": "dana@example.com", "subject": f"From {self.user_tag}", "body": instruction[:80]}
        result = environment.call_tool("email", "send_email", parameters)
        context.record_tool_call(ToolCall(tool_server="email", tool_name="send_email", parameters=parameters), result)
        context.set_final_observation("sent")


class NeedsEverything(BaseAgent):
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    @staticmethod
    def name() -> str:
        return "needs_everything"

    async def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        await asyncio.sleep(0)
        context.set_final_observation(",".join(sorted(self.kwargs)))


class NotAnAgent:
    pass


class SilentSpender(BaseAgent):
    """Calls its model three times and never counts a token: the chat client's meter must."""

    CALLS = 3

    def __init__(self, client: ChatClient, model_config: ModelConfig) -> None:
        self.client, self.model_config = client, model_config

    @staticmethod
    def name() -> str:
        return "silent_spender"

    async def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        for _ in range(self.CALLS):
            request = ChatRequest.model_validate(
                {"model": self.model_config.model, "messages": [{"role": "user", "content": instruction}]}
            )
            await self.client.complete(request)
        context.set_final_observation("done")
