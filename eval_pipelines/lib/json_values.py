"""Checks on values parsed from untrusted JSON (a model's reply, an uploaded file) before they travel further.

Standard JSON may escape a lone UTF-16 surrogate (`"\\ud800"`); Python's parser turns it into a `str` that no
UTF-8 encoder accepts, so it must be caught where it comes in, not where some encoder later raises.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT_CHARACTER = "\ufffd"


def has_lone_surrogate(text: str) -> bool:
    """Whether `text` holds a surrogate code point, which no UTF-8 encoder accepts."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def replace_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD; a high-low pair left as two code points is joined
    into the character it encodes (the UTF-16 round trip does both)."""
    if not has_lone_surrogate(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def without_lone_surrogates(value: Any) -> Any:
    """A JSON-shaped value with `replace_lone_surrogates` applied to every string, keys included."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_lone_surrogates(item) for item in value]
    return value


def nests_deeper_than(data: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests objects and arrays deeper than `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    return False


def first_lone_surrogate(data: Any) -> str | None:
    """The first string (a key or a value) of a parsed JSON value that holds a lone surrogate, or None."""
    stack: list[Any] = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if has_lone_surrogate(value):
                return value
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return None
