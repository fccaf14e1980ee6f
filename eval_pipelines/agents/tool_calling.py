"""The reference agent: a tool-calling loop over an OpenAI-compatible chat-completions endpoint."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pydantic_core

from eval_pipelines.agents.base import META_TERMINATION, BaseAgent
from eval_pipelines.environments.base import BaseEnvironment
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.history import compact_history
from eval_pipelines.llm.types import (
    ChatCompletion,
    ChatMessage,
    ChatRequest,
    ToolSpec,
    split_wire_tool_name,
    wire_tool_name,
)
from eval_pipelines.schemas.artifacts import META_LOGPROBS, RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import MSG_MAX_STEPS, TerminationReason
from eval_pipelines.schemas.tools import ToolCall, ToolCallResult

DEFAULT_SYSTEM_PROMPT = (
    "You are a capable assistant working inside a company's tools. Use the tools to complete the user's task. "
    "Act on the tools rather than describing what you would do. When the task is done, reply with a short "
    "summary and no tool call."
)


#: `RunArtifacts.metadata` key: how many times the history sent to the model was shortened.
META_SUMMARIES = "history_summaries"

_NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
#: Specs already built, by name, description and schema: every rollout of a run lists the same tools, and
#: validating them again was a visible share of a rollout's CPU. Bounded: emptied when full.
_SPECS: dict[tuple[str, str, bytes], ToolSpec] = {}
_MAX_SPECS = 4096


def _tool_spec(wire: str, description: str, parameters: dict[str, Any]) -> ToolSpec:
    """The wire spec of one tool (shared between agents, which only ever send it)."""
    key = (wire, description, pydantic_core.to_json(parameters))
    spec = _SPECS.get(key)
    if spec is None:
        if len(_SPECS) >= _MAX_SPECS:
            _SPECS.clear()
        spec = ToolSpec.model_validate(
            {"type": "function", "function": {"name": wire, "description": description, "parameters": parameters}}
        )
        _SPECS[key] = spec
    return spec


def unknown_tool_message(name: str) -> str:
    return f"Unknown tool call requested by model: {name}"


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """A tool call's argument text as an object, or the reason it is not one (then the call must not run)."""
    if raw is None or not raw.strip():
        return {}, None
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if not isinstance(parsed, dict):
        return {}, f"expected a JSON object, got {type(parsed).__name__}"
    return parsed, None


class ToolCallingAgent(BaseAgent):
    """One LLM call per step, up to `max_steps`; every requested tool call is executed; a reply without tool
    calls is the final observation. The model sees each tool as `<tool_server>__<tool_name>`."""

    def __init__(
        self,
        client: ChatClient,
        model_config: ModelConfig,
        *,
        user_tag: str | None = None,
        stop_event: asyncio.Event | None = None,
    ) -> None:
        self.client = client
        self.model_config = model_config
        self.user_tag = user_tag
        self.stop_event = stop_event
        self._tools: dict[str, tuple[str, str]] = {}
        self._tool_specs: list[ToolSpec] = []
        #: The history as last sent: each message dict beside its validated form. A turn validates only the
        #: messages added since (validating the whole history every turn was most of the agent's own CPU).
        self._validated: list[tuple[dict[str, Any], ChatMessage]] = []

    @staticmethod
    def name() -> str:
        return "tool_calling_agent"

    def version(self) -> str | None:
        return "1.0"

    async def setup(self, environment: BaseEnvironment) -> None:
        self._tools.clear()
        self._tool_specs.clear()
        for tool in await environment.alist_tools():
            wire = wire_tool_name(tool["tool_server"], tool["name"])
            if wire in self._tools:
                raise ValueError(f"duplicate tool wire name {wire!r}")
            self._tools[wire] = (tool["tool_server"], tool["name"])
            self._tool_specs.append(
                _tool_spec(wire, tool.get("description", ""), tool.get("parameters") or _NO_PARAMETERS)
            )

    def _request(self, messages: list[dict[str, Any]]) -> ChatRequest:
        # The messages already validated are the same objects at the head of `messages` (a compaction replaces
        # the older ones with a summary, which ends the shared head there).
        shared = 0
        while (
            shared < len(self._validated) and shared < len(messages) and self._validated[shared][0] is messages[shared]
        ):
            shared += 1
        self._validated = self._validated[:shared] + [(m, ChatMessage.model_validate(m)) for m in messages[shared:]]
        extra: dict[str, Any] = {}
        if self.model_config.log_prob:
            extra["logprobs"] = True
        if self.user_tag:
            extra["user"] = self.user_tag
        return ChatRequest(
            model=self.model_config.model,
            messages=[validated for _, validated in self._validated],
            tools=list(self._tool_specs) or None,
            temperature=self.model_config.temperature,
            **extra,
        )

    def _account(self, context: RunArtifacts, completion: ChatCompletion) -> None:
        # Tokens and cost are metered by the chat client (llm/metering.py); only log-probabilities are ours.
        if self.model_config.log_prob and completion.choices and completion.choices[0].logprobs is not None:
            logprobs = completion.choices[0].logprobs
            dumped = logprobs.model_dump() if hasattr(logprobs, "model_dump") else logprobs
            context.metadata.setdefault(META_LOGPROBS, []).append(dumped)

    async def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        if not self._tools:
            await self.setup(environment)
        system_prompt = self.model_config.system_prompt or DEFAULT_SYSTEM_PROMPT
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": instruction},
        ]
        context.record_message("system", system_prompt)
        context.record_message("user", instruction)
        every = self.model_config.summarize_every_n_turns
        for turn in range(self.model_config.max_steps):
            if self.stop_event is not None and self.stop_event.is_set():
                raise asyncio.CancelledError()
            if every and turn and turn % every == 0:
                compacted = compact_history(messages, self.model_config.context_stride)
                if compacted is not messages:
                    messages = compacted
                    context.metadata[META_SUMMARIES] = context.metadata.get(META_SUMMARIES, 0) + 1
            completion = await self.client.complete(self._request(messages))
            self._account(context, completion)
            if not completion.choices:
                raise ValueError("model returned no choices")
            reply = completion.choices[0].message
            tool_calls = list(reply.tool_calls or [])
            if not tool_calls:
                text = reply.content or ""
                messages.append({"role": "assistant", "content": text})
                context.record_message("assistant", text)
                context.set_final_observation(text)
                context.metadata[META_TERMINATION] = TerminationReason.FINAL_RESPONSE.value
                return
            wire_calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in tool_calls
            ]
            messages.append({"role": "assistant", "content": reply.content, "tool_calls": wire_calls})
            context.record_message("assistant", reply.content, tool_calls=wire_calls)
            for call in tool_calls:
                result, call_record = await self._execute(environment, call.function.name, call.function.arguments)
                observation = (
                    result.observation if isinstance(result.observation, str) else json.dumps(result.observation)
                )
                messages.append({"role": "tool", "tool_call_id": call.id, "content": observation})
                context.record_message("tool", observation, tool_call_id=call.id, is_error=result.is_error)
                context.record_tool_call(call_record, result)
        context.metadata[META_TERMINATION] = TerminationReason.MAX_STEPS.value
        context.set_error(MSG_MAX_STEPS)

    async def _execute(
        self, environment: BaseEnvironment, wire: str, raw_arguments: str | None
    ) -> tuple[ToolCallResult, ToolCall]:
        target = self._tools.get(wire)
        server, tool = target or split_wire_tool_name(wire) or ("unknown", wire)
        arguments, problem = parse_arguments(raw_arguments)
        if problem is not None:
            # Calling the tool with {} would answer with a misleading "missing parameter"; the model needs to
            # hear what was wrong with what it wrote, and the raw text is evidence worth keeping.
            message = f"Invalid arguments for {wire}: {problem}; the tool was not called"
            call = ToolCall(tool_server=server, tool_name=tool, raw_arguments=raw_arguments, arguments_error=problem)
            return ToolCallResult(observation=message, is_error=True), call
        call = ToolCall(tool_server=server, tool_name=tool, parameters=arguments)
        if target is None:
            return ToolCallResult(observation=unknown_tool_message(wire), is_error=True), call
        return await environment.acall_tool(server, tool, arguments), call
