"""The reference agent: a tool-calling loop over an OpenAI-compatible chat-completions endpoint."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pydantic_core

from eval_pipelines.agents.base import META_TERMINATION, BaseAgent
from eval_pipelines.environments.base import BaseEnvironment
from eval_pipelines.lib.json_values import (
    first_lone_surrogate,
    replace_lone_surrogates,
    text_nests_deeper_than,
    without_lone_surrogates,
)
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
from eval_pipelines.schemas.artifacts import META_LOGPROBS, META_TOOL_CALLS_OVER_CAP, RunArtifacts
from eval_pipelines.schemas.limits import MAX_JSON_DEPTH
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import MSG_MAX_STEPS, TerminationReason
from eval_pipelines.schemas.tools import ToolCall, ToolCallResult
from eval_pipelines.users.base import User

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


#: What a refused call's arguments become in the history sent back to the model. An endpoint that parses the
#: history (llama.cpp does) answers 500 to the raw text, which would end the rollout as the endpoint's error for
#: what was the model's mistake. The raw text stays in the record (`ToolCall.raw_arguments`).
REFUSED_ARGUMENTS = "{}"
#: How much of a name or number the model wrote is quoted back to it; a hostile reply's megabyte-long tool name
#: would otherwise be echoed into every later request.
_QUOTED_CHARS = 80


def _quoted(text: str) -> str:
    return text if len(text) <= _QUOTED_CHARS else f"{text[:_QUOTED_CHARS]}... ({len(text):,} characters)"


def unknown_tool_message(name: str) -> str:
    return f"Unknown tool call requested by model: {_quoted(name)}"


def over_cap_message(cap: int, requested: int) -> str:
    return (
        f"Not run: this reply asked for {requested} tool calls and at most {cap} are run per reply; "
        "ask for the rest in your next reply if they are still needed"
    )


class _UnusableNumber(ValueError):
    """A number that parses as JSON but cannot travel on as one (infinite, or too many digits to convert)."""


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _UnusableNumber(f"number out of range: {_quoted(text)}")
    return value


def _convertible_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # over Python's digit limit for int conversion
        raise _UnusableNumber(f"integer with too many digits ({len(text):,})") from None


def _refused_constant(name: str) -> Any:
    raise _UnusableNumber(f"{name} is not a JSON number")


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """A tool call's argument text as an object, or the reason it is not one (then the call must not run).

    What is refused besides invalid JSON is what JSON allows but nothing downstream can carry: non-finite or
    unconvertible numbers, nesting past MAX_JSON_DEPTH, and strings with lone surrogates (not Unicode text)."""
    if raw is None or not raw.strip():
        return {}, None
    if text_nests_deeper_than(raw, MAX_JSON_DEPTH):
        return {}, f"nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        parsed = json.loads(
            raw, parse_float=_finite_float, parse_int=_convertible_int, parse_constant=_refused_constant
        )
    except json.JSONDecodeError as exc:
        return {}, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    except _UnusableNumber as exc:
        return {}, str(exc)
    if not isinstance(parsed, dict):
        return {}, f"expected a JSON object, got {type(parsed).__name__}"
    if first_lone_surrogate(parsed) is not None:
        return {}, "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not Unicode text"
    return parsed, None


def _read_reply(completion: ChatCompletion) -> tuple[str | None, list[_ReplyCall]]:
    """The reply's text and tool calls, every text made encodable once, here: a lone surrogate (valid JSON,
    emitted by byte-level tokenizers) would otherwise fail the next request, the record or the Parquet write."""
    if not completion.choices:
        raise ValueError("model returned no choices")
    reply = completion.choices[0].message
    content = None if reply.content is None else replace_lone_surrogates(reply.content)
    calls = [
        _ReplyCall(replace_lone_surrogates(c.id), replace_lone_surrogates(c.function.name), c.function.arguments)
        for c in reply.tool_calls or []
    ]
    return content, calls


class ToolCallingAgent(BaseAgent):
    """One LLM call per step, up to `max_steps`; every requested tool call is executed; a reply without tool
    calls is the final observation. The model sees each tool as `<tool_server>__<tool_name>` (or by its own name
    when the environment lists a `wire_name`).

    With a `user` (a multi-turn task), a reply without tool calls hands the turn to the user instead: what the
    user says next is appended and the loop goes on, until the user ends the conversation. `max_steps` still
    bounds the whole rollout; `max_steps_per_turn` bounds the steps inside one turn."""

    def __init__(
        self,
        client: ChatClient,
        model_config: ModelConfig,
        *,
        user_tag: str | None = None,
        stop_event: asyncio.Event | None = None,
        user: User | None = None,
        system_prompt: str | None = None,
        max_steps_per_turn: int | None = None,
    ) -> None:
        self.client = client
        self.model_config = model_config
        self.user_tag = user_tag
        self.stop_event = stop_event
        self.user = user
        #: the task's own system prompt ("" sends none), over the model config's
        self.system_prompt = system_prompt
        self.max_steps_per_turn = max_steps_per_turn
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
        # A hidden tool is not offered to the model, but a call to it by name still runs (as BFCL runs it). An
        # environment written before tools could hide (duck-typed, not a BaseEnvironment) hides none.
        hidden = getattr(environment, "ahidden_tools", None)
        for tool, listed in [
            *((tool, True) for tool in await environment.alist_tools()),
            *((tool, False) for tool in (await hidden() if hidden is not None else [])),
        ]:
            wire = tool.get("wire_name") or wire_tool_name(tool["tool_server"], tool["name"])
            if wire in self._tools:
                raise ValueError(f"duplicate tool wire name {wire!r}")
            self._tools[wire] = (tool["tool_server"], tool["name"])
            if listed:
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
            # A byte-level tokenizer's token may be half a character: a lone surrogate no encoder takes.
            context.metadata.setdefault(META_LOGPROBS, []).append(without_lone_surrogates(dumped))

    def _say(self, context: RunArtifacts, messages: list[dict[str, Any]], role: str, text: str) -> None:
        messages.append({"role": role, "content": text})
        context.record_message(role, text)

    async def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        if not self._tools:
            await self.setup(environment)
        messages = await self._open(instruction, context)
        if self.user is not None and self.user.ending is not None:
            context.metadata[META_TERMINATION] = TerminationReason.FINAL_RESPONSE.value
            return
        every = self.model_config.summarize_every_n_turns
        steps_in_turn = 0
        for turn in range(self.model_config.max_steps):
            if self.stop_event is not None and self.stop_event.is_set():
                raise asyncio.CancelledError()
            if self.max_steps_per_turn is not None and steps_in_turn >= self.max_steps_per_turn:
                break
            steps_in_turn += 1
            if every and turn and turn % every == 0:
                compacted = compact_history(messages, self.model_config.context_stride)
                if compacted is not messages:
                    messages = compacted
                    context.metadata[META_SUMMARIES] = context.metadata.get(META_SUMMARIES, 0) + 1
            completion = await self.client.complete(self._request(messages))
            self._account(context, completion)
            content, tool_calls = _read_reply(completion)
            if tool_calls:
                await self._answer_calls(environment, context, messages, content, tool_calls)
                continue
            if await self._end_turn(environment, context, messages, content or ""):
                context.metadata[META_TERMINATION] = TerminationReason.FINAL_RESPONSE.value
                return
            steps_in_turn = 0
        context.metadata[META_TERMINATION] = TerminationReason.MAX_STEPS.value
        context.set_error(MSG_MAX_STEPS)

    async def _open(self, instruction: str, context: RunArtifacts) -> list[dict[str, Any]]:
        """The conversation up to the first user message: the system prompt (the task's, else the model's, else
        the default; an empty one sends none), a multi-turn user's greeting from the agent, then the user's
        opening (the instruction when the user does not speak first)."""
        system_prompt = (
            self.system_prompt
            if self.system_prompt is not None
            else self.model_config.system_prompt or DEFAULT_SYSTEM_PROMPT
        )
        messages: list[dict[str, Any]] = []
        if system_prompt:
            self._say(context, messages, "system", system_prompt)
        user = self.user
        if user is not None and user.agent_greeting is not None:
            self._say(context, messages, "assistant", user.agent_greeting)
        opening = await user.opening() if user is not None else None
        self._say(context, messages, "user", instruction if opening is None else opening)
        return messages

    async def _end_turn(
        self, environment: BaseEnvironment, context: RunArtifacts, messages: list[dict[str, Any]], text: str
    ) -> bool:
        """A reply without tool calls ends the agent's turn: the user (if any) answers. True when the
        conversation is over (no user, the user has nothing more to say, or it said a stop token)."""
        self._say(context, messages, "assistant", text)
        context.set_final_observation(text)
        said = await self.user.reply(text) if self.user is not None else None
        if said is None:
            return True
        self._say(context, messages, "user", said.text)
        if said.ending is not None:
            return True
        if said.unlocked_tools:
            environment.unlock_tools(said.unlocked_tools)
            await self.setup(environment)
        return False

    async def _answer_calls(
        self,
        environment: BaseEnvironment,
        context: RunArtifacts,
        messages: list[dict[str, Any]],
        content: str | None,
        calls: list[_ReplyCall],
    ) -> None:
        """Run the reply's calls up to the per-reply cap and answer every call id with a tool message, so the
        history stays one the endpoint accepts."""
        cap = self.model_config.tool_call_cap
        run, over = calls[:cap], calls[cap:]
        parsed = [parse_arguments(call.arguments) for call in run]
        wire_calls = [
            # Empty arguments mean "no arguments" to us, but not to every endpoint's parser.
            _wire_call(call, call.arguments if problem is None and arguments else REFUSED_ARGUMENTS)
            for call, (arguments, problem) in zip(run, parsed, strict=True)
        ]
        # Calls past the cap were never read: their arguments need not be sent back (10,000 of them made one
        # request 15 MB), and what they were is not evidence of anything the rollout did.
        wire_calls += [_wire_call(call, REFUSED_ARGUMENTS) for call in over]
        messages.append({"role": "assistant", "content": content, "tool_calls": wire_calls})
        # The record keeps what the model wrote (exports and the transcript show its own text, malformed or not);
        # only the history sent back carries arguments any endpoint parses.
        said = [_wire_call(call, _storable(call.arguments)) for call in run]
        said += [_wire_call(call, REFUSED_ARGUMENTS) for call in over]
        context.record_message("assistant", content, tool_calls=said)
        for call, (arguments, problem) in zip(run, parsed, strict=True):
            result, call_record = await self._execute(environment, call, arguments, problem)
            observation = result.observation if isinstance(result.observation, str) else json.dumps(result.observation)
            observation = replace_lone_surrogates(observation)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": observation})
            context.record_message("tool", observation, tool_call_id=call.id, is_error=result.is_error)
            context.record_tool_call(call_record, result)
        if over:
            skipped = over_cap_message(cap, len(calls))
            for call in over:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": skipped})
                context.record_message("tool", skipped, tool_call_id=call.id, is_error=True)
            context.metadata[META_TOOL_CALLS_OVER_CAP] = context.metadata.get(META_TOOL_CALLS_OVER_CAP, 0) + len(over)

    async def _execute(
        self, environment: BaseEnvironment, call: _ReplyCall, arguments: dict[str, Any], problem: str | None
    ) -> tuple[ToolCallResult, ToolCall]:
        wire = call.name
        target = self._tools.get(wire)
        server, tool = target or split_wire_tool_name(wire) or ("unknown", wire)
        if problem is not None:
            # Calling the tool with {} would answer with a misleading "missing parameter"; the model needs to
            # hear what was wrong with what it wrote, and the raw text is evidence worth keeping.
            message = f"Invalid arguments for {_quoted(wire)}: {problem}; the tool was not called"
            raw = None if call.arguments is None else replace_lone_surrogates(call.arguments)
            record = ToolCall(tool_server=server, tool_name=tool, raw_arguments=raw, arguments_error=problem)
            return ToolCallResult(observation=message, is_error=True), record
        record = ToolCall(tool_server=server, tool_name=tool, parameters=arguments)
        if target is None:
            return ToolCallResult(observation=unknown_tool_message(wire), is_error=True), record
        return await environment.acall_tool(server, tool, arguments), record


@dataclass(frozen=True)
class _ReplyCall:
    """One tool call of a model reply, with its id and name already made encodable; `arguments` is the raw text."""

    id: str
    name: str
    arguments: str | None


def _storable(arguments: str | None) -> str | None:
    return None if arguments is None else replace_lone_surrogates(arguments)


def _wire_call(call: _ReplyCall, arguments: str | None) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}
