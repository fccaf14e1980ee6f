"""Agents: the BaseAgent contract, the reference tool-calling agent and custom-agent loading."""

from eval_pipelines.agents.base import BaseAgent
from eval_pipelines.agents.loader import load_agent_class

__all__ = ["BaseAgent", "load_agent_class"]
