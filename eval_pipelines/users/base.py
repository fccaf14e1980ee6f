"""The User protocol the reference agent's multi-turn loop talks to, and the error of a failing user model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class UserTurn:
    """What the user says when the agent hands the turn back."""

    text: str
    #: tools that become visible to the agent from this turn on
    unlocked_tools: list[str] = field(default_factory=list)
    #: the stop token, when the user ends the conversation while saying `text`
    ending: str | None = None


class UserSimulatorError(RuntimeError):
    """The model playing the user failed: unreachable, refused, answered garbage or nothing. The rollout is then
    the user simulator's error (`ErrorClass.USER_SIMULATOR`), never the agent's failure."""


class User(Protocol):
    @property
    def agent_greeting(self) -> str | None:
        """The agent's fixed first message, said before the user opens (τ²), or None."""
        ...

    @property
    def ending(self) -> str | None:
        """Why the conversation ended, once it has: a stop token, `scripted_end` or `max_turns`."""
        ...

    async def opening(self) -> str | None:
        """The first user message; None leaves the task's instruction as the first message."""
        ...

    async def reply(self, agent_text: str) -> UserTurn | None:
        """The user's answer to the agent's text-only reply; None when the conversation is over."""
        ...
