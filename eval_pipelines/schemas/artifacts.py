"""RunArtifacts (spec 001): the record an agent fills in and verifiers read."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr

from eval_pipelines.schemas._base import WireModel, utc_now_iso
from eval_pipelines.schemas.tools import ToolCall, ToolCallResult

ARTIFACTS_VERSION = "0.1"

#: Keys of `RunArtifacts.metadata` that the engine fills and verifiers read.
META_STATE = "state"  # {tool_server: {"initial": state, "final": state}}
META_STATE_DIFFS = "state_diffs"  # list of StateDiff dicts: one per mutating call, then one `full` per server
META_USAGE = "usage"  # {"prompt_tokens", "completion_tokens", "total_tokens", "cost_usd", "llm_calls"}
META_TIMEOUT = "timeout"
META_CLIENT_CONTEXT = "client_context"
META_LOGPROBS = "logprobs"
META_NPC_TRANSCRIPTS = "npc_transcripts"
#: {tool_server: workspace URL} of the rollout: where a verifier may query a server before teardown
META_TOOL_SERVERS = "tool_servers"
#: {tool_server: SimLab name} when the task's verifiers are SimLab's (see `Task.simlab_servers`)
META_SIMLAB_SERVERS = "simlab_servers"
#: True when the final answer is a tool call written as text (a template the endpoint did not parse).
META_TEXT_TOOL_CALL = "final_answer_is_tool_call"


class RunArtifacts(WireModel):
    version: str = ARTIFACTS_VERSION
    task_id: str
    task: str
    model: str | None = None
    provider: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_results: list[ToolCallResult] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    final_observation: str | None = None
    error: str | None = None
    steps_taken: int = 0
    max_steps: int | None = None
    created_at: str = Field(default_factory=utc_now_iso)

    _on_step: Callable[[int], None] | None = PrivateAttr(default=None)

    def set_on_step(self, callback: Callable[[int], None] | None) -> None:
        self._on_step = callback

    def record_message(self, role: str, content: Any, **extra: Any) -> None:
        """Append a message; `extra` carries chat fields such as `tool_calls` or `tool_call_id`."""
        self.messages.append({"role": role, "content": content, "timestamp": utc_now_iso(), **extra})

    def record_tool_call(
        self, call: ToolCall, result: ToolCallResult, on_step: Callable[[int], None] | None = None
    ) -> None:
        self.tool_calls.append(call)
        self.tool_results.append(result)
        self.steps_taken += 1
        callback = on_step or self._on_step
        if callback is not None:
            # A progress hook must never break the rollout.
            with contextlib.suppress(Exception):
                callback(self.steps_taken)

    def set_final_observation(self, text: str) -> None:
        self.final_observation = text

    def set_error(self, text: str) -> None:
        self.error = text

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def dump(self, path: str | Path) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        # pydantic-core's encoder: the pure-Python one cost a visible share of a rollout's CPU.
        target.write_text(self.model_dump_json(indent=2), encoding="utf-8")
        return target
