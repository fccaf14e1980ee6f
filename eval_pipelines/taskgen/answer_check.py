"""The answer check of a question task's verifier (a read-only toolset's tasks), kept as source text so each
generated verifier is a standalone module (standard library only), and loaded here from the same text so the
question planner and the verifiers agree on what "the answer states the value" means.

`EXPECT_ANSWER` lists `{"value": ..., "describe": ...}`; the final answer (`final_observation`, else the last
assistant message) must state every value: text case- and space-insensitively, a number as any number in the
answer equal to it (`24.5`, `24.50`, `$24.50`), true/false as yes/no or true/false, a list element by element.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ANSWER_SOURCE = r'''
import re

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?")


def _field(run_artifacts, name):
    if isinstance(run_artifacts, dict):
        return run_artifacts.get(name)
    return getattr(run_artifacts, name, None)


def final_answer(run_artifacts):
    """The agent's final answer: the final observation, else the last assistant message with text."""
    text = _field(run_artifacts, "final_observation")
    if isinstance(text, str) and text.strip():
        return text
    for message in reversed(_field(run_artifacts, "messages") or []):
        role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
        content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
        if role == "assistant" and isinstance(content, str) and content.strip():
            return content
    return ""


def states(answer, value):
    """Whether the answer text states the value."""
    text = " ".join(str(answer).split()).casefold()
    if isinstance(value, bool):
        words = set(re.findall(r"[a-z]+", text))
        return bool(words & ({"yes", "true"} if value else {"no", "false"}))
    if isinstance(value, (int, float)):
        numbers = [float(n.replace(",", "")) for n in _NUMBER.findall(text)]
        return any(abs(n - float(value)) < 1e-9 for n in numbers)
    if isinstance(value, (list, tuple)):
        return all(states(answer, element) for element in value)
    return " ".join(str(value).split()).casefold() in text


def check_answer(run_artifacts, expected):
    """(success, message): the final answer states every expected value."""
    answer = final_answer(run_artifacts)
    if not answer.strip():
        return False, "the run ended without a final answer"
    missing = [item["describe"] for item in expected if not states(answer, item["value"])]
    if missing:
        return False, "the final answer does not state " + "; ".join(missing)
    return True, "the final answer states every expected value"
'''


def _load() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(ANSWER_SOURCE, "<taskgen.answer_check>", "exec"), namespace)
    return namespace


_NAMESPACE = _load()
states: Callable[[str, Any], bool] = _NAMESPACE["states"]
check_answer: Callable[[Any, list[dict[str, Any]]], tuple[bool, str]] = _NAMESPACE["check_answer"]
