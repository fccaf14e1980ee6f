"""Load a custom agent class from `module.path:ClassName`."""

from __future__ import annotations

import importlib
import re

from eval_pipelines.agents.base import BaseAgent
from eval_pipelines.agents.simlab_adapter import SimLabAgentAdapter, is_simlab_agent
from eval_pipelines.schemas.runs import AGENT_PATH_PATTERN

_AGENT_PATH = re.compile(AGENT_PATH_PATTERN)


def load_agent_class(path: str) -> type[BaseAgent]:
    """ValueError for a malformed path or a missing module/class; TypeError when it is not an agent. A SimLab
    agent (duck-typed on name/setup/run) comes back wrapped in `SimLabAgentAdapter`."""
    if not _AGENT_PATH.match(path):
        raise ValueError(f"agent path {path!r} must have the form 'module.path:ClassName'")
    module_name, class_name = path.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"agent module {module_name!r} cannot be imported: {exc}") from exc
    candidate = getattr(module, class_name, None)
    if candidate is None:
        raise ValueError(f"agent module {module_name!r} has no attribute {class_name!r}")
    if is_simlab_agent(candidate):
        return SimLabAgentAdapter.wrapping(candidate)
    if not isinstance(candidate, type) or not issubclass(candidate, BaseAgent):
        raise TypeError(
            f"{path} is neither a subclass of eval_pipelines.agents.BaseAgent nor a SimLab-style agent "
            "(a class with name, setup and run)"
        )
    return candidate
