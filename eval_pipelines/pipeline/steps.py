"""Sweep steps for one scenario x model partition."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_pipelines.clients.backend import EvaluationBackend, ProgressCallback
from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.inputs.sweeps import (
    model_config_for,
    run_name,
    selected_task_ids,
    server_overrides,
    user_model_for,
)
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.pipeline.restored_servers import RestoredServers
from eval_pipelines.schemas.artifacts import STORED_ARTIFACTS_SUFFIX, RunArtifacts, UnreadableArtifacts
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import Rollout, RunLaunchRequest, error_class_of
from eval_pipelines.schemas.sweep import SweepConfig, SweepModel
from eval_pipelines.schemas.verifiers import VerifierOutcome
from eval_pipelines.verifiers.isolation import DEFAULT_VERIFIER_TIMEOUT_SECONDS, IsolatedVerifierRunner, VerifyJob
from eval_pipelines.verifiers.loader import package_version
from eval_pipelines.verifiers.rubric import DEFAULT_RUBRIC_JUDGE_CONCURRENCY, RubricJudge
from eval_pipelines.warehouse.rows import (
    ColumnTable,
    RolloutContext,
    VerificationRecord,
    rollout_tables,
    tasks_table,
    verification_table,
)
from eval_pipelines.warehouse.store import Warehouse, hive_partition, read_rows

logger = logging.getLogger(__name__)

_UNSAFE_IN_STEM = re.compile(r"[^A-Za-z0-9_.-]")
#: One verifier call's limit when a partition is re-verified.
VERIFIER_TIMEOUT_SECONDS = DEFAULT_VERIFIER_TIMEOUT_SECONDS


def launch_request(
    sweep: SweepConfig,
    model: SweepModel,
    scenario: ScenarioFiles,
    sweep_id: str,
    budget_usd: float | None = None,
) -> RunLaunchRequest:
    """The run of one scenario x model. `budget_usd` is what the sweep's cost ceiling leaves for this run."""
    source = f"sweep {sweep.name!r}"
    body: dict[str, Any] = {
        "scenario_id": scenario.scenario_id,
        "task_ids": selected_task_ids(sweep, scenario, source),
        "model_config": model_config_for(model, source=source),
        "rollout_count": sweep.rollout_count,
        "max_parallel": sweep.max_parallel,
        "run_name": run_name(sweep_id, scenario.scenario_id, model.name),
        "error_retries": sweep.error_retries,
        "error_retry_backoff_seconds": sweep.error_retry_backoff_seconds,
        "verifier_timeout_seconds": sweep.verifier_timeout_seconds,
        "rollout_timeout_seconds": sweep.rollout_timeout_seconds,
    }
    overrides = server_overrides(sweep, scenario, body["task_ids"])
    if overrides:
        body["task_overrides"] = overrides
    called = [model]
    user_model = user_model_for(sweep, model, scenario, body["task_ids"], source)
    if user_model is not None:
        body["user_model_config"] = model_config_for(user_model, source=source)
        called.append(user_model)
    if sweep.simulator_judge is not None:
        body["simulator_judge_config"] = model_config_for(sweep.simulator_judge, source=f"{source}: simulator_judge")
        called.append(sweep.simulator_judge)
    # A rollout calls its agent model, and the NPC model inside a tool call, one call at a time: the rollouts
    # running at once are the calls in flight to each, so a model's max_concurrency caps the run's parallelism.
    body["max_parallel"] = min([sweep.max_parallel, *(m.max_concurrency for m in called if m.max_concurrency)])
    if model.agent:
        body["agent"] = model.agent
    if model.agent_environment is not None:
        body["agent_environment"] = model.agent_environment.model_dump(exclude_none=True)
    if budget_usd is not None:
        body["max_cost_usd"] = max(budget_usd, COST_EPSILON_USD)
    return RunLaunchRequest.model_validate(body)


#: A spent budget still launches the run (so every rollout is recorded as refused, visibly); this is its ceiling.
COST_EPSILON_USD = 1e-9


def sweep_spend_usd(warehouse: Warehouse, sweep_id: str, *, other_than: tuple[str, str] | None = None) -> float:
    """Estimated cost a sweep has spent so far, from the warehouse's rollouts (optionally without one partition)."""
    excluded = (
        set()
        if other_than is None
        else set(warehouse.partition_files("rollouts", model_key=other_than[0], scenario_key=other_than[1]))
    )
    files = [f for f in warehouse.files("rollouts") if f not in excluded]
    return sum(row["cost_usd"] or 0.0 for row in read_rows(files, ["cost_usd"], sweep_id=sweep_id))


@dataclass
class CollectSummary:
    run_id: str
    rollouts: int
    by_status: dict[str, int]
    rows_written: dict[str, int]
    preview: list[dict[str, Any]] = field(default_factory=list)
    #: error class -> rollouts that ended in it (errors are not the agent's failures).
    by_error_class: dict[str, int] = field(default_factory=dict)
    #: attempts made beyond the first, over every rollout (retried errors).
    retries: int = 0


#: Rollouts whose artifacts are held in memory at once while a run is written to the warehouse.
COLLECT_CHUNK = 200
#: Rollouts shown in a partition's materialisation preview.
PREVIEW_ROWS = 10


def trace_path(traces_root: Path, model_key: str, scenario_key: str, rollout_id: str) -> Path:
    """Where a rollout's artifacts downloaded from a remote service are stored (compressed, as the service's)."""
    return traces_root / hive_partition(model_key, scenario_key) / f"{rollout_id}{STORED_ARTIFACTS_SUFFIX}"


class RunNotLaunched(LookupError):
    """The partition's run is not on the service: its `eval_run` step has not launched it."""


def run_and_collect(
    backend: EvaluationBackend,
    request: RunLaunchRequest,
    ctx: RolloutContext,
    scenario: ScenarioFiles,
    warehouse: Warehouse,
    traces_root: Path,
    *,
    timeout_seconds: float,
    progress: ProgressCallback | None = None,
    launch: bool = True,
) -> CollectSummary:
    """Launch (or resume) the partition's run, wait for it and write its rollouts to the warehouse. With
    `launch=False` (the `rollouts` asset: `eval_run` is the only launcher) the run must exist already.

    Idempotent: files are named by run id, so a re-run replaces them rather than adding rows. A rollout's
    artifacts are read where the service wrote them when it shares this disk (the local service), and copied
    under `traces_root` only from a remote one, so each is stored once.
    """
    if launch:
        backend.launch_or_resume(request)
    launched = backend.find_run(ctx.run_name)
    if launched is None:
        raise RunNotLaunched(f"run {ctx.run_name!r} is not on the {backend.name} service; materialise eval_run first")
    run_id = launched.run_id
    backend.complete_run(run_id, request, timeout_seconds=timeout_seconds, progress=progress)
    by_status: Counter[str] = Counter()
    by_error_class: Counter[str] = Counter()
    retries = 0
    preview: list[dict[str, Any]] = []

    def chunks() -> Iterator[dict[str, ColumnTable]]:
        # A page of rollouts and their artifacts is dropped once its rows are built, so memory stays flat as
        # runs grow: neither the rollouts nor their traces are ever held whole.
        for page in backend.rollout_pages(run_id, COLLECT_CHUNK):
            collected: list[tuple[Rollout, RunArtifacts | None, str | None]] = []
            for rollout in page:
                nonlocal retries
                by_status[rollout.status.value] += 1
                if rollout.status.is_terminal:
                    error_class = error_class_of(rollout.status.value, rollout.termination_reason, rollout.result)
                    if error_class is not None:
                        by_error_class[error_class.value] += 1
                    retries += rollout.result.attempts - 1 if rollout.result is not None else 0
                if len(preview) < PREVIEW_ROWS:
                    preview.append(
                        {
                            "task_id": rollout.task_id,
                            "rollout": rollout.rollout_index,
                            "status": rollout.status.value,
                            "error_class": (rollout.result.error_class if rollout.result else None) or "",
                            "success": bool(rollout.result and rollout.result.success),
                            "steps": rollout.result.steps_taken if rollout.result else 0,
                        }
                    )
                artifacts: RunArtifacts | None = None
                path: str | None = None
                if rollout.status.is_terminal:
                    artifacts, path = _artifacts_of(backend, run_id, rollout.rollout_id, ctx, traces_root)
                collected.append((rollout, artifacts, path))
            yield rollout_tables(ctx, collected)
        if not by_status:
            yield rollout_tables(ctx, [])  # empty files, so a run with no rollouts still has its tables

    rows_written = warehouse.write_streams(
        chunks(), model_key=ctx.model_key, scenario_key=ctx.scenario_key, file_stem=run_id
    )
    warehouse.write_tasks(tasks_table(scenario.scenario_id, scenario.tasks().values()), ctx.scenario_key)
    return CollectSummary(
        run_id, sum(by_status.values()), dict(by_status), rows_written, preview, dict(by_error_class), retries
    )


def _artifacts_of(
    backend: EvaluationBackend, run_id: str, rollout_id: str, ctx: RolloutContext, traces_root: Path
) -> tuple[RunArtifacts | None, str | None]:
    """A finished rollout's artifacts and the file that holds them (None, None: it has none)."""
    local = backend.artifacts_file(run_id, rollout_id)
    if local is not None:
        try:
            return RunArtifacts.load(local), str(local)
        except (OSError, UnreadableArtifacts) as exc:
            # As for a rollout whose file is missing: its row is written without a trace, the others go on.
            logger.warning("rollout %s is collected without its trace: %s", rollout_id, exc)
            return None, None
    artifacts = backend.get_artifacts(rollout_id)
    if artifacts is None:
        return None, None
    target = trace_path(traces_root, ctx.model_key, ctx.scenario_key, rollout_id)
    artifacts.dump(target)
    return artifacts, str(target)


def safe_stem(text: str) -> str:
    """`text` as a file-name part (a sweep id may hold characters a file name must not)."""
    return _UNSAFE_IN_STEM.sub("_", text)


def verification_file_stem(verifier_version: str, sweep_id: str) -> str:
    """A partition's programmatic verdicts of one sweep at one verifier package version live in one file of this
    stem: re-verifying one sweep never rewrites another's."""
    return f"verifiers-{verifier_version}-{safe_stem(sweep_id)}"


def verification_files(warehouse: Warehouse, model_key: str, scenario_key: str, verifier_version: str) -> list[Path]:
    """Every sweep's verdict file of the partition at one verifier version."""
    prefix = f"verifiers-{verifier_version}-"
    files = warehouse.partition_files("verifications", model_key=model_key, scenario_key=scenario_key)
    return [f for f in files if f.name.startswith(prefix)]


@dataclass
class VerifySummary:
    verifier_version: str
    rollouts_verified: int
    passed: int
    skipped: int
    rows_written: int
    file: str | None
    #: rollouts on which some verifier gave no verdict (a `verifier` error, never a failure).
    verifier_errors: int = 0
    #: sweeps whose verdicts were written (one file each; `file` is the last one).
    sweeps: int = 0


_STORED_ROLLOUT_COLUMNS = ("sweep_id", "run_id", "rollout_id", "scenario_id", "task_id", "model_name", "artifacts_path")


def _partition_rollouts(
    warehouse: Warehouse, model_key: str, scenario_key: str, sweep_id: str | None = None
) -> list[dict[str, Any]]:
    """The partition's stored rollouts (every sweep's, or only `sweep_id`'s)."""
    return warehouse.partition_rows(
        "rollouts",
        model_key=model_key,
        scenario_key=scenario_key,
        columns=_STORED_ROLLOUT_COLUMNS,
        sweep_id=sweep_id,
    )


def verify_partition(
    warehouse: Warehouse,
    scenario: ScenarioFiles,
    model_key: str,
    scenario_key: str,
    *,
    sweep_id: str | None = None,
    verified_at: dt.datetime | None = None,
) -> VerifySummary:
    """Run the scenario's current verifiers over the partition's stored rollouts: `sweep_id`'s, or every sweep's
    (a verifier changed).

    Reads only the stored traces and state snapshots: no agent, model or tool server runs. Rows are tagged with
    the verifier version; each sweep's verdicts go to a file named by the package version and the sweep, so older
    versions stay queryable, a repeat at the same version replaces its own rows, and no sweep's file is touched
    by another's verification.
    """
    version = package_version(scenario.verifiers_dir)
    stored = _partition_rollouts(warehouse, model_key, scenario_key, sweep_id)
    if not stored:
        return VerifySummary(version, 0, 0, 0, 0, None)
    tasks = scenario.tasks()
    verified_at = verified_at or dt.datetime.now(dt.UTC)
    records: dict[str, list[VerificationRecord]] = {}
    verified = passed = skipped = verifier_errors = 0
    rows: list[dict[str, Any]] = []
    jobs: list[VerifyJob] = []
    with contextlib.ExitStack() as held:
        restored: RestoredServers | None = None
        for row in stored:
            path = row["artifacts_path"]
            task = tasks.get(row["task_id"])
            if not path or task is None or not Path(path).is_file():
                skipped += 1
                continue
            rows.append(row)
            job = VerifyJob(Path(path), tuple(task.verifiers))
            if task.simlab_servers or task.http_servers:  # verifiers may query the servers as the rollout left them
                restored = restored or held.enter_context(RestoredServers())
                job = restored.prepare(job)
            jobs.append(job)
        # Verifier code is untrusted (a scenario author's, a bundle's): it runs in a contained worker, where a
        # hang, an exit or a memory blow-up costs one verdict, never this step.
        with IsolatedVerifierRunner(scenario.verifiers_dir, timeout_seconds=VERIFIER_TIMEOUT_SECONDS) as runner:
            results = runner.run(jobs) if jobs else []
    for row, outcomes in zip(rows, results, strict=True):
        verified += 1
        passed += int(bool(outcomes) and all(o.success for o in outcomes))
        verifier_errors += int(any(o.is_error for o in outcomes))
        records.setdefault(row["sweep_id"], []).extend(
            VerificationRecord.of_rollout(row, outcome, verified_at) for outcome in outcomes
        )
    if skipped:
        logger.warning("%d stored rollouts had no trace or task and were not verified", skipped)
    written = 0
    file: Path | None = None
    for sweep, sweep_records in sorted(records.items()):
        table = verification_table(sweep_records)
        file = warehouse.write(
            "verifications",
            table,
            model_key=model_key,
            scenario_key=scenario_key,
            file_stem=verification_file_stem(version, sweep),
        )
        written += table.num_rows
    return VerifySummary(
        version, verified, passed, skipped, written, str(file) if file else None, verifier_errors, len(records)
    )


@dataclass
class ScoreCheck:
    passed: bool
    description: str
    rollouts: int
    unscored: int
    out_of_range: int
    verifier_version: str

    def metadata(self) -> dict[str, Any]:
        """What the `scores_complete_and_in_range` check records beside its verdict."""
        return {
            "rollouts": self.rollouts,
            "unscored": self.unscored,
            "out_of_range": self.out_of_range,
            "verifier_version": self.verifier_version,
        }


def check_partition_scores(
    warehouse: Warehouse, scenario: ScenarioFiles, model_key: str, scenario_key: str, sweep_id: str | None = None
) -> ScoreCheck:
    """Every stored rollout with a trace (of `sweep_id`, or of every sweep) has a score at the current verifier
    version, and every score is in [0, 1]."""
    version = package_version(scenario.verifiers_dir)
    stored = _partition_rollouts(warehouse, model_key, scenario_key, sweep_id)
    tasks = scenario.tasks()
    expected = {
        row["rollout_id"]
        for row in stored
        if row["artifacts_path"] and (task := tasks.get(row["task_id"])) is not None and task.verifiers
    }
    scored: set[str] = set()
    out_of_range = 0
    for row in read_rows(verification_files(warehouse, model_key, scenario_key, version), ["rollout_id", "reward"]):
        rollout_id, reward = row["rollout_id"], row["reward"]
        if rollout_id in expected:
            scored.add(rollout_id)
            out_of_range += int(reward is None or not 0.0 <= reward <= 1.0)
    unscored = len(expected - scored)
    passed = unscored == 0 and out_of_range == 0
    description = (
        f"{len(expected)} rollouts scored at verifier version {version}"
        if passed
        else f"{unscored} of {len(expected)} rollouts lack a score at version {version}; "
        f"{out_of_range} scores out of range"
    )
    return ScoreCheck(passed, description, len(expected), unscored, out_of_range, version)


@dataclass
class RubricSummary:
    judged: int
    passed: int
    errors: int
    file: str | None


def judge_partition_rubrics(
    warehouse: Warehouse,
    scenario: ScenarioFiles,
    model_key: str,
    scenario_key: str,
    judge_config: ModelConfig,
    *,
    max_concurrency: int | None = None,
    sweep_id: str | None = None,
) -> RubricSummary:
    """Judge the stored rollouts of one sweep (`sweep_id`; None: the partition's newest sweep) against their task's
    rubric (or its rubric_markdown override) and write the verdicts as `verifications` rows of kind rubric, in a
    file of that sweep's own: another sweep's verdicts are never re-judged or rewritten. Reads stored traces
    only; calls the judge, at most `max_concurrency` calls at once (the sweep's rubric_judge setting); a rollout
    waiting for its turn has no timeout running, the judge's `request_timeout_seconds` bounds each attempt."""
    sweep_id = sweep_id or warehouse.newest_sweep(model_key=model_key, scenario_key=scenario_key)
    if sweep_id is None:
        return RubricSummary(0, 0, 0, None)
    stored = _partition_rollouts(warehouse, model_key, scenario_key, sweep_id)
    tasks = scenario.tasks()
    rows = [r for r in stored if r["artifacts_path"] and r["task_id"] in tasks]

    async def judge_all() -> list[tuple[dict[str, Any], VerifierOutcome] | None]:
        concurrency = max_concurrency or DEFAULT_RUBRIC_JUDGE_CONCURRENCY
        async with ChatClient.from_model_config(judge_config, max_concurrency=concurrency) as client:
            judge = RubricJudge(client, judge_config.model)
            gate = asyncio.Semaphore(concurrency)

            async def one(row: dict[str, Any]) -> tuple[dict[str, Any], VerifierOutcome] | None:
                async with gate:
                    try:
                        artifacts = RunArtifacts.load(row["artifacts_path"])
                    except (OSError, UnreadableArtifacts) as exc:
                        # One lost or damaged trace is left unjudged (as verification skips it), not the step.
                        logger.warning("rollout %s is not judged: %s", row["rollout_id"], exc)
                        return None
                    override = artifacts.metadata.get("rubric_markdown")
                    outcome = await judge.judge(artifacts, tasks[row["task_id"]].rubric, override)
                    return row, judge.to_outcome(outcome)

            return await asyncio.gather(*(one(r) for r in rows))

    judged = [found for found in asyncio.run(judge_all()) if found is not None]
    verified_at = dt.datetime.now(dt.UTC)
    records = [VerificationRecord.of_rollout(row, outcome, verified_at) for row, outcome in judged]
    if not records:
        return RubricSummary(0, 0, 0, None)
    version = records[0].outcome.verifier_version
    file = warehouse.write(
        "verifications",
        verification_table(records),
        model_key=model_key,
        scenario_key=scenario_key,
        file_stem=f"rubric-{version}-{safe_stem(sweep_id)}",
    )
    errors = sum(
        1 for r in records if isinstance(r.outcome.output, dict) and r.outcome.output.get("verdict") == "ERROR"
    )
    return RubricSummary(len(records), sum(1 for r in records if r.outcome.success), errors, str(file))
