"""Generic before/after comparison of two tool-server states."""

from __future__ import annotations

from typing import Any

from eval_pipelines.schemas.tools import DiffScope, StateDiff
from eval_pipelines.toolservers.base import BuiltinToolServer, State, copy_state
from eval_pipelines.toolservers.registry import BUILTIN_SERVERS

ServerRef = BuiltinToolServer | type[BuiltinToolServer] | str


def _server_name_and_nouns(tool_server: ServerRef) -> tuple[str, dict[str, str]]:
    if isinstance(tool_server, str):
        known = BUILTIN_SERVERS.get(tool_server)
        # An external server has no class here: its collection names are used as they are.
        return tool_server, dict(known.collection_nouns) if known else {}
    return tool_server.name, dict(tool_server.collection_nouns)


def _items(collection: Any) -> dict[str, Any]:
    """A collection's items; a value that is not a collection (an upstream benchmark's `db_hash`) is one item."""
    if isinstance(collection, dict):
        return collection
    return {} if collection is None else {"value": collection}


def diff_states(
    tool_server: ServerRef,
    before: State,
    after: State,
    scope: DiffScope | str,
    step_index: int | None = None,
    tool_name: str | None = None,
) -> StateDiff:
    """Compare two states item by item.

    The result's `before`/`after` hold only the changed items, per collection: an added item appears only
    in `after`, a removed one only in `before`, a changed one in both. Only changed items are copied, so a
    diff of a large, mostly unchanged state stays cheap and never aliases the live state.
    """
    name, nouns = _server_name_and_nouns(tool_server)
    out_before: dict[str, dict[str, Any]] = {}
    out_after: dict[str, dict[str, Any]] = {}
    parts: list[str] = []
    collections = list(after) + [c for c in before if c not in after]
    for collection in collections:
        old_items = _items(before.get(collection))
        new_items = _items(after.get(collection))
        added = [key for key in new_items if key not in old_items]
        removed = [key for key in old_items if key not in new_items]
        changed = [key for key in new_items if key in old_items and new_items[key] != old_items[key]]
        if not (added or removed or changed):
            continue
        noun = nouns.get(collection, collection)
        if added or changed:
            out_after[collection] = {key: copy_state(new_items[key]) for key in added + changed}
        if removed or changed:
            out_before[collection] = {key: copy_state(old_items[key]) for key in changed + removed}
        if added:
            parts.append(f"+{len(added)} {noun} added")
        if changed:
            parts.append(f"~{len(changed)} {noun} changed")
        if removed:
            parts.append(f"-{len(removed)} {noun} removed")
    return StateDiff(
        tool_server=name,
        scope=DiffScope(scope),
        summary="; ".join(parts) if parts else "no changes",
        before=out_before,
        after=out_after,
        step_index=step_index,
        tool_name=tool_name,
    )
