"""Quality gates: a generated verifier is kept only if it imports, PASSES a replay of its task's reference
actions and FAILS a no-op run, both executed by the real rollout engine against real tool-server workspaces
(built-in servers started in-process over loopback HTTP) and judged in a separate worker process, so a verifier
that hangs or kills its interpreter costs one failed gate and nothing else.

A verifier failing a gate is reported with the gate (`static`, `import`, `reference`, `noop`) and the reason;
the generators keep it as `<module>.FAILED.py`. The servers replayed on are the built-in ones and those
simulated from a user's schemas (`schema_server`); a task on a server neither serves cannot be gated: its
verifiers are reported `ungated`.
"""

from __future__ import annotations

import ast
import asyncio
import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_pipelines.agents.base import BaseAgent
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutOutcome, RolloutSpec
from eval_pipelines.environments.base import BaseEnvironment
from eval_pipelines.llm.types import wire_tool_name
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import RolloutStatus
from eval_pipelines.schemas.scenarios import Task, TaskToolServer
from eval_pipelines.schemas.tools import ToolCall
from eval_pipelines.taskgen.drafts import TaskDraft
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.toolservers.base import BuiltinToolServer
from eval_pipelines.toolservers.host import ToolServerHost
from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, VerifyJob, WorkerStartError

DEFAULT_VERIFIER_TIMEOUT_SECONDS = 15.0
DEFAULT_ROLLOUT_TIMEOUT_SECONDS = 60.0
DEFAULT_CONCURRENCY = 8
NOOP_ANSWER = "I did not do anything."
FORBIDDEN_IMPORT = "eval_pipelines"

ProgressFn = Callable[[int, int], None]


class ReplayAgent(BaseAgent):
    """Executes a fixed list of tool calls through the environment, recording them like a real agent."""

    def __init__(self, actions: Sequence[ToolCall], answer: str) -> None:
        self.actions = list(actions)
        self.answer = answer

    @staticmethod
    def name() -> str:
        return "taskgen-replay"

    async def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        context.record_message("user", instruction)
        for index, action in enumerate(self.actions):
            call_id = f"call_{index}"
            wire = {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": wire_tool_name(action.tool_server, action.tool_name),
                    "arguments": json.dumps(action.parameters),
                },
            }
            context.record_message("assistant", None, tool_calls=[wire])
            result = await environment.acall_tool(action.tool_server, action.tool_name, dict(action.parameters))
            context.record_message("tool", result.observation, tool_call_id=call_id, is_error=result.is_error)
            context.record_tool_call(action, result)
        context.record_message("assistant", self.answer)
        context.set_final_observation(self.answer)


class NoopAgent(BaseAgent):
    """Answers without calling any tool: the run every sound verifier must fail."""

    @staticmethod
    def name() -> str:
        return "taskgen-noop"

    async def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        context.record_message("user", instruction)
        context.record_message("assistant", NOOP_ANSWER)
        context.set_final_observation(NOOP_ANSWER)


@dataclass
class GateResult:
    module: str
    task_id: str
    passed: bool
    #: the first gate failed: static, import, reference, noop (None when passed or ungated).
    gate: str | None = None
    reason: str = ""
    gated: bool = True


@dataclass
class GateReport:
    results: dict[str, GateResult] = field(default_factory=dict)
    #: task_id -> why its reference actions could not be replayed.
    replay_errors: dict[str, str] = field(default_factory=dict)
    ungated_reason: str | None = None

    def passing(self, draft: TaskDraft) -> list[str]:
        return [m for m in draft.verifiers if (r := self.results.get(m)) is not None and r.passed]


def static_problem(source: str) -> str | None:
    """Why a verifier cannot be used, judged from its source alone (None if it looks usable)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"does not compile: {exc.msg} (line {exc.lineno})"
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        if any(n == FORBIDDEN_IMPORT or n.startswith(FORBIDDEN_IMPORT + ".") for n in names):
            return "imports eval_pipelines; a verifier must be standalone (standard library only)"
    defines_verify = any(
        (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "verify")
        or (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "verify" for t in node.targets))
        or (
            isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == "verify" for a in node.names)
        )
        for node in tree.body
    )
    return None if defines_verify else "defines no top-level verify(run_artifacts)"


def _gate_task(draft: TaskDraft) -> Task:
    return Task(
        task_id=draft.task_id,
        name=draft.name,
        description=draft.instruction,
        tool_servers=[TaskToolServer(name=s) for s in draft.servers],
        reference_actions=draft.actions,
        reference_answer=draft.reference_answer,
    )


def _replay_problem(outcome: RolloutOutcome) -> str | None:
    if outcome.status != RolloutStatus.COMPLETED:
        return f"replay ended {outcome.status.value}: {outcome.artifacts.error or outcome.result.message}"
    calls = zip(outcome.artifacts.tool_calls, outcome.artifacts.tool_results, strict=False)
    for index, (call, result) in enumerate(calls):
        if result.is_error:
            return f"reference action {index + 1} ({call.tool_name}) failed: {str(result.observation)[:300]}"
    return None


class QualityGates:
    def __init__(
        self,
        *,
        verifier_timeout_seconds: float = DEFAULT_VERIFIER_TIMEOUT_SECONDS,
        rollout_timeout_seconds: float = DEFAULT_ROLLOUT_TIMEOUT_SECONDS,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        self.verifier_timeout_seconds = verifier_timeout_seconds
        self.rollout_timeout_seconds = rollout_timeout_seconds
        self.concurrency = concurrency

    async def run(
        self,
        drafts: Sequence[TaskDraft],
        seeds: Mapping[str, dict[str, Any] | None],
        servers: Mapping[str, type[BuiltinToolServer]] | Sequence[str],
        progress: ProgressFn | None = None,
    ) -> GateReport:
        """Gate every verifier of every draft. `seeds`: server -> the seed file every task loads (or None).
        `servers`: the servers to replay on, by name -> class, or the names of built-in ones."""
        classes = dict(servers) if isinstance(servers, Mapping) else {}
        replayable = set(servers)
        report = GateReport()
        gated: list[TaskDraft] = []
        for draft in drafts:
            statics = {m: static_problem(src) for m, src in draft.verifiers.items()}
            for module, problem in statics.items():
                if problem is not None:
                    report.results[module] = GateResult(module, draft.task_id, False, "static", problem)
            if not all(s in replayable for s in draft.servers):
                missing = sorted(set(draft.servers) - replayable)
                report.ungated_reason = f"no tool server implements {missing}, so reference actions cannot be replayed"
                for module, problem in statics.items():
                    if problem is None:
                        report.results[module] = GateResult(
                            module, draft.task_id, True, None, "ungated: " + report.ungated_reason, gated=False
                        )
                continue
            if any(p is None for p in statics.values()):
                gated.append(draft)
        if not gated:
            return report
        names = sorted({s for d in gated for s in d.servers})
        host = ToolServerHost(names, extra={n: c for n, c in classes.items() if n in names})
        await asyncio.to_thread(host.start)
        try:
            runs = await self._replay_all(gated, seeds, host, progress)
        finally:
            await asyncio.to_thread(host.stop)
        for draft, (reference, _noop) in zip(gated, runs, strict=True):
            problem = _replay_problem(reference)
            if problem is not None:
                report.replay_errors[draft.task_id] = problem
        await asyncio.to_thread(self._verify_all, gated, runs, report)
        return report

    async def _replay_all(
        self,
        drafts: Sequence[TaskDraft],
        seeds: Mapping[str, dict[str, Any] | None],
        host: ToolServerHost,
        progress: ProgressFn | None,
    ) -> list[tuple[RolloutOutcome, RolloutOutcome]]:
        clients = ChatClientPool()
        admin = ToolServerAdmin(timeout_seconds=30.0)
        # Never called: the replay and no-op agents use no model; RolloutSpec needs a config all the same.
        config = ModelConfig.model_validate(
            {"model": "taskgen-replay", "api_key": "unused", "base_url": "http://127.0.0.1:9/v1"}
        )
        replay = RolloutEngine(
            clients,
            admin,
            agent_factory=lambda spec, _c, _s: ReplayAgent(spec.task.reference_actions, spec.task.reference_answer),
        )
        noop = RolloutEngine(clients, admin, agent_factory=lambda _spec, _c, _s: NoopAgent())
        semaphore = asyncio.Semaphore(self.concurrency)
        done = 0

        def spec(draft: TaskDraft, kind: str) -> RolloutSpec:
            return RolloutSpec(
                rollout_id=f"taskgen-{kind}-{draft.task_id}",
                run_id="taskgen-gates",
                scenario_id="taskgen",
                task=_gate_task(draft),
                model_config=config,
                tool_server_urls={s: host.base_url(s) for s in draft.servers},
                seed={s: [seed] for s in draft.servers if (seed := seeds.get(s)) is not None},
                timeout_seconds=self.rollout_timeout_seconds,
            )

        async def both(draft: TaskDraft) -> tuple[RolloutOutcome, RolloutOutcome]:
            nonlocal done
            async with semaphore:
                reference = await replay.execute(spec(draft, "reference"))
                nothing = await noop.execute(spec(draft, "noop"))
            done += 1
            if progress is not None:
                progress(done, len(drafts))
            return reference, nothing

        try:
            return list(await asyncio.gather(*(both(d) for d in drafts)))
        finally:
            await admin.aclose()
            await clients.aclose()

    def _verify_all(
        self, drafts: Sequence[TaskDraft], runs: Sequence[tuple[RolloutOutcome, RolloutOutcome]], report: GateReport
    ) -> None:
        with tempfile.TemporaryDirectory(prefix="taskgen-gates-") as tmp:
            package = Path(tmp) / "taskgen_gate" / "verifiers"
            package.mkdir(parents=True)
            (package / "__init__.py").write_text('"""Verifiers under quality gates."""\n', encoding="utf-8")
            jobs: list[VerifyJob] = []
            owners: list[tuple[TaskDraft, tuple[str, ...]]] = []
            for draft, (reference, noop) in zip(drafts, runs, strict=True):
                modules = tuple(m for m in draft.verifiers if m not in report.results)
                for module in modules:
                    (package / f"{module}.py").write_text(draft.verifiers[module], encoding="utf-8")
                if draft.task_id in report.replay_errors:
                    for module in modules:
                        report.results[module] = GateResult(
                            module, draft.task_id, False, "reference", report.replay_errors[draft.task_id]
                        )
                    continue
                jobs += [VerifyJob(reference.artifacts, modules), VerifyJob(noop.artifacts, modules)]
                owners.append((draft, modules))
            if not jobs:
                return
            try:
                with IsolatedVerifierRunner(package, timeout_seconds=self.verifier_timeout_seconds) as runner:
                    outcomes = runner.run(jobs)
            except WorkerStartError as exc:
                for draft, modules in owners:
                    for module in modules:
                        report.results[module] = GateResult(module, draft.task_id, False, "import", str(exc))
                return
        for index, (draft, modules) in enumerate(owners):
            on_reference, on_noop = outcomes[2 * index], outcomes[2 * index + 1]
            for module, ref, nop in zip(modules, on_reference, on_noop, strict=True):
                if ref.success and not nop.success:
                    report.results[module] = GateResult(module, draft.task_id, True)
                elif not ref.success and ref.message.startswith("Verifier error") and ref.message == nop.message:
                    report.results[module] = GateResult(module, draft.task_id, False, "import", ref.message)
                elif not ref.success:
                    report.results[module] = GateResult(
                        module, draft.task_id, False, "reference", f"fails the reference replay: {ref.message}"
                    )
                else:
                    report.results[module] = GateResult(
                        module, draft.task_id, False, "noop", f"passes a run that changed nothing: {nop.message}"
                    )
