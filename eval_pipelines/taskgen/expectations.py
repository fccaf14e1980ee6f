"""What a task must change: derived from the state before and after its reference actions.

A field is checked when its new value is one the actions stated (a parameter value, so the instruction names
it). A changed field whose value no parameter gives (a folder that became `trash`, a status flag) is checked
too, unless it looks like a clock value (`*_at`, `timestamp`, ISO 8601 text): those differ between replays.
Values nobody can predict, such as new ids, are never checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from eval_pipelines.taskgen.state_check import canon

State = Mapping[str, Any]
Expect = dict[str, list[dict[str, Any]]]

_CLOCK_NAME = re.compile(r"(^|_)(at|time|timestamp|date|updated|modified|created|ts)$|timestamp", re.IGNORECASE)
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T")
MAX_DESCRIBED_VALUE = 60


def stated_values(params_list: Iterable[Mapping[str, Any]]) -> set[Any]:
    """Canonical forms of every value the actions pass (a comma-separated string also counts as a list)."""
    found: set[Any] = set()

    def add(value: Any) -> None:
        if value is None or isinstance(value, bool) or value == "" or value == []:
            return
        found.add(canon(value))
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(",") if p.strip()]
            found.add(canon(parts))
            if len(parts) > 1:
                for part in parts:
                    found.add(canon(part))
        elif isinstance(value, list):
            for element in value:
                add(element)
        elif isinstance(value, dict):
            for element in value.values():
                add(element)

    for params in params_list:
        for value in params.values():
            add(value)
    return found


def _is_clock(name: str, value: Any) -> bool:
    return bool(_CLOCK_NAME.search(name)) or (isinstance(value, str) and bool(_ISO.match(value)))


def _value_pattern(name: str, old: Any, new: Any, stated: set[Any], changed: bool) -> dict[str, Any] | None:
    if not isinstance(new, (dict, list)) and canon(new) in stated:
        return {"eq": new}
    if isinstance(new, list):
        if new and canon(new) in stated:
            return {"eq": new}
        before = old if isinstance(old, list) else []
        subs = []
        for element in new:
            if element in before:
                continue
            sub = item_pattern(None, element, stated) if isinstance(element, dict) else None
            if sub is None and not isinstance(element, dict) and canon(element) in stated:
                sub = {"eq": element}
            if sub is not None:
                subs.append(sub)
        return {"contains": subs} if subs else None
    if isinstance(new, dict):
        return item_pattern(old if isinstance(old, dict) else None, new, stated)
    simple = new is None or isinstance(new, (bool, int, float)) or (isinstance(new, str) and len(new) <= 200)
    if changed and simple and not _is_clock(name, new):
        # `implied`: a consequence of the action, not a value the instruction states.
        return {"eq": new, "implied": True}
    return None


def item_pattern(before: Mapping[str, Any] | None, after: Any, stated: set[Any]) -> dict[str, Any] | None:
    """The checkable part of `after` (fields unchanged since `before` are left out)."""
    if not isinstance(after, Mapping):
        return {"eq": after} if canon(after) in stated else None
    fields: dict[str, Any] = {}
    for name, value in after.items():
        if before is not None and name in before and before[name] == value:
            continue
        old = before.get(name) if before is not None else None
        sub = _value_pattern(name, old, value, stated, changed=before is not None)
        if sub is not None:
            fields[name] = sub
    return {"fields": fields} if fields else None


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= MAX_DESCRIBED_VALUE else text[: MAX_DESCRIBED_VALUE - 3] + "..."


def describe_pattern(pattern: Mapping[str, Any]) -> str:
    if "eq" in pattern:
        value = pattern["eq"]
        if isinstance(value, list):
            return "[" + ", ".join(f'"{_short(v)}"' if isinstance(v, str) else _short(v) for v in value) + "]"
        return f'"{_short(value)}"' if isinstance(value, str) else _short(value)
    if "fields" in pattern:
        return ", ".join(f"{name} = {describe_pattern(sub)}" for name, sub in pattern["fields"].items())
    if "contains" in pattern:
        return "includes " + "; ".join(f"({describe_pattern(sub)})" for sub in pattern["contains"])
    return "?"


def derive(initial: State, final: State, params_list: Iterable[Mapping[str, Any]]) -> Expect:
    """Expectations of one tool server (see `state_check`); empty lists when nothing checkable changed."""
    stated = stated_values(params_list)
    expect: Expect = {"added": [], "changed": [], "removed": [], "kept": []}
    collections = sorted(set(initial) | set(final))
    for collection in collections:
        before = initial.get(collection) or {}
        after = final.get(collection) or {}
        if not isinstance(before, Mapping) or not isinstance(after, Mapping) or before == after:
            continue
        noun = collection
        for key in sorted(set(before) - set(after)):
            expect["removed"].append({"collection": collection, "key": key, "describe": f"{noun}/{key} is deleted"})
        for key in sorted(set(after) - set(before)):
            pattern = item_pattern(None, after[key], stated)
            if pattern is not None:
                expect["added"].append(
                    {
                        "collection": collection,
                        "pattern": pattern,
                        "describe": f"a new item in {noun} with {describe_pattern(pattern)}",
                    }
                )
        for key in sorted(set(before) & set(after)):
            if before[key] == after[key]:
                continue
            pattern = item_pattern(before[key], after[key], stated)
            if pattern is not None:
                expect["changed"].append(
                    {
                        "collection": collection,
                        "key": key,
                        "pattern": pattern,
                        "describe": f"{noun}/{key} has {describe_pattern(pattern)}",
                    }
                )
        survivors = sorted(k for k in before if k in after)
        if survivors:
            expect["kept"].append({"collection": collection, "keys": survivors})
    return expect


def assumed_added(collection: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """For a server nobody can replay: a new item holding the stated values under the parameter names, in the
    collection named after the tool's object (`create_contact` -> `contacts`). An assumption, hence ungated."""
    pattern = {"fields": {k: {"eq": v} for k, v in params.items()}}
    return {"collection": collection, "pattern": pattern, "describe": f"a new item in {collection}"}


def checks_count(expect: Mapping[str, list[dict[str, Any]]]) -> int:
    """Expectations a no-op run cannot meet (`kept` always holds when nothing happens)."""
    return sum(len(expect.get(k, [])) for k in ("added", "changed", "removed"))


def expected_values(expect_by_server: Mapping[str, Mapping[str, list[dict[str, Any]]]]) -> list[Any]:
    """Every concrete value the expectations compare against (an instruction must state them all)."""
    values: list[Any] = []

    def walk(pattern: Mapping[str, Any]) -> None:
        if "eq" in pattern:
            if pattern.get("implied"):
                return
            value = pattern["eq"]
            for v in value if isinstance(value, list) else [value]:
                if v not in values:
                    values.append(v)
        for sub in (pattern.get("fields") or {}).values():
            walk(sub)
        for sub in pattern.get("contains") or []:
            walk(sub)

    for rules in expect_by_server.values():
        for rule in [*rules.get("added", []), *rules.get("changed", [])]:
            walk(rule["pattern"])
    return values


def human_lines(expect_by_server: Mapping[str, Mapping[str, list[dict[str, Any]]]]) -> list[str]:
    lines = []
    for server, rules in expect_by_server.items():
        for kind in ("added", "changed", "removed"):
            for rule in rules.get(kind, []):
                lines.append(f"{server}: {rule['describe']}")
        for rule in rules.get("kept", []):
            lines.append(f"{server}: every other item of {rule['collection']} still exists")
    return lines
