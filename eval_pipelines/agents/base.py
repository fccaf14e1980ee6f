"""BaseAgent: the agent contract of spec 001."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any

from eval_pipelines.environments.base import BaseEnvironment
from eval_pipelines.schemas.artifacts import RunArtifacts

#: `RunArtifacts.metadata` key where an agent states why it stopped (a `TerminationReason` value).
META_TERMINATION = "termination_reason"


class BaseAgent(ABC):
    """The runner calls `setup(environment)` once, then `run(instruction, environment, context)`.

    Either may be a coroutine function. `context` is the RunArtifacts record the agent fills in; whatever it
    holds when a timeout or cancellation hits is kept as the partial artifacts.
    """

    @staticmethod
    @abstractmethod
    def name() -> str: ...

    def version(self) -> str | None:
        return None

    def setup(self, environment: BaseEnvironment) -> Any:  # noqa: B027 - optional warm-up hook
        """Discover tools or warm up; default: nothing."""

    @abstractmethod
    def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> Any: ...


def construct_agent(agent_class: type[Any], available: dict[str, Any]) -> Any:
    """An instance, given whichever of `available` its constructor names (all of them if it takes **kwargs)."""
    parameters = inspect.signature(agent_class).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return agent_class(**available)
    return agent_class(**{name: value for name, value in available.items() if name in parameters})
