"""The warehouse keeps one transcript form; the OpenAI and the Inspect forms are derived from it here, side by side,
so that both read a tool call's arguments and a message's content the same way."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eval_pipelines.llm.types import split_wire_tool_name, wire_tool_name
from eval_pipelines.reports.export.reader import RolloutRecord


@dataclass(frozen=True)
class CallRequest:
    """One tool call of an assistant message, as the model sent it."""

    id: str
    name: str
    #: the model's argument text (a JSON object when it was well formed)
    arguments: str


def _content_text(content: str | None) -> str | None:
    """A message's text. The warehouse stores non-string content as JSON; a list of text parts (OpenAI's
    content-parts form) becomes its joined text, so every exported message carries a plain string."""
    if content is None or not content.startswith("["):
        return content
    try:
        parts = json.loads(content)
    except ValueError:
        return content
    if isinstance(parts, list) and parts and all(isinstance(p, dict) and p.get("type") == "text" for p in parts):
        return "".join(str(p.get("text", "")) for p in parts)
    return content


def _call_requests(tool_calls_json: str | None, rollout_id: str, message_index: int) -> list[CallRequest]:
    if not tool_calls_json:
        return []
    try:
        raw = json.loads(tool_calls_json)
    except ValueError:
        return []
    requests: list[CallRequest] = []
    for position, call in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        arguments = function.get("arguments")
        # A trace may hold the arguments already decoded; the wire form is always a JSON string.
        text = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
        call_id = call.get("id") or f"{rollout_id}-{message_index}-{position}"
        requests.append(CallRequest(id=str(call_id), name=str(function.get("name", "")), arguments=text))
    return requests


def openai_messages(record: RolloutRecord) -> list[dict[str, Any]]:
    """The transcript in OpenAI chat-completions message form."""
    messages: list[dict[str, Any]] = []
    for message in record.messages:
        role = message["role"]
        content = _content_text(message.get("content"))
        if role == "assistant":
            calls = _call_requests(message.get("tool_calls_json"), record.row["rollout_id"], message["message_index"])
            if not calls:
                messages.append({"role": "assistant", "content": content or ""})
                continue
            # OpenAI's form of a turn that only calls tools: content null beside the calls.
            wire = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
            ]
            messages.append({"role": "assistant", "content": content or None, "tool_calls": wire})
        elif role == "tool":
            messages.append(
                {"role": "tool", "tool_call_id": message.get("tool_call_id") or "", "content": content or ""}
            )
        else:
            messages.append({"role": role, "content": content or ""})
    return messages


def _inspect_tool_call(call: CallRequest) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": call.id, "function": call.name, "arguments": {}, "type": "function"}
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        arguments = None
    if isinstance(arguments, dict):
        entry["arguments"] = arguments
    else:
        entry["parse_error"] = f"the arguments are not a JSON object: {call.arguments[:200]}"
    return entry


def _tool_error(call_row: Mapping[str, Any] | None, function: str | None, content: str) -> dict[str, Any] | None:
    """The Inspect error of a tool result, from the rollout's `tool_calls` row for that call."""
    if call_row is None or wire_tool_name(call_row["tool_server"], call_row["tool_name"]) != function:
        return None
    if call_row.get("arguments_error"):
        return {"type": "parsing", "message": str(call_row["arguments_error"])}
    if call_row.get("is_error"):
        return {"type": "unknown", "message": content}
    return None


def inspect_messages(record: RolloutRecord, model: str) -> list[dict[str, Any]]:
    """The transcript as Inspect ChatMessages: tool calls with decoded arguments, tool results naming their
    function and carrying the tool's error."""
    rollout_id = record.row["rollout_id"]
    functions: dict[str, str] = {}
    # Tool results come in the order of the recorded calls, so the k-th result is the k-th `tool_calls` row.
    call_rows = iter(record.tool_calls)
    messages: list[dict[str, Any]] = []
    for message in record.messages:
        role, index = message["role"], message["message_index"]
        content = _content_text(message.get("content")) or ""
        entry: dict[str, Any] = {"id": f"{rollout_id}-{index}", "content": content, "role": role}
        if role == "assistant":
            calls = _call_requests(message.get("tool_calls_json"), rollout_id, index)
            functions.update((c.id, c.name) for c in calls)
            entry.update(source="generate", model=model)
            if calls:
                entry["tool_calls"] = [_inspect_tool_call(c) for c in calls]
        elif role == "tool":
            call_id = message.get("tool_call_id")
            entry.update(tool_call_id=call_id, function=functions.get(call_id or ""))
            error = _tool_error(next(call_rows, None), entry["function"], content)
            if error is not None:
                entry["error"] = error
        elif role == "user":
            entry["source"] = "input"
        elif role != "system":
            continue  # Inspect has no other role; the warehouse records none
        messages.append(entry)
    return messages


@dataclass
class AnsweredCall:
    """One tool call of an assistant turn with what came back: the tool it reached (from the rollout's
    `tool_calls` row, when one matches) and the tool message that answered it."""

    request: CallRequest
    #: the arguments as a JSON object; None when the model's text was not one (the tool was then not called)
    arguments: dict[str, Any] | None
    tool_server: str | None = None
    tool_name: str | None = None
    #: the `tool_calls` row's fields, when a row matches the call
    parameters: dict[str, Any] | None = None
    observation: str | None = None
    is_error: bool = False
    arguments_error: str | None = None
    #: the content of the tool message that answered the call; None when none did
    result: str | None = None


@dataclass
class Turn:
    """One message of the transcript as the interchange formats see it: a system or user message, or an
    assistant message with its tool calls and their answers (tool messages are folded into the turn that
    called). `unmatched` holds the tool messages that answer no call of the turn, as (call id, content); a
    `tool` turn holds only such messages, recorded before any assistant turn."""

    role: str
    content: str
    timestamp: str | None
    calls: list[AnsweredCall] = field(default_factory=list)
    unmatched: list[tuple[str | None, str]] = field(default_factory=list)


def _decoded_arguments(text: str) -> dict[str, Any] | None:
    try:
        arguments = json.loads(text)
    except ValueError:
        return None
    return arguments if isinstance(arguments, dict) else None


def _json_object(text: str | None) -> dict[str, Any] | None:
    return _decoded_arguments(text) if text else None


class _CallRows:
    """The rollout's `tool_calls` rows, taken in order by the tool messages they answer. A row is taken only
    when it names the called function (as the reference agent names tools, or by its bare name), so a call the
    engine recorded no row for does not shift every later pairing."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self._rows = rows
        self._next = 0

    def take(self, function: str) -> dict[str, Any] | None:
        if self._next >= len(self._rows):
            return None
        row = self._rows[self._next]
        if function not in (wire_tool_name(row["tool_server"], row["tool_name"]), row["tool_name"]):
            return None
        self._next += 1
        return row


def _answer(call: AnsweredCall, content: str, row: Mapping[str, Any] | None) -> None:
    call.result = content
    if row is None:
        split = split_wire_tool_name(call.request.name)
        call.tool_server, call.tool_name = split if split else (None, call.request.name)
        return
    call.tool_server, call.tool_name = row["tool_server"], row["tool_name"]
    call.parameters = _json_object(row.get("parameters_json"))
    call.observation = row.get("observation")
    call.is_error = bool(row.get("is_error"))
    call.arguments_error = row.get("arguments_error")


def _waiting_call(turn: Turn | None, call_id: str | None) -> AnsweredCall | None:
    """The call of `turn` a tool message answers: the unanswered one with its id, else (a message without an id)
    the first unanswered one."""
    if turn is None:
        return None
    waiting = [c for c in turn.calls if c.result is None]
    if call_id:
        return next((c for c in waiting if c.request.id == call_id), None)
    return waiting[0] if waiting else None


def transcript_turns(record: RolloutRecord) -> list[Turn]:
    """The transcript as turns, each assistant turn's tool calls paired with the tool messages that answered them
    (by call id) and with the rollout's `tool_calls` rows (in call order)."""
    rollout_id = record.row["rollout_id"]
    rows = _CallRows(record.tool_calls)
    turns: list[Turn] = []
    calling: Turn | None = None
    for message in record.messages:
        role, index = message["role"], message["message_index"]
        content = _content_text(message.get("content")) or ""
        timestamp = message.get("timestamp")
        if role == "tool":
            call_id = message.get("tool_call_id")
            call = _waiting_call(calling, call_id)
            if call is None:
                # A result of no call: kept beside the turn that called last, or alone before any call.
                holder = calling if calling is not None else Turn("tool", "", timestamp)
                if calling is None:
                    turns.append(holder)
                holder.unmatched.append((call_id, content))
                continue
            _answer(call, content, rows.take(call.request.name))
            continue
        turn = Turn(role, content, timestamp)
        if role == "assistant":
            requests = _call_requests(message.get("tool_calls_json"), rollout_id, index)
            turn.calls = [AnsweredCall(r, _decoded_arguments(r.arguments)) for r in requests]
            calling = turn
        turns.append(turn)
    return turns
