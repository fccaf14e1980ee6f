"""An in-process copy of a built-in tool server: builds the shared "world" every task starts from, and
replays actions on copies of it, so plans are checked (and their state changes known) before any rollout.

The world is made with the server's own create tools (`create_event` with generated values), then turned into
a seed file `{collection: [items]}` and loaded back into a blank state; the round trip must reproduce the
world exactly, otherwise the server's seed format is not item-shaped and tasks start from a blank state.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eval_pipelines.taskgen.schema_server import SchemaToolServer, synthesize
from eval_pipelines.taskgen.toolset import ServerTools, ToolInfo, id_stem, singular
from eval_pipelines.taskgen.values import TITLE_FIELDS, UnplannableParameter, ValueFactory
from eval_pipelines.toolservers.base import BuiltinToolServer, SeedError, State, ToolContext, ToolError

MAX_CREATE_FAILURES = 3


def collection_for(state: State, stem: str, fallback_words: list[str] | None = None) -> str | None:
    """The collection an id parameter's stem names (`event` -> `events`)."""
    candidates = [stem] if stem else []
    candidates += list(fallback_words or [])
    for word in candidates:
        for name in state:
            if name == word or singular(name) == word or singular(name) == singular(word):
                return name
    return None


def title_of(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    names = [*TITLE_FIELDS, *(k for k in item if isinstance(k, str) and k.endswith("_name"))]
    for name in names:
        value = item.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return None


def unique_title(items: Mapping[str, Any], key: str) -> str | None:
    """The item's title when no other item of its collection has the same one, so the title alone finds it
    (two invoices may name the same customer)."""
    title = title_of(items.get(key))
    if title is None:
        return None
    folded = " ".join(title.split()).casefold()
    for other_key, other in items.items():
        other_title = title_of(other)
        if other_key != key and other_title is not None and " ".join(other_title.split()).casefold() == folded:
            return None
    return title


def ref_value(tool: ToolInfo, param: str, key: str) -> str | int:
    """An item's key as the tool's id parameter takes it (state keys are text; an integer id is a number)."""
    schema = tool.properties.get(param, {})
    return int(key) if schema.get("type") == "integer" and key.isdigit() else key


def diff_keys(before: State, after: State) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, list[str]]]:
    """(added, changed, removed) item keys per collection."""
    added: dict[str, list[str]] = {}
    changed: dict[str, list[str]] = {}
    removed: dict[str, list[str]] = {}
    for collection in set(before) | set(after):
        old, new = before.get(collection) or {}, after.get(collection) or {}
        if old == new:
            continue
        if a := sorted(set(new) - set(old)):
            added[collection] = a
        if r := sorted(set(old) - set(new)):
            removed[collection] = r
        if c := sorted(k for k in set(old) & set(new) if old[k] != new[k]):
            changed[collection] = c
    return added, changed, removed


@dataclass
class Sandbox:
    server_name: str
    server: BuiltinToolServer
    tools: ServerTools
    base_state: State
    #: the seed file content every task of this server loads (None: tasks start from a blank state).
    seed: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def seed_name(self) -> str:
        return f"{self.server_name}_world.json"

    def fresh(self) -> State:
        return copy.deepcopy(self.base_state)

    def run(self, state: State, tool: str, params: dict[str, Any]) -> str:
        """Execute in place; ToolError when the server refuses."""
        return self.server.execute(ToolContext(workspace_id="taskgen", state=state), tool, params)

    def items(self, state: State, collection: str) -> dict[str, Any]:
        found = state.get(collection)
        return found if isinstance(found, dict) else {}

    def target_collection(self, state: State, tool: ToolInfo, param: str) -> str | None:
        stem = id_stem(param)
        if stem is None:
            return None
        return collection_for(state, stem, tool.object_words)

    def resolve_refs(
        self, state: State, tool: ToolInfo, rng: random.Random, exclude: frozenset[str] = frozenset()
    ) -> dict[str, Any] | None:
        """Existing keys for the tool's required id parameters (other than `exclude`); None if one has none."""
        refs: dict[str, Any] = {}
        for param in tool.required:
            if param in exclude or id_stem(param) is None:
                continue
            collection = self.target_collection(state, tool, param)
            keys = sorted(self.items(state, collection)) if collection else []
            if not keys:
                return None
            refs[param] = ref_value(tool, param, rng.choice(keys))
        return refs


def build_sandbox(
    server_tools: ServerTools,
    server_class: type[BuiltinToolServer],
    values: ValueFactory,
    rng: random.Random,
    *,
    agent_email: str,
    world_size: int,
) -> Sandbox:
    server = server_class()
    blank = server.new_state()
    account_seed: dict[str, Any] = {}
    probe = copy.deepcopy(blank)
    try:
        server.seed(probe, [{"account": agent_email}])
        if probe != blank:
            account_seed = {"account": agent_email}
            blank = probe
    except (SeedError, ValueError, TypeError, KeyError):
        pass
    sandbox = Sandbox(server_name=server_tools.name, server=server, tools=server_tools, base_state=blank)
    world = copy.deepcopy(blank)
    created: dict[str, list[str]] = {}
    if isinstance(server, SchemaToolServer):
        # Collections no tool adds to (a read-only catalog) get items drawn from the schemas.
        synthesize(server.layout, world, values, world_size)
        created = {name: sorted(items) for name, items in world.items() if items}
    for tool in server_tools.tools:
        if tool.kind != "create":
            continue
        failures = 0
        made = 0
        while made < world_size and failures < MAX_CREATE_FAILURES:
            refs = sandbox.resolve_refs(world, tool, rng)
            if refs is None:
                break
            try:
                params = values.params_for(tool, fixed=refs)
                before = copy.deepcopy(world)
                sandbox.run(world, tool.name, params)
            except (ToolError, UnplannableParameter):
                failures += 1
                continue
            added, changed, removed = diff_keys(before, world)
            if changed or removed or len(added) != 1 or len(next(iter(added.values()))) != 1:
                # Not a plain "make one item" tool (it touched other items): keep it out of the world.
                world = before
                break
            collection, keys = next(iter(added.items()))
            if any(sandbox.target_collection(before, tool, p) == collection for p in refs):
                # It derives a new item from an existing one (a reply): the world holds originals only.
                world = before
                break
            created.setdefault(collection, []).extend(keys)
            made += 1
    if not created:
        sandbox.seed = dict(account_seed) or None
        return sandbox
    seed: dict[str, Any] = dict(account_seed)
    for collection, keys in created.items():
        seed[collection] = [copy.deepcopy(world[collection][k]) for k in keys]
    check = server.new_state()
    try:
        server.seed(check, [seed])
    except (SeedError, ValueError, TypeError, KeyError) as exc:
        sandbox.notes.append(f"{server_tools.name}: its seed format does not take items as stored ({exc})")
        sandbox.seed = dict(account_seed) or None
        return sandbox
    if check != world:
        sandbox.notes.append(f"{server_tools.name}: seeding the world does not reproduce it; tasks start blank")
        sandbox.seed = dict(account_seed) or None
        return sandbox
    sandbox.base_state = world
    sandbox.seed = seed
    return sandbox
