"""Reading model replies robustly: JSON inside prose or code fences, and Python code blocks."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


class ReplyFormatError(ValueError):
    """A reply holds no usable JSON object or code; the message says what was wrong."""


def _candidates(text: str) -> list[str]:
    found = [body for lang, body in _FENCE.findall(text) if lang.lower() in ("", "json", "javascript", "js")]
    return [*found, text]


def extract_json(text: str) -> Any:
    """The first JSON value in `text`: the whole reply, a fenced block, or the first `{`/`[` that parses.
    Tolerates trailing commas; raises ReplyFormatError otherwise."""
    if not text or not text.strip():
        raise ReplyFormatError("the reply is empty")
    decoder = json.JSONDecoder()
    last_error = "no JSON object or array found"
    for candidate in _candidates(text):
        for variant in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            stripped = variant.strip()
            try:
                return json.loads(stripped)
            except json.JSONDecodeError as exc:
                last_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            for match in re.finditer(r"[\[{]", variant):
                try:
                    value, _ = decoder.raw_decode(variant, match.start())
                except json.JSONDecodeError:
                    continue
                if isinstance(value, (dict, list)) and value:
                    return value
    raise ReplyFormatError(f"the reply is not valid JSON ({last_error})")


def extract_code(text: str) -> str:
    """The Python module in a reply: the longest ```python block, else a bare reply that looks like code."""
    if not text or not text.strip():
        raise ReplyFormatError("the reply is empty")
    blocks = [body for lang, body in _FENCE.findall(text) if lang.lower() in ("python", "py", "")]
    if blocks:
        return max(blocks, key=len).strip() + "\n"
    stripped = text.strip()
    if re.search(r"^\s*(def|import|from|class)\s", stripped, re.MULTILINE):
        return stripped + "\n"
    raise ReplyFormatError("the reply holds no Python code block")


def extract_text(text: str) -> str:
    """Plain text: a lone fenced block is unwrapped, surrounding quotes and whitespace are removed."""
    stripped = (text or "").strip()
    blocks = _FENCE.findall(stripped)
    if len(blocks) == 1 and stripped.startswith("```"):
        stripped = blocks[0][1].strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "\"'":
        stripped = stripped[1:-1].strip()
    return stripped
