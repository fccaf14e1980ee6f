"""Tool calls a model wrote as text in its final answer.

Models served without their tool-call parser (a llama.cpp or vLLM launch that lacks the right template flag)
answer `{"name": "email__send_email", "arguments": {...}}`, a fenced ```json block, or Hermes/Qwen's
`<tool_call>...</tool_call>` instead of a structured call. The endpoint then reports a final answer, the agent
stops, and the rollout fails for a reason that is the serving set-up's, not the model's. It still counts as a
failure (the model did not act), but it is flagged, so analysts can filter it and the report can count it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from eval_pipelines.schemas.artifacts import META_TEXT_TOOL_CALL, RunArtifacts

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(?P<body>.*?)\n?```$", re.DOTALL)
_TAGGED = re.compile(r"<tool_call>\s*(?P<body>.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


def _is_call(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_is_call(item) for item in value)
    if not isinstance(value, dict):
        return False
    function = value.get("function")
    if isinstance(function, dict):  # the OpenAI wire shape, pasted as text
        return _is_call(function)
    name = value.get("name") or value.get("tool") or value.get("tool_name")
    return isinstance(name, str) and bool(name.strip()) and any(key in value for key in _ARGUMENT_KEYS)


def _parses_as_call(text: str) -> bool:
    try:
        return _is_call(json.loads(text))
    except (ValueError, RecursionError):  # a final answer nested thousands deep is prose to us, not a crash
        return False


def looks_like_tool_call(text: str | None) -> bool:
    """Whether a final answer is, as a whole, one or more tool calls written as JSON: bare, fenced, or between
    `<tool_call>` tags. Prose that mentions a tool, or JSON that names no tool and arguments, is not."""
    if not text:
        return False
    stripped = text.strip()
    if _parses_as_call(stripped):
        return True
    fenced = _FENCE.match(stripped)
    if fenced is not None and _parses_as_call(fenced["body"].strip()):
        return True
    tagged = [m["body"] for m in _TAGGED.finditer(stripped)]
    return bool(tagged) and all(_parses_as_call(body) for body in tagged)


def flag_text_tool_call(artifacts: RunArtifacts) -> bool:
    """Record on the artifacts whether the final answer is a tool call written as text; returns the flag."""
    flagged = looks_like_tool_call(artifacts.final_observation)
    artifacts.metadata[META_TEXT_TOOL_CALL] = flagged
    return flagged
