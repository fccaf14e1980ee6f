"""The user of a task, as its spec asks for."""

from __future__ import annotations

from eval_pipelines.llm.client import ChatClient
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.scenarios import ScriptedUserSpec, SimulatedUserSpec
from eval_pipelines.users.base import User, UserSimulatorError
from eval_pipelines.users.scripted import ScriptedUser
from eval_pipelines.users.simulated import LlmUser


def build_user(
    spec: ScriptedUserSpec | SimulatedUserSpec,
    client: ChatClient | None,
    model_config: ModelConfig | None,
    user_tag: str | None = None,
) -> User:
    """UserSimulatorError when a simulated user has no model to play it (the sweep names no `user_model`)."""
    if isinstance(spec, ScriptedUserSpec):
        return ScriptedUser(spec)
    if client is None or model_config is None:
        raise UserSimulatorError("the task's user is simulated, but no user model was given (the sweep's user_model)")
    return LlmUser(spec, client, model_config, user_tag)
