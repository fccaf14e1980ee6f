"""The text protocol between the platform and the models behind its judges and generators.

Structured inputs travel as JSON inside XML-like tags (`<conversation>{...}</conversation>`): a real model reads
them as clearly delimited data, and the simulated personas parse exactly what the platform wrote. Replies are
asked for as one JSON object; `extract_json_object` also accepts the code fences and chatter real models add.
"""

from __future__ import annotations

import json
import re
from typing import Any

CONVERSATION_TAG = "conversation"
SYNTHESIS_TAG = "synthesis"
FEW_SHOT_FIELDS = ("qa_few_shot", "nli_few_shot", "conv_few_shot")

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)


def tagged(tag: str, payload: Any) -> str:
    return f"<{tag}>\n{json.dumps(payload, ensure_ascii=False)}\n</{tag}>"


def extract_tagged(text: str | None, tag: str) -> Any | None:
    """The JSON payload of the last `<tag>` block in `text`, or None when absent or unreadable."""
    if not text:
        return None
    matches = re.findall(rf"<{re.escape(tag)}>\s*(.*?)\s*</{re.escape(tag)}>", text, flags=re.DOTALL)
    if not matches:
        return None
    try:
        return json.loads(matches[-1])
    except ValueError:
        return None


def extract_json_object(text: str | None) -> dict[str, Any] | None:
    """The first JSON object in a model reply (bare, fenced, or embedded in prose); None when there is none."""
    if not text:
        return None
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    try:
        value = json.loads(stripped)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", stripped):
        try:
            candidate, _ = decoder.raw_decode(stripped, match.start())
        except ValueError:
            continue
        if isinstance(candidate, dict):
            return candidate
    return None
