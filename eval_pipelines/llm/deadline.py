"""The rollout's deadline, as the chat client sees it.

The engine gives each rollout's agent a fixed time. When that time runs out while a model request is still
unanswered (the endpoint hangs, trickles its reply, or keeps the client waiting behind 429s and retry
back-offs), nothing was learned about the agent: it is the endpoint's error, not the agent's timeout. The
engine publishes the deadline here (a context variable, like the usage meter, so it follows the agent's tasks
and worker threads); every `ChatClient` request made inside is bounded by what remains of it and registered
while it is unanswered, so the engine can tell the endpoint's time from the agent's. Code outside a rollout
(judges, NPCs, probes) sees no deadline and keeps its own timeouts.

Not every model a rollout calls is the agent's: the model playing a multi-turn task's user is too. Its requests
run under `request_role(ROLE_USER)`, so a rollout whose time ran out on the user's model is told apart from one
that ran out on the agent's endpoint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from eval_pipelines.llm.errors import LLMTimeoutError

#: Who a model request is made for: the agent under evaluation (the default), or the model playing its user.
ROLE_AGENT = "agent"
ROLE_USER = "user"


@dataclass
class PendingRequest:
    """A model request the endpoint has not answered yet; `last_answer` is what its latest attempt got
    (`HTTP 429`, `ReadTimeout`, ...), None while the first attempt is unanswered."""

    model: str | None
    #: the endpoint, already redacted
    where: str
    last_answer: str | None = None
    #: ROLE_AGENT or ROLE_USER: whose model left it unanswered
    role: str = ROLE_AGENT


class RolloutDeadline:
    """When the rollout's time runs out, and which model requests are unanswered. Thread-safe: a sync agent's
    requests run on its worker thread."""

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._at = clock() + seconds
        self._lock = threading.Lock()
        self._pending: list[PendingRequest] = []
        self._ran_out: PendingRequest | None = None

    def remaining(self) -> float:
        return self._at - self._clock()

    @contextmanager
    def pending(self, model: str | None, where: str) -> Iterator[PendingRequest]:
        """Register a request as unanswered for the code inside (its retries and back-offs included)."""
        request = PendingRequest(model, where, role=_ROLE.get())
        with self._lock:
            self._pending.append(request)
        try:
            yield request
        finally:
            with self._lock:
                self._pending.remove(request)

    def ran_out(self, request: PendingRequest, *, secrets: Iterable[str | None] = ()) -> LLMTimeoutError:
        """The error for a request the deadline cut off; remembered, so an agent that swallows the error and
        then runs out of time still ends as the endpoint's error."""
        with self._lock:
            if self._ran_out is None:
                self._ran_out = request
        return LLMTimeoutError(self.describe(request), secrets=secrets)

    def unanswered(self) -> str | None:
        """Why the rollout's time ran out on the model endpoint: a request unanswered now, or one the deadline
        cut off before; None when the time was all the agent's own."""
        request = self.unanswered_request()
        return None if request is None else self.describe(request)

    def unanswered_request(self) -> PendingRequest | None:
        """The request `unanswered` describes (its `role` says whose model it was), or None."""
        with self._lock:
            return self._pending[0] if self._pending else self._ran_out

    def describe(self, request: PendingRequest) -> str:
        subject = f"chat completion for model {request.model!r}" if request.model else "request"
        if request.role == ROLE_USER:
            subject = f"{subject} playing the user"
        last = f"the last attempt got {request.last_answer}" if request.last_answer else "no attempt was answered"
        return (
            f"{subject} at {request.where} was still unanswered when the rollout's time limit "
            f"({self.seconds:g}s) ran out ({last})"
        )


_CURRENT: ContextVar[RolloutDeadline | None] = ContextVar("eval_pipelines_rollout_deadline", default=None)
_ROLE: ContextVar[str] = ContextVar("eval_pipelines_request_role", default=ROLE_AGENT)


@contextmanager
def request_role(role: str) -> Iterator[None]:
    """Tag the model requests made inside as made for `role` (ROLE_USER for a simulated user's model)."""
    token = _ROLE.set(role)
    try:
        yield
    finally:
        _ROLE.reset(token)


def current_deadline() -> RolloutDeadline | None:
    return _CURRENT.get()


@contextmanager
def rollout_deadline(deadline: RolloutDeadline) -> Iterator[RolloutDeadline]:
    """Make `deadline` current for the code inside (and the tasks and threads it starts)."""
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)
