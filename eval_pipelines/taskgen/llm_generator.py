"""The LLM-driven generator: any OpenAI-compatible model writes the skills document, then tasks, instructions,
rubrics and verifiers, one prompt per step (tasks in batches, the rest per task).

The model is grounded in what the schema-driven machinery knows: the tool schemas, the world the tasks start
from, example calls known to work, and, per task, the exact state change its reference actions make (found by
replaying them in the sandbox). Every reply is parsed robustly; an item whose reply is unusable (broken JSON,
an invalid or failing tool call, an instruction that leaves out a checked value, a verifier that does not
import) ends as a FAILED item, counted per step in `filter_summary["failed_items"]` with its reason, and its task
is dropped when it cannot go on without it (a rubric falls back to the derived one). The job fails with the
reason when no usable task remains. Auth, connection and unknown-model errors fail the job at once.
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from jsonschema import Draft202012Validator
from pydantic import ValidationError

from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.errors import LLMAuthError, LLMConnectionError, LLMError, LLMInvalidModelError
from eval_pipelines.llm.types import ChatMessage, ChatRequest, split_wire_tool_name
from eval_pipelines.schemas.scenarios import Rubric, ScoringLevel
from eval_pipelines.schemas.taskgen import TaskGenRequest, TaskGenResults
from eval_pipelines.schemas.tools import ToolCall
from eval_pipelines.taskgen import prompts
from eval_pipelines.taskgen.assembly import gate_and_assemble
from eval_pipelines.taskgen.context import GenerationContext, build_context, slug
from eval_pipelines.taskgen.drafts import TaskDraft, default_rubric
from eval_pipelines.taskgen.errors import TaskGenFailed, TaskGenRequestError
from eval_pipelines.taskgen.expectations import assumed_added, checks_count, derive, expected_values, human_lines
from eval_pipelines.taskgen.gates import QualityGates
from eval_pipelines.taskgen.parsing import ReplyFormatError, extract_code, extract_json, extract_text
from eval_pipelines.taskgen.planner import Planner
from eval_pipelines.taskgen.progress import INSTRUCTIONS, RUBRICS, SKILLS, TASKS, VERIFIERS, Progress
from eval_pipelines.taskgen.request import DIFFICULTIES
from eval_pipelines.taskgen.schema_generator import DiversityFilter, base_summary
from eval_pipelines.taskgen.skills import render_skills
from eval_pipelines.toolservers.base import ToolError

DEFAULT_TEMPERATURE = 0.4
DEFAULT_MAX_TOKENS = 4096
DEFAULT_BATCH_SIZE = 8
DEFAULT_CONCURRENCY = 4
#: extra prompts per step for items whose reply was unusable (the retry says what was wrong).
DEFAULT_RETRIES = 1
ACTIONS_ALLOWED: dict[str, tuple[int, ...]] = {"easy": (1,), "medium": (2,), "hard": (3, 4)}
MAX_INSTRUCTION_CHARS = 4000
FATAL_ERRORS = (LLMAuthError, LLMConnectionError, LLMInvalidModelError)

T = TypeVar("T")


class ItemRejected(ValueError):
    """One generated item is unusable; the message is the reason recorded in filter_summary."""


class FailedItems:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.details: list[dict[str, Any]] = []

    def add(self, step: str, item: str, reason: str) -> None:
        self.counts[step] += 1
        self.details.append({"step": step, "item": item, "reason": reason[:500]})


class LLMTaskGenerator:
    """`async generate(request, progress) -> TaskGenResults` over a ChatClient (the TaskGenerator protocol)."""

    name = "llm"

    def __init__(
        self,
        client: ChatClient,
        default_model: str,
        *,
        gates: QualityGates | None = None,
        temperature: float = DEFAULT_TEMPERATURE,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        concurrency: int = DEFAULT_CONCURRENCY,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        if batch_size < 1 or concurrency < 1 or retries < 0:
            raise ValueError("batch_size and concurrency must be at least 1, retries at least 0")
        self.client = client
        self.default_model = default_model
        self.gates = gates or QualityGates()
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.retries = retries

    async def generate(self, request: TaskGenRequest, progress: Callable[[str], None]) -> TaskGenResults:
        return await _Run(self, request, Progress(progress)).execute()


class _Run:
    """One job: the state shared by its steps (`ctx` and what derives from it are set by `execute`)."""

    ctx: GenerationContext
    planner: Planner
    examples: list[dict[str, Any]]
    world: dict[str, Any]

    def __init__(self, owner: LLMTaskGenerator, request: TaskGenRequest, progress: Progress) -> None:
        self.owner = owner
        self.request = request
        self.progress = progress
        self.model = request.model or owner.default_model
        self.failed = FailedItems()
        #: tasks dropped before the gates, with the reason (listed in filter_summary["dropped_tasks"]).
        self.dropped: list[dict[str, str]] = []
        self.semaphore = asyncio.Semaphore(owner.concurrency)

    # -- the model --------------------------------------------------------------------------------------

    async def ask(self, prompt: str, feedback: str | None = None) -> str:
        messages = [ChatMessage.system(prompts.SYSTEM), ChatMessage.user(prompt)]
        if feedback:
            messages.append(ChatMessage.user(f"Your previous reply could not be used: {feedback}. Try again."))
        request = ChatRequest(
            model=self.model, messages=messages, temperature=self.owner.temperature, max_tokens=self.owner.max_tokens
        )
        async with self.semaphore:
            try:
                completion = await self.owner.client.complete(request)
            except FATAL_ERRORS as exc:
                raise TaskGenFailed(f"the model endpoint failed: {exc}") from exc
        return completion.text

    async def ask_until(self, prompt: str, parse: Callable[[str], T]) -> T:
        """Ask, parse; on an unusable reply ask again (with the reason) up to `retries` times."""
        feedback: str | None = None
        for attempt in range(self.owner.retries + 1):
            try:
                reply = await self.ask(prompt, feedback)
            except LLMError as exc:
                if attempt == self.owner.retries:
                    raise ItemRejected(f"the model call failed: {exc}") from exc
                feedback = None
                continue
            try:
                return parse(reply)
            except (ItemRejected, ReplyFormatError) as exc:
                if attempt == self.owner.retries:
                    raise ItemRejected(str(exc)) from exc
                feedback = str(exc)
        raise ItemRejected("no usable reply")  # pragma: no cover - the loop always returns or raises

    async def each(self, items: Sequence[T], step: int, work: Callable[[T], Awaitable[None]]) -> None:
        done = 0
        self.progress(step, 0, len(items))

        async def one(item: T) -> None:
            nonlocal done
            await work(item)
            done += 1
            self.progress(step, done, len(items))

        await asyncio.gather(*(one(item) for item in items))

    # -- the steps --------------------------------------------------------------------------------------

    async def execute(self) -> TaskGenResults:
        self.progress(SKILLS)
        try:
            ctx = build_context(self.request)
        except TaskGenRequestError as exc:
            raise TaskGenFailed(str(exc)) from exc
        self.ctx = ctx
        self.planner = Planner(ctx)
        ops = {(r.tool.server, r.tool.name): r.op for r in self.planner.roles}
        self.examples = self.planner.example_calls()
        self.world = self.planner.world_view()
        skills_md = await self.skills(render_skills(ctx, ops))
        drafts = await self.tasks(skills_md)
        if not drafts:
            raise TaskGenFailed(self._nothing("the model produced no usable task"))
        drafts = await self.instructions(drafts)
        if not drafts:
            raise TaskGenFailed(self._nothing("no task got a usable instruction"))
        await self.rubrics(drafts)
        await self.verifiers(drafts)
        summary = base_summary(ctx, "llm", self.planner)
        summary["model"] = self.model
        summary["failed_items"] = {s: self.failed.counts.get(s, 0) for s in self._steps()}
        summary["failed_item_details"] = self.failed.details
        summary["dropped_tasks"] = self.dropped
        return await gate_and_assemble(
            ctx, drafts, gates=self.owner.gates, progress=self.progress, skills_md=skills_md, summary=summary
        )

    @staticmethod
    def _steps() -> tuple[str, ...]:
        return ("skills", "tasks", "instructions", "rubrics", "verifiers")

    def _nothing(self, headline: str) -> str:
        reasons = "; ".join(f"{d['step']} {d['item']}: {d['reason']}" for d in self.failed.details[:4])
        return headline + (f" ({reasons})" if reasons else "")

    def _shared_context(self) -> dict[str, Any]:
        resolved = self.ctx.resolved
        context: dict[str, Any] = {
            "agent": resolved.agent.model_dump(),
            "scenario": resolved.scenario.model_dump(),
            "workspace": resolved.workspace.model_dump(),
        }
        if resolved.request.description:
            context["what_to_generate"] = resolved.request.description
        return context

    async def skills(self, fallback: str) -> str:
        context = {
            **self._shared_context(),
            "tools": [t.as_definition() | {"tool_server": t.server} for t in self.ctx.toolset.tools],
            "workflows": [w.model_dump() for w in self.ctx.resolved.workflows],
            "people": [p.model_dump() for p in self.ctx.npc_profiles],
        }

        def parse(reply: str) -> str:
            text = extract_text(reply)
            if len(text) < 40:
                raise ItemRejected("the skills document is empty or too short")
            return text + ("\n" if not text.endswith("\n") else "")

        try:
            return await self.ask_until(prompts.skills_prompt(context), parse)
        except ItemRejected as exc:
            self.failed.add("skills", "skills.md", f"{exc}; the schema-derived skills document is used")
            return fallback

    async def tasks(self, skills_md: str) -> list[TaskDraft]:
        resolved = self.ctx.resolved
        total = resolved.num_tasks
        drafts: list[TaskDraft] = []
        seen: set[str] = set()
        self.progress(TASKS, 0, total)
        for difficulty in DIFFICULTIES:
            wanted = resolved.counts[difficulty]
            accepted = 0
            rounds = 0
            while accepted < wanted and rounds < max(3, (wanted // self.owner.batch_size + 1) * 2):
                rounds += 1
                count = min(self.owner.batch_size, wanted - accepted)
                context = {
                    **self._shared_context(),
                    "difficulty": difficulty,
                    "count": count,
                    "round": rounds,
                    "actions_per_task": list(ACTIONS_ALLOWED[difficulty]),
                    "tools": [t.as_definition() | {"tool_server": t.server} for t in self.ctx.toolset.tools],
                    "world": self.world,
                    "example_calls": self.examples,
                    "categories": [c.model_dump() for c in resolved.categories],
                    "workflows": [w.model_dump() for w in resolved.workflows],
                    "people": [p.model_dump() for p in self.ctx.npc_profiles],
                    "avoid": [d.name for d in drafts],
                    "skills_md": skills_md[:4000],
                }
                try:
                    items = await self.ask_until(prompts.tasks_prompt(context), _task_items)
                except ItemRejected as exc:
                    for position in range(count):
                        self.failed.add("tasks", f"{difficulty} batch {rounds} item {position + 1}", str(exc))
                    continue
                for position, item in enumerate(items[:count]):
                    label = f"{difficulty} batch {rounds} item {position + 1}"
                    try:
                        draft = self._draft(item, difficulty, len(drafts), seen)
                    except ItemRejected as exc:
                        self.failed.add("tasks", label, str(exc))
                        continue
                    drafts.append(draft)
                    accepted += 1
                    self.progress(TASKS, len(drafts), total)
        return drafts

    def _draft(self, item: Any, difficulty: str, index: int, seen: set[str]) -> TaskDraft:
        if not isinstance(item, dict):
            raise ItemRejected("a task must be a JSON object")
        raw_actions = item.get("reference_actions")
        if not isinstance(raw_actions, list) or not raw_actions:
            raise ItemRejected("the task has no reference_actions")
        actions = [self._action(position, raw) for position, raw in enumerate(raw_actions, start=1)]
        if len(actions) not in ACTIONS_ALLOWED[difficulty]:
            allowed = " or ".join(map(str, ACTIONS_ALLOWED[difficulty]))
            raise ItemRejected(f"a {difficulty} task needs {allowed} action(s), this one has {len(actions)}")
        tools = [self.ctx.toolset.tool(a.tool_server, a.tool_name) for a in actions]
        if not any(t is not None and t.mutates for t in tools):
            raise ItemRejected("no action changes state, so nothing can be verified")
        signature = repr([a.model_dump() for a in actions])
        if signature in seen:
            raise ItemRejected("it repeats the reference actions of an earlier task")
        expect = self._replay(actions)
        seen.add(signature)
        servers = sorted({a.tool_server for a in actions})
        name = str(item.get("name") or "").strip()[:120] or f"Task {index + 1}"
        ops = {t.kind for t in tools if t is not None and t.mutates}
        category = str(item.get("category") or "").strip()
        known = [c.id for c in self.ctx.resolved.categories]
        if (known and category not in known) or not category:
            category = self.planner.category_for(ops, index)
        task_id = f"{self.ctx.task_prefix}_{index + 1:03d}"
        emails = " ".join(str(a.parameters) for a in actions)
        return TaskDraft(
            task_id=task_id,
            name=name,
            difficulty=difficulty,
            category=slug(category) or "general",
            instruction="",
            actions=actions,
            servers=servers,
            expect=expect,
            summary=str(item.get("summary") or name).strip()[:500],
            reference_answer=f"Done: {name}.",
            npc_profiles=[p for p in self.ctx.npc_profiles if p.email in emails],
            seed_names={
                s: self.ctx.sandboxes[s].seed_name
                for s in servers
                if s in self.ctx.sandboxes and self.ctx.sandboxes[s].seed is not None
            },
        )

    def _action(self, position: int, raw: Any) -> ToolCall:
        if not isinstance(raw, dict):
            raise ItemRejected(f"action {position} is not an object")
        server, name = raw.get("tool_server"), raw.get("tool_name") or raw.get("name")
        if isinstance(name, str) and (split := split_wire_tool_name(name)) is not None and not server:
            server, name = split
        if not isinstance(name, str):
            raise ItemRejected(f"action {position} names no tool")
        if not isinstance(server, str) or not server:
            owners = [s for s, tools in self.ctx.toolset.servers.items() if name in tools.by_name]
            if len(owners) != 1:
                raise ItemRejected(f"action {position}: tool {name!r} needs its tool_server")
            server = owners[0]
        tool = self.ctx.toolset.tool(server, name)
        if tool is None:
            raise ItemRejected(f"action {position}: unknown tool {server}.{name}")
        params = raw.get("parameters", raw.get("arguments", {}))
        if not isinstance(params, dict):
            raise ItemRejected(f"action {position} ({name}): parameters must be an object")
        errors = sorted(Draft202012Validator(tool.schema).iter_errors(params), key=lambda e: e.message)
        if errors:
            raise ItemRejected(f"action {position} ({name}): invalid parameters: {errors[0].message}")
        return ToolCall(tool_server=server, tool_name=name, parameters=params)

    def _replay(self, actions: list[ToolCall]) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Run the actions in the sandbox: each must succeed, and together they must change something."""
        world = {name: sandbox.fresh() for name, sandbox in self.ctx.sandboxes.items()}
        states = copy.deepcopy(world)
        for position, action in enumerate(actions, start=1):
            sandbox = self.ctx.sandboxes.get(action.tool_server)
            if sandbox is None:
                continue
            try:
                sandbox.run(states[action.tool_server], action.tool_name, dict(action.parameters))
            except ToolError as exc:
                raise ItemRejected(f"action {position} ({action.tool_name}) fails: {exc}") from None
        expect: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for server in sorted({a.tool_server for a in actions}):
            params = [a.parameters for a in actions if a.tool_server == server]
            if server in world:
                expect[server] = derive(world[server], states[server], params)
                continue
            added = []
            for action in actions:
                tool = self.ctx.toolset.tool(action.tool_server, action.tool_name)
                if action.tool_server == server and tool is not None and tool.mutates:
                    added.append(assumed_added("_".join(tool.object_words) + "s", action.parameters))
            expect[server] = {"added": added, "changed": [], "removed": [], "kept": []}
        if sum(checks_count(e) for e in expect.values()) == 0:
            raise ItemRejected("the actions change nothing a verifier can check")
        return expect

    async def instructions(self, drafts: list[TaskDraft]) -> list[TaskDraft]:
        diversity = DiversityFilter(max_similar=1.0)
        kept: list[TaskDraft] = []
        lock = asyncio.Lock()

        async def write(draft: TaskDraft) -> None:
            must_state = [v for v in expected_values(draft.expect) if isinstance(v, (str, int, float))]
            context = {
                **self._shared_context(),
                "task": self._task_view(draft),
                "expected_changes": human_lines(draft.expect),
                "must_state": must_state,
            }

            def parse(reply: str) -> str:
                text = extract_text(reply)
                if not text:
                    raise ItemRejected("the instruction is empty")
                if len(text) > MAX_INSTRUCTION_CHARS:
                    raise ItemRejected(f"the instruction is longer than {MAX_INSTRUCTION_CHARS} characters")
                lowered = " ".join(text.split()).lower()
                missing = [str(v) for v in must_state if " ".join(str(v).split()).lower() not in lowered]
                if missing:
                    raise ItemRejected(f"the instruction does not state {', '.join(map(repr, missing[:3]))}")
                if diversity.rejects(text):
                    raise ItemRejected("the instruction repeats another task's instruction")
                return text

            try:
                draft.instruction = await self.ask_until(prompts.instruction_prompt(context), parse)
            except ItemRejected as exc:
                self.failed.add("instructions", draft.task_id, f"{exc}; the task is dropped")
                self.dropped.append({"task_id": draft.task_id, "reason": f"no usable instruction: {exc}"})
                return
            async with lock:
                if diversity.rejects(draft.instruction):
                    self.failed.add("instructions", draft.task_id, "duplicate instruction; the task is dropped")
                    self.dropped.append({"task_id": draft.task_id, "reason": "its instruction repeats another"})
                    return
                diversity.accept(draft.instruction)
                kept.append(draft)

        await self.each(drafts, INSTRUCTIONS, write)
        order = {d.task_id: i for i, d in enumerate(drafts)}
        return sorted(kept, key=lambda d: order[d.task_id])

    async def rubrics(self, drafts: list[TaskDraft]) -> None:
        scenario = self.ctx.resolved.scenario

        async def write(draft: TaskDraft) -> None:
            context = {
                **self._shared_context(),
                "task": self._task_view(draft),
                "expected_changes": human_lines(draft.expect),
            }

            def parse(reply: str) -> Rubric:
                data = extract_json(reply)
                if not isinstance(data, dict):
                    raise ItemRejected("the rubric must be a JSON object")
                try:
                    rubric = Rubric.model_validate({**data, "task_id": draft.task_id})
                except ValidationError as exc:
                    first = exc.errors()[0]
                    raise ItemRejected(f"rubric field {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
                if not rubric.success_criteria:
                    raise ItemRejected("the rubric has no success criteria")
                if not rubric.scoring:
                    rubric.scoring = [ScoringLevel(label="pass", description="Every criterion holds.")]
                return rubric

            try:
                draft.rubric = await self.ask_until(prompts.rubric_prompt(context), parse)
            except ItemRejected as exc:
                self.failed.add("rubrics", draft.task_id, f"{exc}; the derived rubric is used")
                draft.rubric = default_rubric(draft, policies=scenario.policies, conventions=scenario.conventions)

        await self.each(drafts, RUBRICS, write)

    async def verifiers(self, drafts: list[TaskDraft]) -> None:
        async def write(draft: TaskDraft) -> None:
            touched = self._touched_items(draft)
            context = {
                "task_id": draft.task_id,
                "instruction": draft.instruction,
                "reference_actions": [a.model_dump() for a in draft.actions],
                "expected_changes": draft.expect,
                "initial_items": touched,
                "state_shape": prompts.STATE_SHAPE,
            }

            def parse(reply: str) -> str:
                code = extract_code(reply)
                if "def verify" not in code:
                    raise ItemRejected("the code defines no verify(run_artifacts)")
                return code

            try:
                code = await self.ask_until(prompts.verifier_prompt(context), parse)
            except ItemRejected as exc:
                self.failed.add("verifiers", draft.task_id, f"{exc}; the task has no verifier")
                return
            draft.verifiers = {f"{draft.task_id}_check": code}

        await self.each(drafts, VERIFIERS, write)

    def _touched_items(self, draft: TaskDraft) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for server, rules in draft.expect.items():
            sandbox = self.ctx.sandboxes.get(server)
            if sandbox is None:
                continue
            for rule in [*rules.get("changed", []), *rules.get("removed", [])]:
                item = sandbox.items(sandbox.base_state, rule["collection"]).get(rule["key"])
                found.setdefault(server, {}).setdefault(rule["collection"], {})[rule["key"]] = item
        return found

    @staticmethod
    def _task_view(draft: TaskDraft) -> dict[str, Any]:
        return {
            "task_id": draft.task_id,
            "name": draft.name,
            "difficulty": draft.difficulty,
            "summary": draft.summary,
            "instruction": draft.instruction or None,
            "reference_actions": [a.model_dump() for a in draft.actions],
        }


def _task_items(reply: str) -> list[Any]:
    data = extract_json(reply)
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):
        items = data["tasks"]
    elif isinstance(data, list):
        items = data
    elif isinstance(data, dict) and "reference_actions" in data:
        items = [data]
    else:
        raise ReplyFormatError('expected {"tasks": [...]}')
    if not items:
        raise ReplyFormatError("the task list is empty")
    return items
