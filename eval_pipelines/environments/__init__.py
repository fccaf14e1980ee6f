"""Environments: the agent's view of its tool servers (spec 001 BaseEnvironment)."""

from eval_pipelines.environments.base import BaseEnvironment, ToolServerUnavailable
from eval_pipelines.environments.unified import UnifiedEnvironment

__all__ = ["BaseEnvironment", "ToolServerUnavailable", "UnifiedEnvironment"]
