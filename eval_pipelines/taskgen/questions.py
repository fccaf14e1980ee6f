"""Tasks for a toolset that changes nothing (a read-only product catalog): questions answered from the data.

A question names an item, by its title (the agent must find it) or by its id, and asks for one of its fields.
Its reference actions read the item (a search by the title, then the item itself when a tool reads one by id),
each replayed in the sandbox so the value is known to be in what the last one returns; its reference answer
states the value, and its verifier checks the final answer (`answer_check`), since no state changes.
Difficulty is still the number of actions: easy 1 (one read), medium 2 (find, then read; or two items), hard
3 or 4 (two or more questions).
"""

from __future__ import annotations

import copy
import random
import re
from dataclasses import dataclass
from typing import Any

from eval_pipelines.schemas.tools import ToolCall
from eval_pipelines.taskgen.answer_check import states
from eval_pipelines.taskgen.drafts import TaskDraft
from eval_pipelines.taskgen.planner import (
    ACTIONS_BY_DIFFICULTY,
    CONNECTORS,
    PlanFailed,
    Planner,
    Streams,
    ToolRole,
    WorkflowPlan,
    label,
)
from eval_pipelines.taskgen.sandbox import Sandbox, ref_value, unique_title
from eval_pipelines.taskgen.toolset import id_stem, singular
from eval_pipelines.taskgen.values import ValueFactory
from eval_pipelines.toolservers.base import State, ToolError

MAX_ASKED_CHARS = 80
BY_TITLE_TEMPLATES = (
    'What is the {label} of the {noun} "{title}"?',
    'Look up the {noun} "{title}" and tell me its {label}.',
    'Find the {noun} "{title}": what {label} does it have?',
)
BY_ID_TEMPLATES = (
    "What is the {label} of the {noun} with id {key}?",
    "Tell me the {label} of {noun} {key}.",
)
CLOSINGS = (
    "Answer in your final message; do not change anything.",
    "Reply with what you found and change nothing.",
    "Just report the answer; nothing should be modified.",
)


@dataclass(frozen=True)
class Question:
    server: str
    collection: str
    key: str
    field: str
    value: Any
    actions: tuple[ToolCall, ...]
    sentence: str
    answer: str
    short: str


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(value)
    return str(value)


def _askable(item: dict[str, Any], title: str | None) -> list[str]:
    """Fields a question may ask for: short scalar values that the title does not already give away."""
    fields = []
    for name, value in item.items():
        if name == "id" or id_stem(name) is not None or value is None or isinstance(value, (dict, list)):
            continue
        text = str(value)
        if not text.strip() or len(text) > MAX_ASKED_CHARS or (title is not None and text == title):
            continue
        if title is not None and isinstance(value, str) and text.casefold() in title.casefold():
            continue
        fields.append(name)
    return fields


class QuestionPlanner:
    """`plan(index, difficulty, attempt, workflow=None) -> TaskDraft`, like `Planner.plan`, for read tools."""

    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        self.ctx = planner.ctx
        self.readers = [r for r in planner.roles if r.op == "read" and r.sandbox is not None]
        if not self.readers:
            raise PlanFailed("the toolset has no tool that reads")

    # -- reading one item ---------------------------------------------------------------------------------

    def _getters(self, sandbox: Sandbox, state: State, collection: str) -> list[ToolRole]:
        """Read tools taking one required id of the collection: they read an item by its id."""
        found = []
        for role in self.readers:
            if role.sandbox is not sandbox:
                continue
            ids = [p for p in role.tool.required if id_stem(p) is not None]
            if len(ids) == 1 and sandbox.target_collection(state, role.tool, ids[0]) == collection:
                found.append(role)
        return found

    def _get(self, role: ToolRole, state: State, key: str, value: Any) -> ToolCall | None:
        assert role.sandbox is not None
        param = next(p for p in role.tool.required if id_stem(p) is not None)
        params = {param: ref_value(role.tool, param, key)}
        for other in role.tool.required:
            if other != param:
                return None  # only a plain read by id is planned
        return self._call(role, state, params, value)

    def _find(
        self, role: ToolRole, state: State, title: str, item: dict[str, Any], values: ValueFactory, wanted: Any
    ) -> ToolCall | None:
        """A search for the item by its title whose result states `wanted` (its id, or the value asked)."""
        assert role.sandbox is not None
        params = Planner.lookup_params(role.tool, role.sandbox, state, title, item, values)
        if params is None:
            return None
        return self._call(role, state, params, wanted)

    @staticmethod
    def _call(role: ToolRole, state: State, params: dict[str, Any], wanted: Any) -> ToolCall | None:
        """The call, if it succeeds on the state and what it returns states `wanted`."""
        assert role.sandbox is not None
        try:
            observation = role.sandbox.run(copy.deepcopy(state), role.tool.name, params)
        except ToolError:
            return None
        if not states(observation, wanted):
            return None
        return ToolCall(tool_server=role.tool.server, tool_name=role.tool.name, parameters=params)

    # -- one question -------------------------------------------------------------------------------------

    def _question(self, actions: int, streams: Streams, values: ValueFactory, used: set[tuple[str, str]]) -> Question:
        rng = streams.params
        sandboxes = list(self.ctx.sandboxes.values())
        rng.shuffle(sandboxes)
        for sandbox in sandboxes:
            state = sandbox.fresh()
            names = sorted(name for name, items in state.items() if isinstance(items, dict) and items)
            rng.shuffle(names)
            for collection in names:
                keys = [k for k in sorted(state[collection]) if (collection, k) not in used]
                rng.shuffle(keys)
                for key in keys[:6]:
                    question = self._about(sandbox, state, collection, key, actions, streams, values)
                    if question is not None:
                        used.add((collection, key))
                        return question
        raise PlanFailed(f"no item can be asked about in {actions} read(s)")

    def _about(
        self,
        sandbox: Sandbox,
        state: State,
        collection: str,
        key: str,
        actions: int,
        streams: Streams,
        values: ValueFactory,
    ) -> Question | None:
        item = state[collection][key]
        if not isinstance(item, dict):
            return None
        title = unique_title(state[collection], key)
        fields = _askable(item, title)
        if title is not None and actions > 1:
            fields.append("id")  # found by its title: its id is worth asking for too
        if not fields:
            return None
        field = streams.params.choice(fields)
        value = item[field]
        getters = self._getters(sandbox, state, collection)
        calls = self._reads(sandbox, state, key, title, item, value, actions, getters, values)
        if calls is None:
            return None
        noun = singular(collection).replace("_", " ")
        asked = "id" if field == "id" else label(field)
        if title is not None and (actions > 1 or calls[0].tool_name not in {g.tool.name for g in getters}):
            sentence = streams.phrasing.choice(BY_TITLE_TEMPLATES).format(label=asked, noun=noun, title=title)
            subject = f'the {noun} "{title}"'
        else:
            sentence = streams.phrasing.choice(BY_ID_TEMPLATES).format(label=asked, noun=noun, key=key)
            subject = f"{noun} {key}"
        if states(sentence, value):
            return None  # the question would give the answer away
        return Question(
            server=sandbox.server_name,
            collection=collection,
            key=key,
            field=field,
            value=value,
            actions=tuple(calls),
            sentence=sentence,
            answer=f"The {asked} of {subject} is {_render(value)}.",
            short=f"{asked.capitalize()} of {subject}",
        )

    def _reads(
        self,
        sandbox: Sandbox,
        state: State,
        key: str,
        title: str | None,
        item: dict[str, Any],
        value: Any,
        actions: int,
        getters: list[ToolRole],
        values: ValueFactory,
    ) -> list[ToolCall] | None:
        """`actions` reads ending in one that states `value`: a find by title then a get by id (2), or either
        alone (1); None when the tools cannot do it."""
        finders = [r for r in self.readers if r.sandbox is sandbox and r not in getters]
        got = next((c for g in getters if (c := self._get(g, state, key, value)) is not None), None)
        if actions == 2:
            if title is None or got is None:
                return None
            found = next(
                (c for f in finders if (c := self._find(f, state, title, item, values, key)) is not None), None
            )
            return [found, got] if found is not None else None
        if title is not None:
            for finder in finders:
                found = self._find(finder, state, title, item, values, value)
                if found is not None:
                    return [found]
        return [got] if got is not None else None

    # -- a task ------------------------------------------------------------------------------------------

    def _shape(self, total: int, rng: random.Random) -> list[int]:
        """Reads per question: twos (find, then read) where they fit, else ones."""
        sizes: list[int] = []
        remaining = total
        while remaining > 0:
            size = 2 if remaining >= 2 and rng.random() < 0.7 else 1
            sizes.append(size)
            remaining -= size
        return sizes

    def plan(self, index: int, difficulty: str, attempt: int, workflow: WorkflowPlan | None = None) -> TaskDraft:
        streams = self.planner.streams(index, attempt)
        values = ValueFactory(
            params=streams.params, entities=streams.entities, people=self.ctx.people, used_titles=None
        )
        total = streams.plan.choice(ACTIONS_BY_DIFFICULTY[difficulty])
        used: set[tuple[str, str]] = set()
        questions: list[Question] = []
        for size in self._shape(total, streams.plan):
            try:
                questions.append(self._question(size, streams, values, used))
            except PlanFailed:
                if size != 2:
                    raise
                # No find-then-read on this toolset: two single reads make the same number of actions.
                questions += [self._question(1, streams, values, used), self._question(1, streams, values, used)]
        return self._draft(index, difficulty, questions, streams)

    def _draft(self, index: int, difficulty: str, questions: list[Question], streams: Streams) -> TaskDraft:
        connectors = streams.phrasing.choice(CONNECTORS)
        closing = streams.phrasing.choice(CLOSINGS)
        sentences = []
        for position, question in enumerate(questions):
            text = question.sentence
            if position > 0:
                last = position == len(questions) - 1 and len(questions) > 2
                connector = connectors[-1] if last else connectors[min(position - 1, 1)]
                text = f"{connector} {text[:1].lower() + text[1:]}"
            sentences.append(text)
        actions = [call for q in questions for call in q.actions]
        shorts = [q.short for q in questions]
        servers = sorted({a.tool_server for a in actions})
        answers = [
            {"value": q.value, "describe": f"the {label(q.field)} of {q.collection}/{q.key} ({_render(q.value)})"}
            for q in questions
        ]
        return TaskDraft(
            task_id=f"{self.ctx.task_prefix}_{index + 1:03d}",
            name="; ".join(shorts)[:120],
            difficulty=difficulty,
            category=self.planner.category_for({"read"}, index),
            instruction=re.sub(r"\s+", " ", " ".join([*sentences, closing])),
            actions=actions,
            servers=servers,
            summary=f"{difficulty.capitalize()} question ({len(actions)} read(s)): " + "; ".join(shorts),
            reference_answer=" ".join(q.answer for q in questions),
            seed_names={
                s: self.ctx.sandboxes[s].seed_name
                for s in servers
                if s in self.ctx.sandboxes and self.ctx.sandboxes[s].seed is not None
            },
            answers=answers,
        )
