"""How deeply a JSON text nests, measured before it is parsed.

Python's json module, and every validator after it, recurses once per level of nesting: a file of 100,000 `[`
exhausts the stack (a RecursionError, or worse) before any check on the parsed value could run. This scan counts
brackets outside strings in one loop, so a document too deep to parse safely is refused as text.
"""

from __future__ import annotations

import re

#: A string literal (skipped whole, so brackets inside it do not count) or a bracket.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def text_nests_deeper_than(text: str, limit: int) -> bool:
    """Whether the JSON text `text` opens more than `limit` arrays or objects inside each other. Malformed text is
    measured as far as it goes; the parser names what is wrong with it."""
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
