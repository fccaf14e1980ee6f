"""A stateful stand-in for a tool server known only by its tools' schemas: a user's own toolset.

Task generation plans, replays and gates tasks on it as on a built-in server. Its tools are the user's: they
validate calls with the user's schemas, so tasks, reference actions and verifiers use the user's parameter
names and required fields.

What a tool does is read from its name and parameters (`toolset` explains tool kinds and id parameters):

- a reading tool with a required id parameter of the collection it names reads that item
  (`get_product(product_id)`);
- any other reading tool lists the items of the collection its name names, filtered by what it is given
  (`search_products(query, category, max_price)`: every word of `query` in the item's text, `category`
  equal, `price` at most `max_price`; `list_ticket_comments(ticket_id)`: the comments holding that ticket id);
- a deleting tool with an id parameter removes that item; without one, the items whose fields equal what it
  is given;
- a writing tool whose name names the collection of its id parameter changes that item: the parameters given
  become its fields, or, for a tool with no other parameter, `status` becomes the word its name ends with
  (`mark_invoice_paid` -> `paid`) or its verb's participle (`void_invoice` -> `voided`);
- an updating tool without an id parameter changes the one item of its collection (`update_profile`);
- any other writing tool adds an item to the collection its name names, holding the parameters given, the
  ids of the items it refers to among them (`log_call(contact_id, notes)` adds a call with its `contact_id`).

Items are `{"id": ..., field: value}`, keyed by their id. A new id continues after the highest number in the
collection (`TIC-1001`, `TIC-1002`; plain numbers when the id parameters are integers), so a replay on the
same seed gives the same ids. A seed file is `{collection: [items]}`. Observations are JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from jsonschema import Draft202012Validator

from eval_pipelines.schemas.scenarios import SimulatedServer
from eval_pipelines.schemas.tools import ToolDefinition
from eval_pipelines.taskgen.errors import TaskGenRequestError
from eval_pipelines.taskgen.toolset import ToolInfo, id_stem, singular, tool_info
from eval_pipelines.taskgen.values import TITLE_FIELDS, UnplannableParameter, ValueFactory, semantic
from eval_pipelines.toolservers.base import BuiltinToolServer, SeedError, State, ToolContext, ToolError, seed_objects

FIRST_ID_NUMBER = 1001
#: the key of the one item a collection without ids holds (`update_profile`).
SINGLE_ITEM_KEY = "current"
PAGING_PARAMS = frozenset(["limit", "offset", "page", "page_size", "per_page", "cursor", "max_results"])
#: verbs that only change fields; any other verb on a tool with nothing but an id sets a status.
_FIELD_VERBS = frozenset(["update", "edit", "modify", "set", "change", "patch"])
_IRREGULAR_PARTICIPLES = {"send": "sent", "pay": "paid", "hold": "held", "shut": "shut", "set": "set"}
_BOUND = re.compile(r"^(?:(min|max)_(.+)|(.+)_(min|max))$")
_NUMBER_TAIL = re.compile(r"(\d+)$")


class SchemaServerError(TaskGenRequestError):
    """A toolset no stand-in can serve; the field names the tool and the parameter."""


def plural(noun: str) -> str:
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def participle(verb: str) -> str:
    if verb in _IRREGULAR_PARTICIPLES:
        return _IRREGULAR_PARTICIPLES[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2:-1] not in ("a", "e", "i", "o", "u"):
        return verb[:-1] + "ied"
    return verb + "ed"


@dataclass
class Collection:
    name: str
    noun: str
    #: field -> the JSON Schema the tools give it.
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the schemas of the id parameters naming its items (a new id must satisfy each).
    id_schemas: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    id_format: str = "{prefix}-{number}"
    integer_ids: bool = False

    @property
    def prefix(self) -> str:
        return re.sub(r"[^A-Za-z]", "", self.noun).upper()[:3] or "ITM"

    def format_id(self, number: int) -> str | int:
        return number if self.integer_ids else self.id_format.format(prefix=self.prefix, noun=self.noun, number=number)

    def new_id(self, items: Mapping[str, Any]) -> str | int:
        numbers = [int(m.group(1)) for key in items if (m := _NUMBER_TAIL.search(str(key)))]
        return self.format_id(max(numbers, default=FIRST_ID_NUMBER - 1) + 1)

    @property
    def title_field(self) -> str | None:
        return next((f for f in TITLE_FIELDS if f in self.fields), None) or next(
            (f for f in self.fields if f.endswith("_name")), None
        )


@dataclass(frozen=True)
class Behaviour:
    #: get, list, change, remove, add or put (change the collection's one item).
    action: str
    collection: str
    #: the id parameter naming the item acted on (get, change, remove).
    target: str | None = None
    #: the `status` a change sets when the tool takes nothing but the id.
    status: str | None = None


@dataclass
class Layout:
    collections: dict[str, Collection]
    behaviours: dict[str, Behaviour]

    def added_to(self) -> set[str]:
        return {b.collection for b in self.behaviours.values() if b.action in ("add", "put")}

    def collection_of_field(self, name: str) -> Collection | None:
        """The collection a field's values come from (`category` -> `categories`), if one does."""
        stem = id_stem(name)
        noun = singular(stem if stem else name.lower())
        return next((c for c in self.collections.values() if c.noun == noun), None)


# -- reading the layout from the schemas ---------------------------------------------------------------


def _id_params(tool: ToolInfo, *, required_only: bool) -> list[str]:
    names = tool.required if required_only else list(tool.properties)
    return [p for p in names if p in tool.properties and id_stem(p) is not None]


def _object_noun(tool: ToolInfo, exclude: set[str], known: set[str]) -> str | None:
    words = [singular(w) for w in tool.object_words if singular(w) not in exclude]
    for word in reversed(words):
        if word in known:
            return word
    return words[-1] if words else None


def _names_a_field(tool: ToolInfo, own: str, named: list[str], known: set[str]) -> bool:
    """Whether the word after an item's noun is one of its fields or states, not items of their own:
    `mark_invoice_paid(invoice_id)`, `set_ticket_priority(ticket_id, ...)`, `get_ticket_status(ticket_id)`
    (but `list_ticket_comments(ticket_id)` lists comments, `add_ticket_note(ticket_id, ...)` adds a note)."""
    if not named or own in known:
        return False
    if tool.kind == "update":
        return True
    written = next((w for w in reversed(tool.words) if singular(w) == own), own)
    return tool.kind == "read" and written == own


def _behaviour(tool: ToolInfo, known: set[str]) -> tuple[str, Behaviour]:
    """(the collection's noun, what the tool does)."""
    ids = _id_params(tool, required_only=True)
    bare = next((p for p in ids if id_stem(p) == ""), None)
    stems = {singular(s): p for p in ids if (s := id_stem(p))}
    own = _object_noun(tool, set(stems), known)
    named = [w for w in map(singular, tool.words) if w in stems]
    noun, target = own, bare
    if bare is None and stems and (own is None or _names_a_field(tool, own, named, known)):
        noun = named[-1] if named else sorted(stems)[0]
        target = stems[noun]
    noun = noun or singular(tool.object_words[-1])
    collection = plural(noun)
    if tool.kind == "read":
        return noun, Behaviour("get" if target else "list", collection, target)
    if tool.kind == "delete":
        return noun, Behaviour("remove", collection, target)
    if target is not None:
        status = None
        if len(tool.properties) == 1 and tool.verb not in _FIELD_VERBS:
            after = tool.words[tool.words.index(noun) + 1 :] if noun in tool.words else []
            status = "_".join(after) if after else participle(tool.verb)
        return noun, Behaviour("change", collection, target, status)
    if tool.kind == "update" and not _id_params(tool, required_only=False):
        return noun, Behaviour("put", collection)
    return noun, Behaviour("add", collection)


def _bound_field(param: str) -> str | None:
    match = _BOUND.match(param)
    if match is None:
        return None
    return match.group(2) or match.group(3)


def _record_fields(collection: Collection, tool: ToolInfo, behaviour: Behaviour) -> None:
    for name, schema in tool.properties.items():
        if name == behaviour.target or name in PAGING_PARAMS:
            continue
        if behaviour.action == "list":
            if semantic(name, schema) == "query":
                continue
            bounded = _bound_field(name)
            if bounded is not None:
                kind = schema.get("type") if schema.get("type") in ("integer", "number") else "number"
                collection.fields.setdefault(bounded, {"type": kind, "minimum": 1, "maximum": 200})
                continue
        if behaviour.action in ("get", "remove") and id_stem(name) is None:
            continue
        clean = {k: v for k, v in schema.items() if k not in ("description", "default")}
        collection.fields.setdefault(name, clean)


def _record_id_schemas(layout: Layout, tool: ToolInfo) -> None:
    for param in _id_params(tool, required_only=False):
        stem = id_stem(param)
        behaviour = layout.behaviours[tool.name]
        noun = singular(stem) if stem else layout.collections[behaviour.collection].noun
        collection = layout.collections.get(plural(noun))
        if collection is not None:
            collection.id_schemas.append((tool.name, param, tool.properties[param]))


_ID_FORMATS = (
    "{prefix}-{number}",
    "{prefix}{number}",
    "{number}",
    "{noun}_{number}",
    "{noun}-{number}",
    "00000000-0000-4000-8000-{number:012d}",  # a UUID
)


def _settle_ids(collection: Collection, indexes: Mapping[str, int]) -> None:
    """Pick the id format every id parameter of the collection accepts; refuse when none does."""
    if not collection.id_schemas:
        return
    if all(s.get("type") == "integer" for _, _, s in collection.id_schemas):
        collection.integer_ids = True
        return
    for candidate in _ID_FORMATS:
        sample = candidate.format(prefix=collection.prefix, noun=collection.noun, number=FIRST_ID_NUMBER)
        if all(not list(Draft202012Validator(s).iter_errors(sample)) for _, _, s in collection.id_schemas):
            collection.id_format = candidate
            return
    tool, param, schema = collection.id_schemas[0]
    raise SchemaServerError(
        f"toolset[{indexes.get(tool, 0)}].inputSchema.properties.{param}",
        f"tool {tool!r}: no generated {collection.noun} id fits the parameter's schema {json.dumps(schema)[:200]}",
    )


def layout_for(tools: Sequence[ToolInfo], indexes: Mapping[str, int] | None = None) -> Layout:
    """How each tool acts on which collection; SchemaServerError (naming the tool and the parameter) when a
    tool's schema leaves no way to serve it. `indexes`: tool name -> its position in the request's toolset."""
    known = {singular(s) for t in tools for p in _id_params(t, required_only=False) if (s := id_stem(p))}
    layout = Layout(collections={}, behaviours={})
    for tool in tools:
        noun, behaviour = _behaviour(tool, known)
        layout.behaviours[tool.name] = behaviour
        collection = layout.collections.setdefault(behaviour.collection, Collection(behaviour.collection, noun))
        _record_fields(collection, tool, behaviour)
    for noun in sorted(known):
        layout.collections.setdefault(plural(noun), Collection(plural(noun), noun))
    for tool in tools:
        _record_id_schemas(layout, tool)
    for collection in layout.collections.values():
        if collection.title_field is None:
            collection.fields = {"name": {"type": "string"}, **collection.fields}
        _settle_ids(collection, indexes or {})
    return layout


# -- the server --------------------------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _text_of(item: Mapping[str, Any]) -> str:
    return " ".join(str(v) for v in item.values() if isinstance(v, (str, int, float))).casefold()


def _equal(actual: Any, wanted: Any) -> bool:
    if isinstance(actual, list):
        return any(_equal(a, wanted) for a in actual)
    if isinstance(actual, str) and isinstance(wanted, str):
        return actual.strip().casefold() == wanted.strip().casefold()
    return bool(actual == wanted)


def _within(actual: Any, bound: str, limit: Any) -> bool:
    if not isinstance(actual, (int, float)) or not isinstance(limit, (int, float)):
        return False
    return actual >= limit if bound == "min" else actual <= limit


class SchemaToolServer(BuiltinToolServer):
    """The stand-in's behaviour; `schema_server` makes one subclass per toolset with its tools and layout."""

    name: ClassVar[str] = "tools"
    layout: ClassVar[Layout] = Layout(collections={}, behaviours={})

    def new_state(self) -> State:
        return {name: {} for name in self.layout.collections}

    def seed(self, state: State, seed_files: list[Any]) -> None:
        allowed = set(self.layout.collections)
        expected = " and/or ".join(repr(c) for c in sorted(allowed)) or "no collections"
        for where, seed in seed_objects(seed_files, allowed, expected):
            for collection, items in seed.items():
                if not isinstance(items, list):
                    raise SeedError(f"{where}: {collection}: expected a list of items")
                for position, item in enumerate(items):
                    if not isinstance(item, dict) or "id" not in item:
                        raise SeedError(f"{where}: {collection}[{position}]: expected an object with an 'id'")
                    state[collection][str(item["id"])] = dict(item)

    def render_text(self, state: State) -> str:
        return json.dumps(state, ensure_ascii=False, indent=2, sort_keys=True)

    def call(self, ctx: ToolContext, tool_name: str, params: dict[str, Any]) -> str:
        behaviour = self.layout.behaviours.get(tool_name)
        if behaviour is None:
            raise ToolError(f"Unknown tool '{tool_name}' on tool server '{self.name}'")
        items = ctx.state.setdefault(behaviour.collection, {})
        handler = getattr(self, f"_{behaviour.action}")
        result: str = handler(behaviour, items, params, ctx.state)
        return result

    def _noun(self, behaviour: Behaviour) -> str:
        return self.layout.collections[behaviour.collection].noun

    def _find(self, behaviour: Behaviour, items: dict[str, Any], param: str, raw: Any) -> str:
        key = str(raw).strip()
        if key in items:
            return key
        folded = {k.casefold(): k for k in items}
        if key.casefold() in folded:
            return folded[key.casefold()]
        raise ToolError(f"Parameter '{param}': no {self._noun(behaviour)} with id {raw!r}")

    def _check_references(self, params: Mapping[str, Any], state: State, skip: str | None = None) -> None:
        """An id parameter naming an item of another collection must name one that exists."""
        for name, value in params.items():
            if name == skip or id_stem(name) is None:
                continue
            collection = self.layout.collection_of_field(name)
            if collection is not None:
                kind = Behaviour("get", collection.name)
                self._find(kind, state.get(collection.name, {}), name, value)

    def _get(self, behaviour: Behaviour, items: dict[str, Any], params: dict[str, Any], state: State) -> str:
        assert behaviour.target is not None
        self._check_references(params, state, skip=behaviour.target)
        return _json(items[self._find(behaviour, items, behaviour.target, params[behaviour.target])])

    def _list(self, behaviour: Behaviour, items: dict[str, Any], params: dict[str, Any], state: State) -> str:
        limit = next((params[p] for p in ("limit", "max_results", "page_size", "per_page") if p in params), None)
        found = [item for _, item in sorted(items.items()) if self._matches(item, params)]
        page = found[: int(limit)] if isinstance(limit, (int, float)) and limit >= 0 else found
        return _json({"count": len(found), behaviour.collection: page})

    def _matches(self, item: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
        for name, wanted in params.items():
            if name in PAGING_PARAMS or wanted is None:
                continue
            if semantic(name, {}) == "query" and isinstance(wanted, str):
                text = _text_of(item)
                if not all(word in text for word in wanted.casefold().split()):
                    return False
                continue
            bounded = _BOUND.match(name)
            if bounded is not None and (name not in item):
                bound = bounded.group(1) or bounded.group(4)
                if not _within(item.get(bounded.group(2) or bounded.group(3)), bound, wanted):
                    return False
                continue
            if name in item and not _equal(item[name], wanted):
                return False
        return True

    def _add(self, behaviour: Behaviour, items: dict[str, Any], params: dict[str, Any], state: State) -> str:
        self._check_references(params, state)
        collection = self.layout.collections[behaviour.collection]
        new_id = collection.new_id(items)
        item = {"id": new_id, **params}
        items[str(new_id)] = item
        return _json({"created": item})

    def _change(self, behaviour: Behaviour, items: dict[str, Any], params: dict[str, Any], state: State) -> str:
        assert behaviour.target is not None
        key = self._find(behaviour, items, behaviour.target, params[behaviour.target])
        changes = {k: v for k, v in params.items() if k != behaviour.target}
        self._check_references(changes, state)
        if behaviour.status is not None:
            changes["status"] = behaviour.status
        if not changes:
            raise ToolError(f"Nothing to change: give at least one field besides '{behaviour.target}'")
        updated = {**items[key], **changes}
        if updated == items[key]:
            return _json({"unchanged": items[key]})
        items[key] = updated
        return _json({"updated": updated})

    def _remove(self, behaviour: Behaviour, items: dict[str, Any], params: dict[str, Any], state: State) -> str:
        if behaviour.target is not None:
            key = self._find(behaviour, items, behaviour.target, params[behaviour.target])
            return _json({"deleted": items.pop(key)})
        if not params:
            raise ToolError("Say which items to delete")
        doomed = [k for k, item in items.items() if all(_equal(item.get(n), v) for n, v in params.items())]
        if not doomed:
            raise ToolError(f"No {self._noun(behaviour)} matches {_json(params)}")
        return _json({"deleted": [items.pop(k) for k in doomed]})

    def _put(self, behaviour: Behaviour, items: dict[str, Any], params: dict[str, Any], state: State) -> str:
        if not params:
            raise ToolError("Nothing to change: give at least one field")
        current = items.get(SINGLE_ITEM_KEY, {"id": SINGLE_ITEM_KEY})
        items[SINGLE_ITEM_KEY] = {**current, **params}
        return _json({"updated": items[SINGLE_ITEM_KEY]})


def schema_server(
    name: str, tools: Sequence[ToolInfo], indexes: Mapping[str, int] | None = None
) -> type[SchemaToolServer]:
    """A server class serving `tools` as described in the module's doc (SchemaServerError if it cannot)."""
    layout = layout_for(tools, indexes)
    definitions = tuple(
        ToolDefinition(name=t.name, description=t.description, parameters=t.schema, mutates_state=t.mutates)
        for t in tools
    )
    namespace = {
        "name": name,
        "layout": layout,
        "tool_definitions": definitions,
        "collection_nouns": {c.name: f"{c.noun}(s)" for c in layout.collections.values()},
        "__module__": __name__,
        "__doc__": f"The stand-in for the tool server {name!r}, from its tools' schemas.",
    }
    return type(f"SchemaToolServer_{re.sub(r'[^A-Za-z0-9_]', '_', name)}", (SchemaToolServer,), namespace)


def simulated_server(server_class: type[BuiltinToolServer]) -> SimulatedServer | None:
    """What a scenario keeps of a stand-in so a sweep's tool host serves the same one; None for a built-in."""
    if not issubclass(server_class, SchemaToolServer):
        return None
    return SimulatedServer(name=server_class.name, tools=list(server_class.tool_definitions))


def served_from_definition(definition: dict[str, Any]) -> SchemaToolServer:
    """The stand-in a tool host serves for a scenario's `SimulatedServer`: the one task generation planned and
    replayed its tasks on (the same tools in the same order give the same layout, ids and observations).
    Imported by path by the tool host (`toolservers.host`), which sits below task generation."""
    server = SimulatedServer.model_validate(definition)
    tools = [tool_info(server.name, tool, index, {}) for index, tool in enumerate(server.tools)]
    return schema_server(server.name, tools)()


# -- a world for collections no tool adds to ----------------------------------------------------------


def _synthesis_order(layout: Layout, wanted: Iterable[str]) -> list[str]:
    """Collections others draw values from come first (`categories` before the `products` naming them)."""
    pending = list(wanted)
    ordered: list[str] = []
    while pending:
        for name in pending:
            sources = {
                source.name
                for f in layout.collections[name].fields
                if (source := layout.collection_of_field(f)) is not None and source.name != name
            }
            if not sources & set(pending):
                break
        else:
            name = pending[0]
        pending.remove(name)
        ordered.append(name)
    return ordered


def _field_value(layout: Layout, state: State, field_name: str, schema: Mapping[str, Any], values: ValueFactory) -> Any:
    source = layout.collection_of_field(field_name)
    existing = state.get(source.name) if source is not None else None
    if source is not None and existing:
        keys = sorted(existing)
        pick = existing[values.params.choice(keys)]
        if id_stem(field_name) is not None:
            return pick["id"]
        title = source.title_field
        if title is not None and isinstance(pick.get(title), str) and schema.get("type", "string") == "string":
            return pick[title]
    return values.value(field_name, schema, values.window())


def synthesize(layout: Layout, state: State, values: ValueFactory, count: int) -> None:
    """Fill the collections no tool adds to with `count` items each, their fields drawn from the schemas, so a
    read-only toolset has data to ask about. Fields that name another collection take its items' names."""
    wanted = [name for name in layout.collections if name not in layout.added_to() and not state.get(name)]
    for name in _synthesis_order(layout, wanted):
        collection = layout.collections[name]
        items = state.setdefault(name, {})
        for _ in range(count):
            try:
                fields = {
                    f: _field_value(layout, state, f, schema, values)
                    for f, schema in collection.fields.items()
                    if f != "id"
                }
            except UnplannableParameter:
                break
            new_id = collection.new_id(items)
            items[str(new_id)] = {"id": new_id, **fields}
