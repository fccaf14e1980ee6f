"""The contract of a built-in, stateful tool server and the parameter validation every server shares.

A server is a plain Python object: it lists its tools, builds and seeds a state, executes calls against a
state and renders it as text. It knows nothing about HTTP or workspaces (see `app.py`), so the same class
backs the HTTP app, the tests and any in-process use.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from eval_pipelines.schemas.tools import ToolDefinition

if TYPE_CHECKING:  # jsonschema loads when a server first validates a call, not with every reader of the registry
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError as SchemaValidationError

#: collection name -> item id -> JSON item (for example `state["emails"]["e-001"]`).
State = dict[str, dict[str, dict[str, Any]]]

_SCALARS = frozenset({str, int, float, bool, type(None)})


def copy_state(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars), a few times faster than `copy.deepcopy`, which
    a workspace paid on every mutating call. Anything else (a `FilesState`, a set) goes to `copy.deepcopy`; like
    a JSON round trip, and unlike `deepcopy`, an item referenced twice is copied twice."""
    kind = type(value)
    if kind is dict:
        return {key: copy_state(item) for key, item in value.items()}
    if kind is list:
        return [copy_state(item) for item in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)


class ToolError(Exception):
    """A tool call that failed in a way the agent should see: the message becomes the error observation."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: what failed when it was not the agent's call itself (an `ErrorClass` value, e.g. `npc_model`); the
        #: step answer carries it as `error_source` so the engine classifies the rollout from the cause.
        self.source = source

    def __str__(self) -> str:
        return self.message


class SeedError(ValueError):
    """Seed data that cannot be loaded; the message names the file index and the field."""


class StateNotRestorable(ValueError):
    """A snapshot from which a server cannot rebuild the workspace as it was; the message says what is missing."""


class ServerUnavailable(RuntimeError):
    """The server's own backend failed (an upstream benchmark's worker crashed or hung): the app answers 503,
    an infrastructure error, never the agent's."""


class ConfigureError(ValueError):
    """Runtime settings a server cannot use; the message names the field and never echoes a value."""


@dataclass
class ToolContext:
    """What a tool call may touch: the calling workspace's state (mutated in place), its identity, and its
    runtime settings (set by `configure`; in memory only, never part of the state or a snapshot)."""

    workspace_id: str
    state: State
    step_index: int = 0
    runtime: dict[str, Any] = field(default_factory=dict, repr=False)


def seed_objects(seed_files: list[Any], allowed: Set[str], expected: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each seed file as (where, object), once it is known to be a JSON object with only `allowed` keys;
    `expected` says what it should hold, for the error ("'account' and/or 'tickets'")."""
    for index, seed in enumerate(seed_files):
        where = f"seed file {index}"
        if not isinstance(seed, dict):
            raise SeedError(f"{where}: expected a JSON object with {expected}")
        unknown = sorted(set(seed) - allowed)
        if unknown:
            raise SeedError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        yield where, seed


def _format_schema_error(tool_name: str, error: SchemaValidationError) -> str:
    # `required` errors already quote the missing property; every other error needs the offending path,
    # otherwise "5 is not of type 'string'" leaves the agent guessing which parameter was wrong.
    path = ".".join(str(p) for p in error.absolute_path)
    if path:
        return f"Invalid parameters for {tool_name}: parameter '{path}': {error.message}"
    return f"Invalid parameters for {tool_name}: {error.message}"


#: Where `tool` leaves its declarations on a handler.
_DECLARED_TOOLS = "__declared_tools__"
H = TypeVar("H", bound=Callable[..., Any])


def tool(*, name: str, description: str, parameters: dict[str, Any], mutates_state: bool) -> Callable[[H], H]:
    """Declare the decorated method as the handler of tool `name` (the method gets `handler_subject(ctx)` and
    the validated parameters). Stacked declarations list in reading order; a server lists its tools in the order
    its handlers are defined."""
    definition = ToolDefinition(name=name, description=description, parameters=parameters, mutates_state=mutates_state)

    def declare(handler: H) -> H:
        setattr(handler, _DECLARED_TOOLS, (definition, *getattr(handler, _DECLARED_TOOLS, ())))
        return handler

    return declare


class BuiltinToolServer(ABC):
    """Base class of every built-in tool server. Subclasses are stateless: all state lives in `State`."""

    name: ClassVar[str]
    #: collection name -> plural noun used in diff summaries ("emails" -> "email(s)").
    collection_nouns: ClassVar[dict[str, str]] = {}
    #: whether a call that fails leaves the state as it was before it (False: as the server left it, when the
    #: state mirrors a backend that keeps a failed call's partial changes).
    rolls_back_failed_calls: ClassVar[bool] = True
    #: whether `seed` is a function of the seed files alone (no backend, clock, randomness or workspace id, and
    #: JSON-shaped state), so a workspace may start from a copy of the state an identical seed gave before.
    seeding_is_pure: ClassVar[bool] = False

    #: the server's tools, collected from its `@tool` handlers; `tools()` hands out copies, so no caller can
    #: change the server's own.
    tool_definitions: ClassVar[tuple[ToolDefinition, ...]] = ()
    #: tool name -> the name of the method that handles it.
    tool_handlers: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = [
            (definition, attribute)
            for attribute, value in vars(cls).items()
            for definition in getattr(value, _DECLARED_TOOLS, ())
        ]
        if declared:
            cls.tool_definitions = tuple(definition for definition, _ in declared)
            cls.tool_handlers = {definition.name: attribute for definition, attribute in declared}

    def tools(self) -> list[ToolDefinition]:
        """Every tool, with a JSON Schema `parameters` object and `mutates_state`."""
        return [tool.model_copy(deep=True) for tool in self.tool_definitions]

    @abstractmethod
    def new_state(self) -> State:
        """An empty state with every collection present."""

    @abstractmethod
    def seed(self, state: State, seed_files: list[Any]) -> None:
        """Load parsed seed files into `state`; raise SeedError naming the problem."""

    def restore_state(self, snapshot: Mapping[str, Any]) -> State:
        """A state of this server's own type holding `snapshot` (a snapshot's `state`): the workspace a finished
        rollout left, brought back for verifiers that query the server after the run. Raises
        StateNotRestorable when the snapshot cannot reproduce it. The default suits servers whose whole state
        is the JSON of their collections."""
        state = self.new_state()
        for collection, items in snapshot.items():
            if not isinstance(items, dict):
                raise StateNotRestorable(f"collection {collection!r}: expected an object of items")
            state[collection] = copy_state(items)
        return state

    async def aseed(self, workspace_id: str, state: State, seed_files: list[Any]) -> None:
        """Seeding as the HTTP app runs it, for workspace `workspace_id`. A server whose state lives elsewhere (a
        subprocess) overrides this and awaits it, so the event loop keeps serving; the default runs `seed`.
        Raises SeedError for bad seeds and ServerUnavailable when its backend fails."""
        self.seed(state, seed_files)

    async def adelete(self, workspace_id: str) -> None:
        """Release what the server holds for a deleted workspace beyond its state (nothing, by default)."""
        return None

    async def aclose(self) -> None:
        """Stop what the server runs beside its states (a backend process) when its host shuts down."""
        return None

    def workspace_tools(self, workspace_id: str) -> list[ToolDefinition]:
        """The tools a workspace lists: every tool, unless the server's tools depend on the workspace's seed."""
        return self.tools()

    def call(self, ctx: ToolContext, tool_name: str, params: dict[str, Any]) -> str:
        """Run one validated call on the tool's `@tool` handler; return the observation text or raise ToolError.
        The handler gets `handler_subject(ctx)` (the state, unless the server says otherwise)."""
        attribute = self.tool_handlers.get(tool_name)
        handler = getattr(self, attribute, None) if attribute is not None else None
        if handler is None:
            raise ToolError(f"Unknown tool '{tool_name}' on tool server '{self.name}'")
        result: str = handler(self.handler_subject(ctx), **params)
        return result

    def handler_subject(self, ctx: ToolContext) -> Any:
        """What a tool method works on: the workspace's state."""
        return ctx.state

    async def acall(self, ctx: ToolContext, tool_name: str, params: dict[str, Any]) -> str:
        """The call as the HTTP app runs it. Servers that wait on I/O (an LLM, a subprocess) override this and
        await it, so the event loop keeps serving other workspaces; the default runs `call`. An override must
        change `ctx.state` only after its last await, so a snapshot taken meanwhile never sees half a call."""
        return self.call(ctx, tool_name, params)

    def configure(self, runtime: dict[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
        """Apply a workspace's runtime settings (for example the model that plays NPCs) to `runtime`, which
        lives in memory only. Return what may be echoed (never a secret); raise ConfigureError on bad input."""
        raise ConfigureError(f"tool server '{self.name}' has no runtime settings to configure")

    @abstractmethod
    def render_text(self, state: State) -> str:
        """A human-readable dump of the state."""

    def noun(self, collection: str) -> str:
        return self.collection_nouns.get(collection, collection)

    @cached_property
    def tool_map(self) -> dict[str, ToolDefinition]:
        return {tool.name: tool for tool in self.tools()}

    @cached_property
    def _validators(self) -> dict[str, Draft202012Validator]:
        from jsonschema import Draft202012Validator

        return {name: Draft202012Validator(tool.parameters) for name, tool in self.tool_map.items()}

    def mutates(self, tool_name: str) -> bool:
        tool = self.tool_map.get(tool_name)
        return bool(tool is not None and tool.mutates_state)

    def validate_params(self, tool_name: str, params: dict[str, Any]) -> dict[str, Any]:
        """Check `params` against the tool's schema and return a copy with schema defaults filled in."""
        tool = self.tool_map.get(tool_name)
        if tool is None:
            available = ", ".join(sorted(self.tool_map))
            raise ToolError(f"Unknown tool '{tool_name}' on tool server '{self.name}'. Available tools: {available}")
        properties: dict[str, Any] = tool.parameters.get("properties") or {}
        unexpected = sorted(set(params) - set(properties))
        if unexpected:
            names = ", ".join(f"'{n}'" for n in unexpected)
            allowed = ", ".join(f"'{n}'" for n in properties) or "none"
            raise ToolError(f"Invalid parameters for {tool_name}: unexpected parameter(s) {names} (allowed: {allowed})")
        validator = self._validators[tool_name]
        errors = sorted(validator.iter_errors(params), key=lambda e: (".".join(map(str, e.absolute_path)), e.message))
        if errors:
            raise ToolError(_format_schema_error(tool_name, errors[0]))
        result = dict(params)
        for prop, spec in properties.items():
            if not isinstance(spec, dict):
                continue
            if prop not in result and "default" in spec:
                result[prop] = copy.deepcopy(spec["default"])
            # JSON Schema counts 3.0 as an integer; tools slice and index with it, so make it a real int.
            if spec.get("type") == "integer" and isinstance(result.get(prop), float):
                result[prop] = int(result[prop])
        return result

    def execute(self, ctx: ToolContext, tool_name: str, params: dict[str, Any]) -> str:
        """Validate, then call. Raises ToolError for unknown tools, bad parameters and failed calls."""
        return self.call(ctx, tool_name, self.validate_params(tool_name, params))

    async def aexecute(self, ctx: ToolContext, tool_name: str, params: dict[str, Any]) -> str:
        """Validate, then await `acall`. Raises like `execute`."""
        return await self.acall(ctx, tool_name, self.validate_params(tool_name, params))
