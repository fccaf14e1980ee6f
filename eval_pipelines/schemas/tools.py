"""Tool-server protocol (spec 001): tool definitions, step request/response, tool calls and state diffs."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import AliasChoices, Field, model_validator

from eval_pipelines.schemas._base import WireModel

STATE_DIFF_MARKER = "[STATE DIFF]"


class ListingScope(StrEnum):
    """`listing_scope` of a `/tools` answer: may a client reuse one workspace's listing for another?"""

    #: every workspace of this server lists the same tools
    SERVER = "server"
    #: a workspace's tools depend on it (its seed names them)
    WORKSPACE = "workspace"


#: The key of a `/tools` answer that says its ListingScope (absent: `workspace`, nothing is assumed).
LISTING_SCOPE_KEY = "listing_scope"
#: Where our MCP-served tool servers put a call's StateDiff in the MCP result's `_meta`.
STATE_DIFF_META_KEY = "eval_pipelines/state_diff"


def observation_with_state_diff(observation: str, diff_summary: str) -> str:
    """The tool message the agent sees after a mutating call: the observation, then the diff after the marker."""
    return f"{observation}\n\n{STATE_DIFF_MARKER}\n{diff_summary}"


class ToolDefinition(WireModel):
    """A tool listing item. The schema is `parameters` in spec 001, `inputSchema` for task generation and
    `input_schema` in the hosted product: all three are accepted, `parameters` is emitted."""

    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}, "required": []},
        validation_alias=AliasChoices("parameters", "inputSchema", "input_schema"),
    )
    mutates_state: bool | None = None

    def as_task_gen_tool(self) -> dict[str, Any]:
        """The shape task generation expects (`inputSchema`)."""
        return {"name": self.name, "description": self.description, "inputSchema": self.parameters}


class ToolListing(WireModel):
    tools: list[ToolDefinition]


class StepAction(WireModel):
    tool_name: str = Field(min_length=1)
    parameters: dict[str, Any] = Field(default_factory=dict)


class StepRequest(WireModel):
    action: StepAction


class DiffScope(StrEnum):
    TOOL_CALL = "tool_call"
    FULL = "full"


class StateDiff(WireModel):
    """A before/after comparison of a tool server's state. `before`/`after` hold only the changed entities,
    keyed by collection then id; `summary` is the human-readable text the agent sees."""

    tool_server: str
    scope: DiffScope
    summary: str
    before: dict[str, Any] = Field(default_factory=dict)
    after: dict[str, Any] = Field(default_factory=dict)
    step_index: int | None = None
    tool_name: str | None = None

    @property
    def is_empty(self) -> bool:
        return not self.before and not self.after


class StepResponse(WireModel):
    """`{"observation": text}` or `{"observation": text, "is_error": true}` (spec form). A local server may add
    `state_diff` for a mutating call. The hosted product wraps the observation in an object; that form is
    lifted here so the rest of the project only ever sees text."""

    observation: str
    is_error: bool = False
    state_diff: StateDiff | None = None
    #: local extension: what failed when it was not the call itself (an `ErrorClass` value, e.g. `npc_model`).
    error_source: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _lift_wrapped_observation(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("observation"), dict):
            wrapped = data["observation"]
            text = wrapped.get("text")
            if text is None:
                parts = [c.get("text", "") for c in wrapped.get("content") or [] if isinstance(c, dict)]
                text = "\n".join(p for p in parts if p)
            return {
                **{k: v for k, v in data.items() if k != "observation"},
                "observation": text or "",
                "is_error": bool(wrapped.get("is_error", data.get("is_error", False))),
            }
        return data


class ToolCall(WireModel):
    tool_server: str
    tool_name: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    #: local extension: the model's argument text when it was not a JSON object (the tool was then not called).
    raw_arguments: str | None = None
    #: local extension: why `raw_arguments` could not be used, as the model was told.
    arguments_error: str | None = None


class ToolCallResult(WireModel):
    observation: Any = None
    is_error: bool = False
    #: local extension: set when something other than the agent's call failed (see `StepResponse`).
    error_source: str | None = None


class Transport(StrEnum):
    HTTP = "http"
    MCP = "mcp"


class ToolNamespace(WireModel):
    """One tool server as an environment sees it."""

    name: str
    transport: Transport
    url: str | None = None
    command: list[str] | None = None
