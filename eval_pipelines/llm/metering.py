"""Usage metered where every model call passes: in the chat client, not in the agent.

The engine opens a `UsageMeter` around each rollout's agent (a context variable, so it follows the agent's
tasks and worker threads); every `ChatClient.complete` made inside records its tokens and estimated cost
there. A custom agent that never counts its own tokens is therefore metered, and the run's cost ceiling sees
what it spent, like the reference agent's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from eval_pipelines.llm.pricing import estimate_cost_usd
from eval_pipelines.schemas.runs import TokenUsage


class UsageMeter:
    """Tokens, estimated cost and calls of the model calls made while it is current. Thread-safe: a sync
    agent's calls arrive from its worker thread."""

    def __init__(self) -> None:
        self._usage = TokenUsage()
        self._lock = threading.Lock()

    def record(self, model: str, prompt_tokens: int, completion_tokens: int) -> None:
        step = TokenUsage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
            cost_usd=estimate_cost_usd(model, prompt_tokens, completion_tokens),
            llm_calls=1,
        )
        with self._lock:
            self._usage = self._usage.add(step)

    @property
    def usage(self) -> TokenUsage:
        with self._lock:
            return self._usage


_CURRENT: ContextVar[UsageMeter | None] = ContextVar("eval_pipelines_usage_meter", default=None)


def current_meter() -> UsageMeter | None:
    return _CURRENT.get()


@contextmanager
def metering(meter: UsageMeter) -> Iterator[UsageMeter]:
    """Make `meter` current for the code inside (and the tasks and threads it starts)."""
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)
