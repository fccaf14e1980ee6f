"""The deterministic, schema-driven generator: offline, and the fallback when no model is configured.

From the tool definitions alone it plans tasks (see `planner`), phrases their instructions, derives rubrics
and state-checking verifiers, and sends every verifier through the quality gates. The same request (including
`diversity.seed`) always gives the same results.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from eval_pipelines.schemas.taskgen import TaskGenRequest, TaskGenResults
from eval_pipelines.taskgen.assembly import gate_and_assemble
from eval_pipelines.taskgen.context import GenerationContext, build_context
from eval_pipelines.taskgen.drafts import TaskDraft, default_rubric, render_verifier
from eval_pipelines.taskgen.errors import TaskGenFailed, TaskGenRequestError
from eval_pipelines.taskgen.gates import QualityGates
from eval_pipelines.taskgen.planner import ACTIONS_BY_DIFFICULTY, PlanFailed, Planner, WorkflowPlan
from eval_pipelines.taskgen.progress import INSTRUCTIONS, RUBRICS, SKILLS, TASKS, VERIFIERS, Progress
from eval_pipelines.taskgen.questions import QuestionPlanner
from eval_pipelines.taskgen.request import DIFFICULTIES
from eval_pipelines.taskgen.skills import render_skills

MAX_ATTEMPTS = 12
#: `(slot, difficulty, attempt, workflow) -> draft`, or PlanFailed: `Planner.plan`, `QuestionPlanner.plan`.
PlanFn = Callable[[int, str, int, WorkflowPlan | None], TaskDraft]
_WORD = re.compile(r"[a-z0-9@._:-]+")


def similarity(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


class DiversityFilter:
    """Rejects exact duplicates and instructions too close (word-set Jaccard) to an accepted one."""

    def __init__(self, max_similar: float) -> None:
        self.max_similar = max_similar
        self._accepted: list[set[str]] = []
        self._texts: set[str] = set()

    @staticmethod
    def words(text: str) -> set[str]:
        return set(_WORD.findall(text.lower()))

    def rejects(self, text: str) -> bool:
        normalised = " ".join(text.split())
        if normalised in self._texts:
            return True
        words = self.words(text)
        return any(similarity(words, other) > self.max_similar for other in self._accepted)

    def accept(self, text: str) -> None:
        self._texts.add(" ".join(text.split()))
        self._accepted.append(self.words(text))


def plan_drafts(
    ctx: GenerationContext, planner: Planner, on_task: Callable[[int], None] | None = None
) -> tuple[list[TaskDraft], dict[str, Any]]:
    """Draft `counts[difficulty]` tasks per difficulty; returns the drafts and what could not be drafted. A
    toolset with nothing to change gets questions about its data (`questions`)."""
    resolved = ctx.resolved
    diversity = DiversityFilter(resolved.diversity.max_similar)
    drafts: list[TaskDraft] = []
    skipped: list[dict[str, Any]] = []
    too_similar = 0
    slot = 0
    plan: PlanFn = planner.plan
    workflow_plans = planner.workflow_plans
    if not planner.ops_available() and any(role.op == "read" for role in planner.roles):
        plan, workflow_plans = QuestionPlanner(planner).plan, []
    for difficulty in DIFFICULTIES:
        sizes = set(ACTIONS_BY_DIFFICULTY[difficulty])
        workflows = [w for w in workflow_plans if w.actions in sizes]
        for _ in range(resolved.counts[difficulty]):
            draft, reason, similar = _one(plan, slot, difficulty, workflows, diversity)
            too_similar += similar
            if draft is None:
                skipped.append({"slot": slot + 1, "difficulty": difficulty, "reason": reason})
            else:
                diversity.accept(draft.instruction)
                drafts.append(draft)
            slot += 1
            if on_task is not None:
                on_task(slot)
    return drafts, {"skipped": skipped, "too_similar": too_similar}


def _one(
    plan: PlanFn, slot: int, difficulty: str, workflows: list[WorkflowPlan], diversity: DiversityFilter
) -> tuple[TaskDraft | None, str, int]:
    reason = "no plan found"
    similar = 0
    for attempt in range(MAX_ATTEMPTS):
        # Every other task follows a workflow of the right length; a workflow that keeps failing is let go.
        workflow = workflows[(slot // 2) % len(workflows)] if workflows and slot % 2 == 0 and attempt < 4 else None
        try:
            draft = plan(slot, difficulty, attempt, workflow)
        except PlanFailed as exc:
            reason = str(exc)
            continue
        if diversity.rejects(draft.instruction):
            similar += 1
            reason = "every candidate was a near-duplicate of an earlier task (diversity.max_similar)"
            continue
        return draft, "", similar
    return None, reason, similar


class SchemaTaskGenerator:
    """`async generate(request, progress) -> TaskGenResults` (the service's TaskGenerator protocol)."""

    name = "schema"

    def __init__(self, gates: QualityGates | None = None) -> None:
        self.gates = gates or QualityGates()

    async def generate(self, request: TaskGenRequest, progress: Callable[[str], None]) -> TaskGenResults:
        report = Progress(progress)
        report(SKILLS)
        try:
            ctx = build_context(request)
        except TaskGenRequestError as exc:
            raise TaskGenFailed(str(exc)) from exc
        planner = Planner(ctx)
        ops = {(r.tool.server, r.tool.name): r.op for r in planner.roles}
        skills_md = render_skills(ctx, ops)
        total = ctx.resolved.num_tasks
        report(TASKS, 0, total)
        loop = asyncio.get_running_loop()
        # Planning 200 tasks takes seconds of CPU: off the event loop (the service keeps answering), with its
        # progress handed back to the loop thread, in order.

        def planned(done: int) -> None:
            loop.call_soon_threadsafe(report, TASKS, done, total)

        drafts, planning = await asyncio.to_thread(plan_drafts, ctx, planner, planned)
        # Instructions are phrased while planning (they must state exactly the planned values).
        report(INSTRUCTIONS, len(drafts), len(drafts))
        for done, draft in enumerate(drafts, start=1):
            draft.rubric = default_rubric(
                draft, policies=ctx.resolved.scenario.policies, conventions=ctx.resolved.scenario.conventions
            )
            report(RUBRICS, done, len(drafts))
        for done, draft in enumerate(drafts, start=1):
            draft.verifiers = {draft.verifier_module: render_verifier(draft)}
            report(VERIFIERS, done, len(drafts))
        summary = base_summary(ctx, "schema", planner)
        summary.update(planning)
        return await gate_and_assemble(
            ctx, drafts, gates=self.gates, progress=report, skills_md=skills_md, summary=summary
        )


def base_summary(ctx: GenerationContext, generator: str, planner: Planner) -> dict[str, Any]:
    resolved = ctx.resolved
    summary: dict[str, Any] = {
        "generator": generator,
        "requested": {"num_tasks": resolved.num_tasks, "complexity": dict(resolved.counts)},
        "diversity": resolved.diversity.model_dump(),
        "servers": {
            name: ("built-in" if server.builtin is not None else "simulated from the toolset's schemas")
            for name, server in ctx.toolset.servers.items()
        },
    }
    notes = ctx.notes() + planner.notes
    if notes:
        summary["notes"] = notes
    if planner.unmapped_workflows:
        summary["workflows_unmapped"] = planner.unmapped_workflows
    return summary
