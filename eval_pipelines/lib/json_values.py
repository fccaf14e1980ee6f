"""Checks on untrusted JSON (a model's reply, an uploaded file, a scenario file) before it is parsed or travels
further.

Standard JSON may escape a lone UTF-16 surrogate (`"\\ud800"`); Python's parser turns it into a `str` that no
UTF-8 encoder accepts, so it must be caught where it comes in, not where some encoder later raises.
"""

from __future__ import annotations

import re
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


#: A string literal (skipped whole, so brackets inside it do not count) or a bracket.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def text_nests_deeper_than(text: str, limit: int) -> bool:
    """Whether the JSON text `text` opens more than `limit` arrays or objects inside each other, measured before
    it is parsed: Python's json module, and every validator after it, recurses once per level, so a text of
    100,000 `[` exhausts the stack before a check on the parsed value could run. Brackets are counted outside
    strings in one loop; malformed text is measured as far as it goes (the parser then names what is wrong)."""
    if text.count("[") + text.count("{") <= limit:  # cannot nest deeper than it opens: most texts stop here
        return False
    depth = 0
    for token in _STRING_OR_BRACKET.finditer(text):
        first = token.group()[0]
        if first in "[{":
            depth += 1
            if depth > limit:
                return True
        elif first in "]}":
            depth -= 1
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
