"""The rollout's deadline, as the chat client sees it.

The engine gives each rollout's agent a fixed time. When that time runs out while a model request is still
unanswered (the endpoint hangs, trickles its reply, or keeps the client waiting behind 429s and retry
back-offs), nothing was learned about the agent: it is the endpoint's error, not the agent's timeout. The
engine publishes the deadline here (a context variable, like the usage meter, so it follows the agent's tasks
and worker threads); every `ChatClient` request made inside is bounded by what remains of it and registered
while it is unanswered, so the engine can tell the endpoint's time from the agent's. Code outside a rollout
(judges, NPCs, probes) sees no deadline and keeps its own timeouts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from eval_pipelines.llm.errors import LLMTimeoutError


@dataclass
class PendingRequest:
    """A model request the endpoint has not answered yet; `last_answer` is what its latest attempt got
    (`HTTP 429`, `ReadTimeout`, ...), None while the first attempt is unanswered."""

    model: str | None
    #: the endpoint, already redacted
    where: str
    last_answer: str | None = None


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
        request = PendingRequest(model, where)
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
        with self._lock:
            request = self._pending[0] if self._pending else self._ran_out
        return None if request is None else self.describe(request)

    def describe(self, request: PendingRequest) -> str:
        subject = f"chat completion for model {request.model!r}" if request.model else "request"
        last = f"the last attempt got {request.last_answer}" if request.last_answer else "no attempt was answered"
        return (
            f"{subject} at {request.where} was still unanswered when the rollout's time limit "
            f"({self.seconds:g}s) ran out ({last})"
        )


_CURRENT: ContextVar[RolloutDeadline | None] = ContextVar("eval_pipelines_rollout_deadline", default=None)


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
