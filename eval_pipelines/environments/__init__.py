"""Environments: the agent's view of its tool servers (spec 001 BaseEnvironment), over HTTP and MCP."""

from eval_pipelines.environments.base import BaseEnvironment, ToolServerUnavailable
from eval_pipelines.environments.mcp import McpServerSpec
from eval_pipelines.environments.naming import resolve_secret, scoped_secret_variable
from eval_pipelines.environments.unified import UnifiedEnvironment

__all__ = [
    "BaseEnvironment",
    "McpServerSpec",
    "ToolServerUnavailable",
    "UnifiedEnvironment",
    "resolve_secret",
    "scoped_secret_variable",
]
