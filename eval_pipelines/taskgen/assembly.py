"""Gate the drafts and write the results both generators return.

Filtering (documented in `filter_summary`):

- a verifier that fails a gate is returned as `<module>.FAILED.py` and listed under `failed_verifiers`
  with the gate and the reason;
- a task left with no passing verifier is DROPPED: it is not in `tasks`/`instructions`/`rubrics`, and it is
  listed under `dropped_tasks` with the reason;
- verifiers of tasks on a server nothing serves (neither built in nor simulated) are kept and listed as
  `ungated`;
- items the LLM-driven generator could not use are counted under `failed_items` (per step) with details;
- with `filter: false` in the request, a task no verifier passed is kept with all its verifiers, and listed
  under `unfiltered_tasks`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from eval_pipelines.schemas.taskgen import NPC_PROFILES_FILENAME, GeneratedFile, TaskGenResults
from eval_pipelines.taskgen.context import GenerationContext
from eval_pipelines.taskgen.drafts import FAILED_SUFFIX, TaskDraft, rubric_markdown, task_file
from eval_pipelines.taskgen.errors import TaskGenFailed
from eval_pipelines.taskgen.gates import GateReport, QualityGates
from eval_pipelines.taskgen.progress import GATES, Progress
from eval_pipelines.taskgen.request import DIFFICULTIES
from eval_pipelines.taskgen.schema_server import simulated_server

#: Placeholder job id; the service fills in the real one.
PENDING_JOB_ID = ""


async def gate_and_assemble(
    ctx: GenerationContext,
    drafts: Sequence[TaskDraft],
    *,
    gates: QualityGates,
    progress: Progress,
    skills_md: str,
    summary: dict[str, Any],
) -> TaskGenResults:
    if not drafts:
        raise TaskGenFailed(_nothing_usable(summary, "no task could be generated"))
    progress(GATES, 0, len(drafts))
    total = len(drafts)
    # Drafts the gates need not replay (ungated, or no verifier survived the static check) count as done.
    report = await gates.run(
        drafts, ctx.seeds(), ctx.server_classes, lambda d, t: progress(GATES, d + total - t, total)
    )
    progress(GATES, total, total)
    seeds = ctx.seed_files()
    simulated = {name: server for name, cls in ctx.server_classes.items() if (server := simulated_server(cls))}
    tasks, instructions, rubrics, verifiers = [], [], [], []
    failed: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = list(summary.pop("dropped_tasks", []))
    ungated: list[str] = []
    kept: list[TaskDraft] = []
    unfiltered: list[str] = []
    for draft in drafts:
        passing = report.passing(draft)
        if not passing and not ctx.request.filter and draft.verifiers:
            # `filter: false` keeps what the gates would drop: every verifier is listed, and the task is named
            # in filter_summary["unfiltered_tasks"] so nobody mistakes it for a gated one.
            passing = list(draft.verifiers)
            unfiltered.append(draft.task_id)
        for module, source in draft.verifiers.items():
            result = report.results.get(module)
            if (result is not None and result.passed) or draft.task_id in unfiltered:
                verifiers.append(GeneratedFile(filename=f"{module}.py", content=source))
                if result is not None and not result.gated:
                    ungated.append(module)
                continue
            verifiers.append(GeneratedFile(filename=f"{module}{FAILED_SUFFIX}", content=source))
            failed.append(
                {
                    "task_id": draft.task_id,
                    "filename": f"{module}{FAILED_SUFFIX}",
                    "gate": result.gate if result else "unknown",
                    "reason": result.reason if result else "not gated",
                }
            )
        if not passing:
            dropped.append({"task_id": draft.task_id, "reason": _drop_reason(draft, report)})
            continue
        kept.append(draft)
        tasks.append(task_file(draft, seeds, passing, ctx.task_prefix, simulated))
        instructions.append(GeneratedFile(filename=f"{draft.task_id}.md", content=draft.instruction + "\n"))
        if draft.rubric is not None:
            rubrics.append(GeneratedFile(filename=f"{draft.task_id}.md", content=rubric_markdown(draft.rubric)))
    produced = Counter(d.difficulty for d in kept)
    summary.update(
        {
            "produced": {"num_tasks": len(kept), "complexity": {d: produced.get(d, 0) for d in DIFFICULTIES}},
            "gated": report.ungated_reason is None,
            "verifiers": {
                "total": sum(len(d.verifiers) for d in drafts),
                "passed": sum(1 for r in report.results.values() if r.passed and r.gated),
                "failed": len(failed),
                "ungated": len(ungated),
            },
            "failed_verifiers": failed,
            "dropped_tasks": dropped,
        }
    )
    if ungated:
        summary["ungated"] = {"reason": report.ungated_reason, "verifiers": ungated}
    if unfiltered:
        summary["unfiltered_tasks"] = unfiltered
    if not kept:
        raise TaskGenFailed(_nothing_usable(summary, "every generated task failed its quality gates"))
    profiles = [p.model_dump(mode="json") for p in ctx.npc_profiles]
    npcs = [GeneratedFile(filename=NPC_PROFILES_FILENAME, content=json.dumps(profiles, indent=2))] if profiles else []
    return TaskGenResults(
        job_id=PENDING_JOB_ID,
        tasks=tasks,
        instructions=instructions,
        rubrics=rubrics,
        verifiers=verifiers,
        skills_md=skills_md,
        npcs=npcs,
        filter_summary=summary,
    )


def _drop_reason(draft: TaskDraft, report: GateReport) -> str:
    if draft.task_id in report.replay_errors:
        return report.replay_errors[draft.task_id]
    if not draft.verifiers:
        return "no verifier was generated"
    reasons = [f"{m}: {r.reason}" for m in draft.verifiers if (r := report.results.get(m)) is not None]
    return "no verifier passed its quality gates (" + "; ".join(reasons)[:500] + ")"


def _nothing_usable(summary: dict[str, Any], headline: str) -> str:
    details: list[str] = []
    for item in summary.get("dropped_tasks", [])[:3]:
        details.append(f"{item['task_id']}: {item['reason']}")
    for item in summary.get("failed_item_details", [])[:3]:
        details.append(f"{item['step']} {item['item']}: {item['reason']}")
    for item in summary.get("skipped", [])[:3]:
        details.append(f"slot {item['slot']}: {item['reason']}")
    return headline + (" - " + " | ".join(details) if details else "")
