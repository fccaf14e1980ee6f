"""Keeping a long tool-calling history short: summarise older exchanges, keep the recent ones verbatim.

An exchange is one assistant message that requested tools plus the tool messages answering it. The summary is
deterministic (no extra model call): each older call with its arguments and the start of its result, so the
model keeps the facts it found without paying for every observation again.
"""

from __future__ import annotations

import json
import re
from typing import Any

SUMMARY_HEADER = "Summary of the first {count} tool calls (older history was shortened):"
SUMMARY_PATTERN = re.compile(r"^Summary of the first (\d+) tool calls")
RESULT_CHARS = 300


def _exchanges(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]], list[str]]:
    """(head, exchanges, previous summary lines): head is everything before the first exchange."""
    head: list[dict[str, Any]] = []
    exchanges: list[list[dict[str, Any]]] = []
    previous: list[str] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and SUMMARY_PATTERN.match(content):
            previous = content.splitlines()[1:]
        elif message.get("role") == "assistant" and message.get("tool_calls"):
            exchanges.append([message])
        elif message.get("role") == "tool" and exchanges:
            exchanges[-1].append(message)
        elif not exchanges:
            head.append(message)
        else:
            exchanges[-1].append(message)
    return head, exchanges, previous


def _summarise(exchange: list[dict[str, Any]], start: int) -> list[str]:
    results = {m.get("tool_call_id"): str(m.get("content", "")) for m in exchange if m.get("role") == "tool"}
    lines = []
    for offset, call in enumerate(exchange[0].get("tool_calls") or []):
        function = call.get("function", {})
        result = results.get(call.get("id"), "").replace("\n", " ")
        if len(result) > RESULT_CHARS:
            result = result[:RESULT_CHARS] + "..."
        arguments = function.get("arguments") or "{}"
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        lines.append(f"{start + offset}. {function.get('name')}({arguments}) -> {result}")
    return lines


def compact_history(messages: list[dict[str, Any]], keep_exchanges: int) -> list[dict[str, Any]]:
    """Replace every exchange but the last `keep_exchanges` with one summary message after the instruction."""
    head, exchanges, previous = _exchanges(messages)
    if len(exchanges) <= keep_exchanges:
        return messages
    older, recent = exchanges[: len(exchanges) - keep_exchanges], exchanges[len(exchanges) - keep_exchanges :]
    lines = list(previous)
    for exchange in older:
        lines.extend(_summarise(exchange, start=len(lines) + 1))
    summary = {"role": "user", "content": "\n".join([SUMMARY_HEADER.format(count=len(lines)), *lines])}
    return [*head, summary, *(m for exchange in recent for m in exchange)]


def summarised_call_count(messages: list[dict[str, Any]]) -> int:
    """How many tool calls a summary message in `messages` stands for (0 when there is none)."""
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            match = SUMMARY_PATTERN.match(content)
            if match:
                return int(match.group(1))
    return 0
