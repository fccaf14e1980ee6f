"""A "did you mean" for a mistyped name: a command, a scenario id, a model name, a sweep id.

`did_you_mean` gives the clause to append to an error message; `SuggestingArgumentParser` adds it to argparse's
"invalid choice" errors (a mistyped subcommand or choice), which still exit 2 with the usage line, no traceback.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable
from typing import Any

#: How alike (difflib's ratio) a known name must be to be suggested; 0.6 is difflib's own default.
SUGGESTION_CUTOFF = 0.6
#: At most this many names are suggested.
MAX_SUGGESTIONS = 3


#: A name is suggested beside the closest one only if it is about as close (within this much of its ratio):
#: 'instal' gets 'install', not also 'list'.
SUGGESTION_SPREAD = 0.1


def close_matches(value: str, known: Iterable[object]) -> list[str]:
    """The known names most like `value`, best first (compared case-insensitively; returned as spelled)."""
    by_folded: dict[str, str] = {}
    for name in sorted({str(name) for name in known if name is not None}):
        by_folded.setdefault(name.casefold(), name)
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(value.casefold())
    scored = []
    for folded, name in by_folded.items():
        matcher.set_seq1(folded)
        ratio = matcher.ratio()
        if ratio >= SUGGESTION_CUTOFF:
            scored.append((-ratio, name))
    scored.sort()
    if not scored:
        return []
    best = -scored[0][0]
    return [name for ratio, name in scored[:MAX_SUGGESTIONS] if -ratio >= best - SUGGESTION_SPREAD]


def did_you_mean(value: str, known: Iterable[object]) -> str:
    """`"; did you mean 'x'?"` (or `'x' or 'y'`) for the known names closest to `value`, else an empty string."""
    matches = close_matches(value, known)
    if not matches:
        return ""
    return f"; did you mean {' or '.join(repr(m) for m in matches)}?"


class SuggestingArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose "invalid choice" errors name the closest choices. Its subparsers are of the same
    class (argparse makes them with the parent's class), so a mistyped subcommand at any depth gets the hint."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            hint = did_you_mean(str(value), action.choices or ()) if isinstance(value, str) else ""
            if not hint:
                raise
            raise argparse.ArgumentError(action, f"{exc.message}{hint}") from None
