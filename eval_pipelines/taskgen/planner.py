"""Plans tasks from tool definitions: chains of tool calls with valid parameters, replayed in the sandbox so
every action is known to succeed and its state change is known, then phrased as an instruction that states
every value the state must end up holding.

Operations (what one mutating call does, learnt by running each tool once in the sandbox):

- `create`: makes a new item (`create_event`); id parameters it needs are references (`calendar_uid`).
- `update` / `delete` / `modify`: acts on an existing item named by its id parameter (`update_event`,
  `delete_event`, `reply_to_email`), either by id ("the event "X" (id evt-0003)") or, as a two-action
  `lookup` step, by its title only, so the agent must find it with a read tool first.
- `global`: changes state without naming an item (`delete_all_emails`); rare.

Difficulty is the number of actions: easy 1, medium 2, hard 3 or 4.
"""

from __future__ import annotations

import copy
import random
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from eval_pipelines.schemas.taskgen import Workflow
from eval_pipelines.schemas.tools import ToolCall
from eval_pipelines.taskgen.context import GenerationContext, stream
from eval_pipelines.taskgen.drafts import TaskDraft
from eval_pipelines.taskgen.expectations import assumed_added, checks_count, derive
from eval_pipelines.taskgen.request import VaryDimension
from eval_pipelines.taskgen.sandbox import Sandbox, diff_keys, ref_value, title_of, unique_title
from eval_pipelines.taskgen.state_check import canon
from eval_pipelines.taskgen.toolset import PREPOSITIONS, ToolInfo, id_stem, singular
from eval_pipelines.taskgen.values import UnplannableParameter, ValueFactory, _is_content, semantic
from eval_pipelines.toolservers.base import State, ToolError

ACTIONS_BY_DIFFICULTY: dict[str, tuple[int, ...]] = {"easy": (1,), "medium": (2,), "hard": (3, 3, 4)}
TARGETED_OPS = ("update", "delete", "modify")
#: how often each kind of step is drawn when a chain is shaped at random.
STEP_WEIGHTS: dict[str, float] = {
    "lookup": 3.0,
    "create": 2.0,
    "update": 2.0,
    "delete": 1.0,
    "modify": 1.0,
    "global": 0.2,
}
PROBE_ATTEMPTS = 4

_LOOKUP_WORDS = frozenset(["find", "look", "search", "locate", "check", "identify", "review"])
_DELETE_WORDS = frozenset(["delete", "cancel", "remove", "trash", "drop", "clean", "purge"])
_UPDATE_WORDS = frozenset(
    [
        "update",
        "change",
        "move",
        "reschedule",
        "rename",
        "edit",
        "set",
        "assign",
        "escalate",
        "mark",
        "close",
        "resolve",
    ]
)
_CREATE_WORDS = frozenset(
    [
        "create",
        "schedule",
        "book",
        "add",
        "send",
        "log",
        "open",
        "invite",
        "record",
        "note",
        "write",
        "draft",
        "reply",
        "forward",
        "comment",
    ]
)
LABELS = {"to": "recipient", "cc": "cc", "bcc": "bcc", "start": "start time", "end": "end time"}

CREATE_TEMPLATES = (
    "{Verb} a new {obj} with {fields}.",
    "Please {verb} a new {obj} with these details: {fields}.",
    "Set up a new {obj} ({verb} it) with {fields}.",
)
UPDATE_TEMPLATES = (
    "{Verb} the {noun} {desc}: set {assignments}.",
    "For the {noun} {desc}, change {assignments}.",
    "The {noun} {desc} needs new details; set {assignments}.",
)
DELETE_TEMPLATES = (
    "{Verb} the {noun} {desc}.",
    "The {noun} {desc} is no longer needed; {verb} it.",
)
CONNECTORS = (("Then", "After that,", "Finally,"), ("Next,", "Also,", "Lastly,"), ("Then", "Then", "Then"))
CLOSINGS = ("Leave everything else unchanged.", "Do not change anything else.", "Nothing else should change.")


@dataclass(frozen=True)
class ToolRole:
    tool: ToolInfo
    op: str
    sandbox: Sandbox | None = None
    target_param: str | None = None
    target_collection: str | None = None


@dataclass(frozen=True)
class StepSpec:
    op: str
    lookup: bool = False
    same_target: bool = False
    tool_name: str | None = None
    #: a `create` step that may instead act on the current target (`add a note` after `find the ticket`).
    may_modify: bool = False


@dataclass
class Step:
    role: ToolRole
    action: ToolCall
    lookup: ToolCall | None = None
    target: tuple[str, str] | None = None
    target_title: str | None = None
    same_target: bool = False
    sentence: str = ""
    short: str = ""


@dataclass
class WorkflowPlan:
    workflow: Workflow
    specs: list[StepSpec]

    @property
    def actions(self) -> int:
        return sum(2 if s.lookup else 1 for s in self.specs)


@dataclass
class Streams:
    params: random.Random
    entities: random.Random
    phrasing: random.Random
    plan: random.Random


class PlanFailed(Exception):
    """This attempt at a task did not work out (the caller re-draws)."""


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def label(param: str) -> str:
    if param in LABELS:
        return LABELS[param]
    stem = id_stem(param)
    if stem:
        return stem.replace("_", " ")
    return param.replace("_", " ")


def render_value(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return ", ".join(render_value(v) for v in value) if value else "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "empty"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {render_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def join_words(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def fields_text(params: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> str:
    return join_words([f"{label(k)} {render_value(v)}" for k, v in params.items() if k not in skip])


def assignments_text(params: Mapping[str, Any], skip: frozenset[str]) -> str:
    return join_words([f"{label(k)} to {render_value(v)}" for k, v in params.items() if k not in skip])


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text and not text[:2].isupper() else text


class Planner:
    def __init__(self, ctx: GenerationContext) -> None:
        self.ctx = ctx
        self.notes: list[str] = []
        self.usage: Counter[str] = Counter()
        self.roles = self._classify()
        self.workflow_plans, self.unmapped_workflows = self._map_workflows(ctx.resolved.workflows)

    # -- what each tool does -----------------------------------------------------------------------------

    def _classify(self) -> list[ToolRole]:
        roles: list[ToolRole] = []
        rng = stream(self.ctx.seed, "probe")
        values = ValueFactory(params=rng, entities=rng, people=self.ctx.people, used_titles=None)
        for name, server in self.ctx.toolset.servers.items():
            sandbox = self.ctx.sandboxes.get(name)
            for tool in server.tools:
                if not tool.mutates:
                    roles.append(ToolRole(tool, "read", sandbox))
                    continue
                required_ids = [p for p in tool.required if id_stem(p) is not None]
                if sandbox is None:
                    if required_ids or tool.kind != "create":
                        self.notes.append(
                            f"{name}.{tool.name}: skipped; without a tool server to try it on, only tools that "
                            "create items from stated values can be planned"
                        )
                    else:
                        roles.append(ToolRole(tool, "create", None))
                    continue
                if not required_ids:
                    roles.append(ToolRole(tool, "create" if tool.kind == "create" else "global", sandbox))
                    continue
                role = self._probe(tool, sandbox, required_ids, values, rng)
                if role is None:
                    self.notes.append(f"{name}.{tool.name}: skipped; no call with generated values succeeded")
                else:
                    roles.append(role)
        return roles

    def _probe(
        self, tool: ToolInfo, sandbox: Sandbox, required_ids: list[str], values: ValueFactory, rng: random.Random
    ) -> ToolRole | None:
        for _ in range(PROBE_ATTEMPTS):
            state = sandbox.fresh()
            refs = sandbox.resolve_refs(state, tool, rng)
            if refs is None:
                return None
            try:
                params = values.params_for(tool, fixed=refs)
                before = copy.deepcopy(state)
                sandbox.run(state, tool.name, params)
            except (ToolError, UnplannableParameter):
                continue
            added, changed, removed = diff_keys(before, state)
            for param in required_ids:
                collection = sandbox.target_collection(before, tool, param)
                if collection is None:
                    continue
                key = str(refs[param])
                if key in removed.get(collection, []):
                    return ToolRole(tool, "delete", sandbox, param, collection)
                if key in changed.get(collection, []):
                    op = "delete" if tool.kind == "delete" else "update" if tool.kind == "update" else "modify"
                    return ToolRole(tool, op, sandbox, param, collection)
            for param in required_ids:
                collection = sandbox.target_collection(before, tool, param)
                if collection in added:
                    # It adds to the collection its id points into (`reply_to_email`): it acts on that item.
                    return ToolRole(tool, "modify", sandbox, param, collection)
            if added:
                # The id parameters only point at other kinds of items (`calendar_uid`): it creates something.
                return ToolRole(tool, "create", sandbox)
        return None

    def ops_available(self) -> set[str]:
        ops = {r.op for r in self.roles if r.op != "read"}
        if any(r.op in TARGETED_OPS and self._lookup_possible(r) for r in self.roles):
            ops.add("lookup")
        return ops

    def _lookup_possible(self, role: ToolRole) -> bool:
        return any(r.op == "read" and r.tool.server == role.tool.server for r in self.roles)

    # -- workflows ---------------------------------------------------------------------------------------

    def _map_workflows(self, workflows: list[Workflow]) -> tuple[list[WorkflowPlan], list[str]]:
        plans, unmapped = [], []
        by_name = {r.tool.name: r for r in self.roles}
        ops = {r.op for r in self.roles}
        for workflow in workflows:
            specs: list[StepSpec] = []
            pending_lookup = False
            seen_target = False
            ok = True
            for step in workflow.steps:
                text = step.lower()
                named = next((n for n in by_name if re.search(rf"\b{re.escape(n.lower())}\b", text)), None)
                words = set(re.findall(r"[a-z]+", text))
                op: str | None
                if named is not None:
                    op = by_name[named].op
                elif words & _LOOKUP_WORDS:
                    op = "read"
                elif words & _DELETE_WORDS:
                    op = "delete"
                elif words & _UPDATE_WORDS:
                    op = "update"
                elif words & _CREATE_WORDS:
                    op = "create"
                else:
                    op = None
                if op is None:
                    ok = False
                    break
                if op == "read":
                    pending_lookup = True
                    continue
                if op in TARGETED_OPS:
                    if op not in ops:
                        ok = False
                        break
                    specs.append(
                        StepSpec(
                            op, lookup=pending_lookup and not seen_target, same_target=seen_target, tool_name=named
                        )
                    )
                    seen_target = True
                else:
                    specs.append(StepSpec(op, tool_name=named, may_modify=seen_target and "modify" in ops))
                pending_lookup = False
            if ok and specs and (any(s.op in ops for s in specs)):
                plans.append(WorkflowPlan(workflow, specs))
            else:
                unmapped.append(workflow.name)
        return plans, unmapped

    # -- one task ----------------------------------------------------------------------------------------

    def streams(self, index: int, attempt: int) -> Streams:
        def named(dimension: VaryDimension) -> random.Random:
            varied = self.ctx.resolved.varies(dimension)
            return stream(self.ctx.seed, dimension, index if varied else "fixed", attempt if varied else 0)

        return Streams(
            params=named("parameters"),
            entities=named("entities"),
            phrasing=named("phrasing"),
            plan=stream(self.ctx.seed, "plan", index, attempt),
        )

    def random_shape(self, actions: int, rng: random.Random) -> list[StepSpec]:
        ops = self.ops_available()
        specs: list[StepSpec] = []
        remaining = actions
        while remaining > 0:
            options = [(op, w) for op, w in STEP_WEIGHTS.items() if op in ops and (op != "lookup" or remaining >= 2)]
            if not options:
                raise PlanFailed("the toolset offers no operation to plan")
            total = sum(w for _, w in options)
            pick, acc = rng.random() * total, 0.0
            chosen = options[-1][0]
            for op, weight in options:
                acc += weight
                if pick < acc:
                    chosen = op
                    break
            if chosen == "lookup":
                targeted = [op for op in TARGETED_OPS if op in ops]
                specs.append(StepSpec(rng.choice(targeted), lookup=True))
                remaining -= 2
            else:
                specs.append(StepSpec(chosen))
                remaining -= 1
        return specs

    def plan(self, index: int, difficulty: str, attempt: int, workflow: WorkflowPlan | None = None) -> TaskDraft:
        streams = self.streams(index, attempt)
        values = ValueFactory(
            params=streams.params,
            entities=streams.entities,
            people=self.ctx.people,
            used_titles=self.ctx.used_titles if self.ctx.resolved.varies("parameters") else None,
        )
        if workflow is not None:
            specs = workflow.specs
        else:
            specs = self.random_shape(streams.plan.choice(ACTIONS_BY_DIFFICULTY[difficulty]), streams.plan)
        world = {name: sandbox.fresh() for name, sandbox in self.ctx.sandboxes.items()}
        states = copy.deepcopy(world)
        steps: list[Step] = []
        used_targets: set[tuple[str, str]] = set()
        for spec in specs:
            step = self._realise(spec, steps, states, used_targets, values, streams)
            steps.append(step)
        return self._draft(index, difficulty, steps, world, states, streams, workflow)

    def _pick_role(
        self, op: str, rng: random.Random, tool_name: str | None = None, collection: str | None = None
    ) -> ToolRole:
        candidates = [r for r in self.roles if r.op == op]
        if tool_name is not None:
            candidates = [r for r in candidates if r.tool.name == tool_name] or candidates
        if collection is not None:
            candidates = [r for r in candidates if r.target_collection == collection]
        if not candidates:
            raise PlanFailed(f"no tool performs a {op!r} step")
        least = min(self.usage[f"{r.tool.server}.{r.tool.name}"] for r in candidates)
        pool = [r for r in candidates if self.usage[f"{r.tool.server}.{r.tool.name}"] == least]
        return rng.choice(sorted(pool, key=lambda r: (r.tool.server, r.tool.name)))

    def _realise(
        self,
        spec: StepSpec,
        previous: list[Step],
        states: dict[str, State],
        used_targets: set[tuple[str, str]],
        values: ValueFactory,
        streams: Streams,
    ) -> Step:
        last_target = next((s.target for s in reversed(previous) if s.target is not None), None)
        if spec.may_modify and last_target is not None:
            try:
                return self._realise(
                    StepSpec("modify", same_target=True), previous, states, used_targets, values, streams
                )
            except PlanFailed:
                pass
        if spec.op in ("create", "global"):
            role = self._pick_role(spec.op, streams.plan, spec.tool_name)
            return self._untargeted(role, states, values)
        collection = last_target[0] if spec.same_target and last_target else None
        role = self._pick_role(spec.op, streams.plan, spec.tool_name, collection)
        assert role.sandbox is not None and role.target_param and role.target_collection
        state = states[role.sandbox.server_name]
        if spec.same_target:
            if last_target is None:
                raise PlanFailed("a step refers to an earlier item but there is none")
            key = last_target[1]
        else:
            keys = [
                k
                for k in sorted(role.sandbox.items(state, role.target_collection))
                if (role.target_collection, k) not in used_targets
            ]
            if not keys:
                raise PlanFailed(f"no {role.target_collection} item left to act on")
            key = streams.params.choice(keys)
        item = role.sandbox.items(state, role.target_collection).get(key)
        title = title_of(item)
        lookup = None
        if spec.lookup:
            title = unique_title(role.sandbox.items(state, role.target_collection), key)
            if title is None:
                raise PlanFailed(f"{role.target_collection}/{key} has no title of its own to look it up by")
            lookup = self._lookup(role, state, key, title, item, streams.plan, values)
        params = self._targeted_params(role, state, key, item, values)
        self._run(role, state, params)
        used_targets.add((role.target_collection, key))
        return Step(
            role=role,
            action=ToolCall(tool_server=role.tool.server, tool_name=role.tool.name, parameters=params),
            lookup=lookup,
            target=(role.target_collection, key),
            target_title=title,
            same_target=spec.same_target,
        )

    def _run(self, role: ToolRole, state: State, params: dict[str, Any]) -> None:
        if role.sandbox is None:
            return
        before = copy.deepcopy(state)
        try:
            role.sandbox.run(state, role.tool.name, params)
        except ToolError as exc:
            raise PlanFailed(f"{role.tool.name} refused the planned call: {exc}") from None
        if checks_count(derive(before, state, [params])) == 0:
            raise PlanFailed(f"{role.tool.name} made no checkable change")
        self.usage[f"{role.tool.server}.{role.tool.name}"] += 1

    def _untargeted(self, role: ToolRole, states: dict[str, State], values: ValueFactory) -> Step:
        refs: dict[str, Any] = {}
        state = states.get(role.tool.server)
        if role.sandbox is not None and state is not None:
            found = role.sandbox.resolve_refs(state, role.tool, values.params)
            if found is None:
                raise PlanFailed(f"{role.tool.name} needs an item that does not exist")
            refs = found
        try:
            params = values.params_for(role.tool, fixed=refs)
        except UnplannableParameter as exc:
            raise PlanFailed(str(exc)) from None
        if state is not None:
            self._run(role, state, params)
        else:
            self.usage[f"{role.tool.server}.{role.tool.name}"] += 1
        return Step(
            role=role, action=ToolCall(tool_server=role.tool.server, tool_name=role.tool.name, parameters=params)
        )

    def _targeted_params(
        self, role: ToolRole, state: State, key: str, item: Any, values: ValueFactory
    ) -> dict[str, Any]:
        assert role.sandbox is not None and role.target_param
        tool = role.tool
        refs = role.sandbox.resolve_refs(state, tool, values.params, exclude=frozenset({role.target_param}))
        if refs is None:
            raise PlanFailed(f"{tool.name} needs an item that does not exist")
        fixed = {role.target_param: ref_value(tool, role.target_param, key), **refs}
        try:
            if role.op == "update":
                return self._update_params(tool, fixed, item, values)
            share = 0.0 if role.op == "delete" else 0.6
            return values.params_for(tool, fixed=fixed, optional_share=share)
        except UnplannableParameter as exc:
            raise PlanFailed(str(exc)) from None

    def _update_params(self, tool: ToolInfo, fixed: dict[str, Any], item: Any, values: ValueFactory) -> dict[str, Any]:
        current = item if isinstance(item, dict) else {}
        changeable = [
            name
            for name, schema in tool.properties.items()
            if name not in fixed
            and semantic(name, schema) != "id"
            and _is_content(name, schema)
            and name not in tool.required
        ]
        if not changeable:
            return values.params_for(tool, fixed=fixed, optional_share=0.0)
        validator = Draft202012Validator(tool.schema)
        for _ in range(6):
            chosen = values.params.sample(changeable, k=min(len(changeable), values.params.choice((1, 1, 2))))
            meanings = {n: semantic(n, tool.properties[n]) for n in tool.properties}
            if any(meanings[c] in ("start", "end") for c in chosen):
                # A new time moves both ends, so the event stays valid (end after start).
                chosen += [n for n, m in meanings.items() if m in ("start", "end") and n not in chosen]
            params = values.params_for(tool, fixed=fixed, optional_share=0.0)
            window = values.window()
            for name in chosen:
                params[name] = values.value(name, tool.properties[name], window)
            if any(canon(params[n]) == canon(current.get(n)) for n in chosen if meanings[n] not in ("start", "end")):
                continue
            if not list(validator.iter_errors(params)):
                return params
        raise PlanFailed(f"{tool.name}: no new values differing from the current ones")

    def _lookup(
        self,
        role: ToolRole,
        state: State,
        key: str,
        title: str,
        item: Any,
        rng: random.Random,
        values: ValueFactory,
    ) -> ToolCall:
        assert role.sandbox is not None
        readers = [r for r in self.roles if r.op == "read" and r.tool.server == role.tool.server]
        rng.shuffle(readers)
        readers.sort(key=lambda r: self.usage[f"{r.tool.server}.{r.tool.name}"])
        for reader in readers:
            params = self.lookup_params(reader.tool, role.sandbox, state, title, item, values)
            if params is None:
                continue
            try:
                observation = role.sandbox.run(copy.deepcopy(state), reader.tool.name, params)
            except ToolError:
                continue
            if key in observation:
                self.usage[f"{reader.tool.server}.{reader.tool.name}"] += 1
                return ToolCall(tool_server=reader.tool.server, tool_name=reader.tool.name, parameters=params)
        raise PlanFailed(f"no read tool finds {role.target_collection}/{key} by its title")

    @staticmethod
    def lookup_params(
        tool: ToolInfo, sandbox: Sandbox, state: State, title: str, item: Any, values: ValueFactory
    ) -> dict[str, Any] | None:
        params: dict[str, Any] = {}
        fields = item if isinstance(item, dict) else {}
        query = next((n for n, s in tool.properties.items() if semantic(n, s) == "query"), None)
        if query is not None:
            params[query] = title
        for name in tool.required:
            if name in params:
                continue
            schema = tool.properties.get(name, {})
            if id_stem(name) is not None:
                if name in fields and isinstance(fields[name], str):
                    params[name] = fields[name]
                    continue
                return None  # a `get` by id: it needs the id the task wants found
            try:
                params[name] = values.value(name, schema, values.window())
            except UnplannableParameter:
                return None
        if list(Draft202012Validator(tool.schema).iter_errors(params)):
            return None
        return params

    # -- wording -----------------------------------------------------------------------------------------

    def _sentence(self, step: Step, rng: random.Random) -> tuple[str, str]:
        tool = step.role.tool
        words = tool.words
        verb = words[0]
        if len(words) > 2 and words[1] in PREPOSITIONS:
            verb = f"{words[0]} {words[1]}"
        obj = " ".join(tool.object_words)
        params = step.action.parameters
        if step.role.op in ("create", "global"):
            fields = fields_text(params)
            title = title_of(params)
            short = f"{verb.capitalize()} {obj}" + (f' "{title}"' if title else "")
            if step.role.op == "global" or tool.kind != "create":
                return f"{verb.capitalize()} {' '.join(words[1:])}" + (f" with {fields}" if fields else "") + ".", short
            if not fields:
                return f"{verb.capitalize()} {_article(obj)} new {obj}.", short
            template = rng.choice(CREATE_TEMPLATES)
            return template.format(Verb=verb.capitalize(), verb=verb, obj=obj, fields=fields), short
        assert step.target is not None and step.role.target_param
        collection, key = step.target
        noun = singular(collection)
        if step.same_target:
            desc, noun_phrase = "", f"same {noun}"
        elif step.lookup is not None:
            desc, noun_phrase = f'titled "{step.target_title}"', noun
        elif step.target_title:
            desc, noun_phrase = f'"{step.target_title}" (id {key})', noun
        else:
            desc, noun_phrase = f"with id {key}", noun
        skip = frozenset({step.role.target_param})
        short = f"{verb.capitalize()} {noun}" + (f' "{step.target_title}"' if step.target_title else f" {key}")
        if step.role.op == "update":
            template = rng.choice(UPDATE_TEMPLATES)
            text = template.format(
                Verb=verb.capitalize(), noun=noun_phrase, desc=desc, assignments=assignments_text(params, skip)
            )
        elif step.role.op == "delete":
            template = rng.choice(DELETE_TEMPLATES)
            text = template.format(Verb=verb.capitalize(), verb=verb, noun=noun_phrase, desc=desc)
            extra = fields_text(params, skip)
            if extra:
                text = text[:-1] + f" (with {extra})."
        else:
            fields = fields_text(params, skip)
            with_fields = f" with {fields}" if fields else ""
            if singular(obj) == noun or not obj:
                text = f"{verb.capitalize()} the {noun_phrase} {desc}{with_fields}."
            else:
                text = f"{verb.capitalize()} {_article(obj)} {obj} to the {noun_phrase} {desc}{with_fields}."
        return re.sub(r"\s+", " ", text).replace(" :", ":").replace(" ,", ",").replace(" .", "."), short

    def _draft(
        self,
        index: int,
        difficulty: str,
        steps: list[Step],
        world: dict[str, State],
        states: dict[str, State],
        streams: Streams,
        workflow: WorkflowPlan | None,
    ) -> TaskDraft:
        phrasing = streams.phrasing
        # Task-wide choices first, so a fixed phrasing stream gives every task the same connectors and closing.
        connectors = phrasing.choice(CONNECTORS)
        closing = phrasing.choice(CLOSINGS)
        sentences, shorts = [], []
        for position, step in enumerate(steps):
            text, short = self._sentence(step, phrasing)
            step.sentence, step.short = text, short
            if position > 0:
                connector = (
                    connectors[-1]
                    if position == len(steps) - 1 and len(steps) > 2
                    else connectors[min(position - 1, 1)]
                )
                text = f"{connector} {_lower_first(text)}"
            sentences.append(text)
            shorts.append(short)
        instruction = " ".join([*sentences, closing])
        actions: list[ToolCall] = []
        for step in steps:
            if step.lookup is not None:
                actions.append(step.lookup)
            actions.append(step.action)
        servers = sorted({a.tool_server for a in actions})
        expect: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for server in servers:
            params = [a.parameters for a in actions if a.tool_server == server]
            if server in world:
                expect[server] = derive(world[server], states[server], params)
            else:
                expect[server] = self._external_expect([s for s in steps if s.action.tool_server == server])
        if sum(checks_count(e) for e in expect.values()) == 0:
            raise PlanFailed("the planned actions change nothing a verifier can check")
        mentioned = {p.email for p in self.ctx.npc_profiles if any(p.email in str(a.parameters) for a in actions)}
        profiles = [p for p in self.ctx.npc_profiles if p.email in mentioned]
        ops = {s.role.op for s in steps}
        return TaskDraft(
            task_id=f"{self.ctx.task_prefix}_{index + 1:03d}",
            name="; ".join(shorts)[:120],
            difficulty=difficulty,
            category=self._category(ops, index),
            instruction=instruction,
            actions=actions,
            servers=servers,
            expect=expect,
            summary=f"{difficulty.capitalize()} task ({len(actions)} action(s)): " + "; ".join(shorts),
            reference_answer="Done: " + "; ".join(s[:1].lower() + s[1:] for s in shorts) + ".",
            npc_profiles=profiles,
            seed_names={
                s: self.ctx.sandboxes[s].seed_name
                for s in servers
                if s in self.ctx.sandboxes and self.ctx.sandboxes[s].seed is not None
            },
            workflow=workflow.workflow.name if workflow else None,
        )

    @staticmethod
    def _external_expect(steps: list[Step]) -> dict[str, list[dict[str, Any]]]:
        added = [
            assumed_added("_".join(s.role.tool.object_words) + "s", s.action.parameters)
            for s in steps
            if s.role.tool.mutates
        ]
        return {"added": added, "changed": [], "removed": [], "kept": []}

    def _category(self, ops: set[str], index: int) -> str:
        categories = self.ctx.resolved.categories
        kind = next(iter(ops)) if len(ops) == 1 else "multi_step"
        kind = "create" if kind in ("modify", "global") else kind
        if not categories:
            return kind
        keywords = {
            "create": {"create", "new", "schedul", "log", "intake", "book", "add", "send"},
            "update": {"update", "change", "maint", "triage", "edit", "reschedul", "current"},
            "delete": {"delete", "cancel", "clean", "remov"},
            "multi_step": {"multi", "workflow", "complex", "escalat"},
            "read": {"question", "lookup", "look", "find", "search", "report", "answer", "inquir", "catalog"},
        }[kind]
        scored = []
        for position, category in enumerate(categories):
            text = f"{category.id} {category.label}".lower()
            score = sum(1 for k in keywords if k in text)
            scored.append((score, -position, category.id))
        best = max(scored)
        if best[0] > 0:
            return best[2]
        return categories[index % len(categories)].id

    # -- material for the LLM-driven generator ----------------------------------------------------------

    def example_calls(self, per_tool: int = 3) -> list[dict[str, Any]]:
        """Valid single calls on the world, each touching a different item (so any of them combine)."""
        rng = stream(self.ctx.seed, "examples")
        values = ValueFactory(params=rng, entities=rng, people=self.ctx.people, used_titles=self.ctx.used_titles)
        streams = Streams(params=rng, entities=rng, phrasing=rng, plan=rng)
        used_targets: set[tuple[str, str]] = set()
        examples: list[dict[str, Any]] = []
        for role in self.roles:
            if role.op == "read":
                continue
            for attempt in range(per_tool):
                states = {name: sandbox.fresh() for name, sandbox in self.ctx.sandboxes.items()}
                wants_lookup = role.op in TARGETED_OPS and attempt == 0 and self._lookup_possible(role)
                spec = StepSpec(role.op, lookup=wants_lookup, tool_name=role.tool.name)
                try:
                    step = self._realise(spec, [], states, used_targets, values, streams)
                except PlanFailed:
                    continue
                if step.lookup is not None and step.target is not None:
                    examples.append(
                        {**step.lookup.model_dump(), "finds": f"{step.target[0]}/{step.target[1]}", "mutates": False}
                    )
                examples.append({**step.action.model_dump(), "mutates": True})
        return examples

    def world_view(self, max_items: int = 15, max_chars: int = 160) -> dict[str, Any]:
        """The world each task starts from, trimmed for a prompt."""
        view: dict[str, Any] = {}
        for name, sandbox in self.ctx.sandboxes.items():
            collections: dict[str, Any] = {}
            for collection, items in sandbox.base_state.items():
                if not isinstance(items, dict) or not items:
                    continue
                shown = {}
                for key in list(items)[:max_items]:
                    item = items[key]
                    if isinstance(item, dict):
                        shown[key] = {
                            k: (v[: max_chars - 3] + "...") if isinstance(v, str) and len(v) > max_chars else v
                            for k, v in item.items()
                        }
                    else:
                        shown[key] = item
                collections[collection] = shown
            view[name] = collections
        return view

    def category_for(self, ops: set[str], index: int) -> str:
        return self._category(ops, index)
