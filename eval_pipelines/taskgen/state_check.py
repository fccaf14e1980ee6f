"""The state check every schema-driven verifier runs, kept as source text so each generated verifier is a
standalone module (standard library only; no eval_pipelines import), and loaded here from the same text so the
generator and the verifiers agree on what "equal" means.

An expectation file (`EXPECT`) lists, per tool server:

- `added`:   [{collection, pattern, describe}]  a new item (key absent before) matching `pattern`
- `changed`: [{collection, key, pattern, describe}]  the item `key` now matches `pattern`
- `removed`: [{collection, key, describe}]  the item `key` is gone
- `kept`:    [{collection, keys}]  these items still exist (nothing else was deleted)

A pattern is `{"eq": value}` (equal after normalising: case, whitespace, ISO 8601 times to UTC, lists as sets),
`{"fields": {name: pattern}}` (a dict whose named fields match; other fields are free) or
`{"contains": [pattern, ...]}` (a list with a distinct element matching each pattern).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CHECK_SOURCE = r'''
import re
from datetime import datetime, timezone

_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")


def canon(value):
    """A comparable form: trimmed case-folded text, UTC times, order-free lists, sorted dicts."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else float(value)
    if isinstance(value, str):
        text = " ".join(value.split())
        if _ISO_TIME.match(text):
            try:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T"))
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=timezone.utc)
                return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            except ValueError:
                pass
        return text.casefold()
    if isinstance(value, (list, tuple)):
        return tuple(sorted((canon(v) for v in value), key=repr))
    if isinstance(value, dict):
        return tuple(sorted((str(k), canon(v)) for k, v in value.items()))
    return repr(value)


def matches(actual, pattern):
    if "eq" in pattern:
        return canon(actual) == canon(pattern["eq"])
    if "fields" in pattern:
        if not isinstance(actual, dict):
            return False
        return all(matches(actual.get(name), sub) for name, sub in pattern["fields"].items())
    if "contains" in pattern:
        if not isinstance(actual, list):
            return False
        free = list(actual)
        for sub in pattern["contains"]:
            hit = next((i for i, element in enumerate(free) if matches(element, sub)), None)
            if hit is None:
                return False
            free.pop(hit)
        return True
    return False


def _metadata(run_artifacts):
    metadata = run_artifacts.get("metadata") if isinstance(run_artifacts, dict) else getattr(
        run_artifacts, "metadata", None
    )
    return metadata if isinstance(metadata, dict) else {}


def check_state(run_artifacts, expect):
    """(success, message): every expectation of every server holds between the initial and final state."""
    recorded = _metadata(run_artifacts).get("state") or {}
    problems = []
    for server, rules in expect.items():
        states = recorded.get(server)
        if not isinstance(states, dict) or not isinstance(states.get("initial"), dict) or not isinstance(
            states.get("final"), dict
        ):
            problems.append(f"no initial and final state of tool server {server!r} in the run artifacts")
            continue
        initial, final = states["initial"], states["final"]

        def items(state, collection):
            found = state.get(collection)
            return found if isinstance(found, dict) else {}

        for rule in rules.get("removed", []):
            if rule["key"] in items(final, rule["collection"]):
                problems.append(f"{rule['describe']}: it still exists")
        for rule in rules.get("changed", []):
            item = items(final, rule["collection"]).get(rule["key"])
            if item is None:
                problems.append(f"{rule['describe']}: the item no longer exists")
            elif not matches(item, rule["pattern"]):
                problems.append(f"{rule['describe']}: not in the final state")
        used = set()
        for rule in rules.get("added", []):
            before = items(initial, rule["collection"])
            new = [
                key for key, item in items(final, rule["collection"]).items()
                if key not in before and key not in used and matches(item, rule["pattern"])
            ]
            if new:
                used.add(sorted(new)[0])
            else:
                problems.append(f"{rule['describe']}: no such new item")
        for rule in rules.get("kept", []):
            after = items(final, rule["collection"])
            gone = [key for key in rule["keys"] if key not in after]
            if gone:
                problems.append(f"{rule['collection']}: item(s) {', '.join(sorted(gone))} were removed but must stay")
    if problems:
        return False, "; ".join(problems)
    return True, "every expected change is in the final state"
'''


def _load() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(CHECK_SOURCE, "<taskgen.state_check>", "exec"), namespace)
    return namespace


_NAMESPACE = _load()
canon: Callable[[Any], Any] = _NAMESPACE["canon"]
matches: Callable[[Any, dict[str, Any]], bool] = _NAMESPACE["matches"]
check_state: Callable[[Any, dict[str, Any]], tuple[bool, str]] = _NAMESPACE["check_state"]
