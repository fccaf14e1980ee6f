"""Pydantic models of the OpenAI-compatible chat-completions wire.

Reading is liberal: unknown fields are kept (`extra="allow"`), content given as a list of parts is joined,
tool-call arguments given as an object are re-encoded. Writing is conservative: `to_wire()` emits only the
fields the OpenAI contract defines for messages and tools, because stricter servers reject unknown keys
(e.g. a `reasoning_content` read from one provider sent back to another).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Separator between tool server and tool in the function name the model sees: `<tool_server>__<tool_name>`.
TOOL_NAME_SEPARATOR = "__"


def wire_tool_name(tool_server: str, tool_name: str) -> str:
    """The OpenAI function name of a tool, as the reference agent exposes it."""
    return f"{tool_server}{TOOL_NAME_SEPARATOR}{tool_name}"


def split_wire_tool_name(name: str) -> tuple[str, str] | None:
    """`email__send_email` -> (`email`, `send_email`); None when the name has no server part."""
    server, sep, tool = name.partition(TOOL_NAME_SEPARATOR)
    if not sep or not server or not tool:
        return None
    return server, tool


class _WireModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class FunctionCall(_WireModel):
    name: str
    #: JSON text, as the OpenAI contract has it. Use `ToolCallWire.parsed_arguments()` to read it.
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _encode_object_arguments(cls, value: Any) -> Any:
        # Some OpenAI-compatible servers (Ollama, some proxies) send the arguments as an object.
        if value is None:
            return "{}"
        if isinstance(value, dict | list):
            return json.dumps(value)
        return value


class ToolCallWire(_WireModel):
    # A few servers omit the id; the agent still needs one to pair the tool result with the call.
    id: str = Field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")
    type: str = "function"
    function: FunctionCall

    @field_validator("id", mode="before")
    @classmethod
    def _fill_empty_id(cls, value: Any) -> Any:
        return value or f"call_{uuid.uuid4().hex[:24]}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; malformed JSON or a non-object becomes `{}` (the reference agent's rule)."""
        try:
            value = json.loads(self.function.arguments or "{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.function.name, "arguments": self.function.arguments},
        }


def _join_content_parts(value: Any) -> Any:
    # Content may arrive as a list of parts ({"type": "text", "text": ...}); the project works with text.
    if isinstance(value, list):
        texts = [
            part.get("text", "") for part in value if isinstance(part, dict) and part.get("type", "text") == "text"
        ]
        return "".join(t for t in texts if isinstance(t, str))
    return value


class ChatMessage(_WireModel):
    role: str
    content: str | None = None
    tool_calls: list[ToolCallWire] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _normalise_content(cls, value: Any) -> Any:
        return _join_content_parts(value)

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> ChatMessage:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str | None = None, tool_calls: list[ToolCallWire] | None = None) -> ChatMessage:
        return cls(role="assistant", content=content, tool_calls=tool_calls or None)

    @classmethod
    def tool(cls, tool_call_id: str, content: str, name: str | None = None) -> ChatMessage:
        return cls(role="tool", tool_call_id=tool_call_id, content=content, name=name)

    def to_wire(self) -> dict[str, Any]:
        # `content` is always present: several servers reject an assistant turn that omits it.
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_wire() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        return data


class FunctionSpec(_WireModel):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolSpec(_WireModel):
    type: Literal["function"] = "function"
    function: FunctionSpec

    @classmethod
    def for_tool(
        cls, tool_server: str, tool_name: str, description: str = "", parameters: dict[str, Any] | None = None
    ) -> ToolSpec:
        spec = FunctionSpec(name=wire_tool_name(tool_server, tool_name), description=description)
        if parameters is not None:
            spec.parameters = parameters
        return cls(function=spec)

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.function.name,
                "description": self.function.description,
                "parameters": self.function.parameters,
            },
        }


class ChatRequest(_WireModel):
    """A chat-completions request. Extra provider parameters (`seed`, `stop`, `response_format`...) may be
    passed as keyword arguments and are sent as given."""

    model: str
    messages: list[ChatMessage]
    tools: list[ToolSpec] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    #: An end-user id; the agent sends the rollout id, which also seeds the simulated models.
    user: str | None = None
    seed: int | None = None
    stop: str | list[str] | None = None

    def to_wire(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude_none=True, exclude={"messages", "tools"})
        data["messages"] = [message.to_wire() for message in self.messages]
        if self.tools:
            data["tools"] = [tool.to_wire() for tool in self.tools]
        elif "tool_choice" in data:
            # `tool_choice` without `tools` is a 400 on OpenAI.
            del data["tool_choice"]
        return data

    def first_user_content(self) -> str | None:
        for message in self.messages:
            if message.role == "user":
                return message.content
        return None


class TopLogprob(_WireModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprob(_WireModel):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[TopLogprob] = Field(default_factory=list)


class ChoiceLogprobs(_WireModel):
    content: list[TokenLogprob] | None = None


class Choice(_WireModel):
    index: int = 0
    message: ChatMessage
    finish_reason: str | None = None
    logprobs: ChoiceLogprobs | None = None


class Usage(_WireModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    @field_validator("prompt_tokens", "completion_tokens", "total_tokens", mode="before")
    @classmethod
    def _none_is_zero(cls, value: Any) -> Any:
        return 0 if value is None else value


class ChatCompletion(_WireModel):
    id: str = ""
    object: str = "chat.completion"
    created: int = 0
    model: str = ""
    choices: list[Choice] = Field(default_factory=list)
    usage: Usage | None = None
    system_fingerprint: str | None = None

    @property
    def message(self) -> ChatMessage:
        """The first choice's message (the client guarantees there is one)."""
        return self.choices[0].message

    @property
    def tool_calls(self) -> list[ToolCallWire]:
        return list(self.message.tool_calls or []) if self.choices else []

    @property
    def text(self) -> str:
        return (self.message.content or "") if self.choices else ""
