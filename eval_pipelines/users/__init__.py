"""The user a multi-turn task's agent talks with: scripted turns, or a model playing a persona."""

from eval_pipelines.users.base import User, UserSimulatorError, UserTurn
from eval_pipelines.users.build import build_user
from eval_pipelines.users.scripted import ScriptedUser
from eval_pipelines.users.simulated import LlmUser

__all__ = ["LlmUser", "ScriptedUser", "User", "UserSimulatorError", "UserTurn", "build_user"]
