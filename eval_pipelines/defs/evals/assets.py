"""The sweep's assets: eval_run -> rollouts -> verification -> eval_catalog. Each one calls a Dagster-free
step and reports what it wrote."""

import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dagster as dg

from eval_pipelines.clients.errors import BadRequest, ServiceError
from eval_pipelines.defs.evals.partitions import SCENARIO_MODEL, keys_of
from eval_pipelines.defs.evals.resources import EvalPaths, EvalService
from eval_pipelines.defs.table_metadata import table_counts, table_definition, table_rows
from eval_pipelines.inputs.scenarios import ScenarioError, ScenarioFiles
from eval_pipelines.inputs.sweeps import ConfigError, default_sweep_id, find_sweep_for, model_config_for
from eval_pipelines.pipeline.command_sandbox import sandbox_for, sandbox_warning
from eval_pipelines.pipeline.gates import judge_min_kappa_of
from eval_pipelines.pipeline.health import error_share_check, partition_error_share
from eval_pipelines.pipeline.steps import (
    RunNotLaunched,
    check_partition_scores,
    judge_partition_rubrics,
    launch_request,
    run_and_collect,
    sweep_spend_usd,
    verification_files,
    verify_partition,
)
from eval_pipelines.pipeline.summary import markdown_table
from eval_pipelines.reports import ReportError, build_report, pass_rate_summary
from eval_pipelines.reports.viewer.links import rollouts_link
from eval_pipelines.runtime.local import shared_runtime
from eval_pipelines.schemas.runs import RunLaunchRequest
from eval_pipelines.schemas.sweep import DEFAULT_ERROR_THRESHOLD, SweepConfig
from eval_pipelines.verifiers.loader import package_version
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.rows import RolloutContext
from eval_pipelines.warehouse.store import Warehouse

#: Dagster pool of the steps that call models; dagster.yaml sets its size (provider rate limits).
LLM_POOL = "llm_api"
#: Step retries for transient failures. Run retries (dagster.yaml) only cover crashed run workers, so the two
#: never multiply; a retried step resumes its run, so completed rollouts are not executed again.
LLM_STEP_RETRY = dg.RetryPolicy(max_retries=2, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)
SERVICE_STEP_RETRY = dg.RetryPolicy(max_retries=3, delay=5, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)
SWEEP_TAG = "eval_pipelines/sweep"
SWEEP_ID_TAG = "eval_pipelines/sweep_id"
GROUP = "evals"


#: Metadata key of a step failure that retrying cannot fix: the CLI reports it as a user error (exit 2).
USER_ERROR_METADATA = "user_error"
#: Exceptions that mean the request or the configuration is wrong, not that something is down.
USER_ERRORS: tuple[type[Exception], ...] = (ConfigError, ScenarioError, RunNotLaunched, BadRequest)


@contextmanager
def user_errors_are_final() -> Iterator[None]:
    """A user error inside a step fails it at once, with no retry (retrying cannot fix a bad request)."""
    try:
        yield
    except USER_ERRORS as exc:
        raise dg.Failure(description=str(exc), metadata={USER_ERROR_METADATA: True}, allow_retries=False) from None
    except ServiceError as exc:
        if exc.status is not None and 400 <= exc.status < 500 and exc.status not in (408, 429):
            raise dg.Failure(description=str(exc), metadata={USER_ERROR_METADATA: True}, allow_retries=False) from None
        raise


@dataclass(frozen=True)
class PartitionWork:
    request: RunLaunchRequest
    ctx: RolloutContext
    scenario: ScenarioFiles
    sweep: SweepConfig


def _partition_work(context: dg.AssetExecutionContext, paths: EvalPaths) -> PartitionWork | None:
    with user_errors_are_final():
        return _find_partition_work(context, paths)


def _find_partition_work(context: dg.AssetExecutionContext, paths: EvalPaths) -> PartitionWork | None:
    """The run this partition stands for; None when no sweep config pairs its model and scenario.

    Both partition dimensions are dynamic, so every model x scenario combination exists as a partition. Nothing
    automatic requests a pair no sweep names (docs/architecture.md, "Automation"); one materialised by hand in the
    UI is an explicit no-op. A run tag naming a sweep is a direct request and must match.
    """
    model_key, scenario_key = keys_of(context)
    sweeps = paths.sweeps()
    tags = context.run.tags
    if SWEEP_TAG in tags:
        sweep = sweeps.get(tags[SWEEP_TAG])
        if sweep is None:
            raise dg.Failure(f"run tag {SWEEP_TAG}={tags[SWEEP_TAG]!r} names no sweep config")
    else:
        try:
            sweep = find_sweep_for(sweeps, model_key, scenario_key)
        except ConfigError:
            return None
    model = next((m for m in sweep.models if m.name == model_key), None)
    if model is None:
        raise dg.Failure(f"sweep {sweep.name!r} has no model {model_key!r}")
    scenario = paths.catalog().get(scenario_key)
    sweep_id = tags.get(SWEEP_ID_TAG) or default_sweep_id(sweep)
    budget = None
    if sweep.max_cost_usd is not None:
        spent = sweep_spend_usd(Warehouse(paths.warehouse), sweep_id, other_than=(model_key, scenario_key))
        budget = sweep.max_cost_usd - spent
        if budget <= 0:
            context.log.warning(
                f"sweep {sweep_id}: cost ceiling ${sweep.max_cost_usd:.4f} reached (${spent:.4f} spent); "
                "this partition's rollouts will not be started"
            )
    request = launch_request(sweep, model, scenario, sweep_id, budget)
    ctx = RolloutContext(
        sweep_id=sweep_id,
        run_name=request.run_name or "",
        model_key=model_key,
        scenario_key=scenario_key,
        model_name=model.name,
        is_simulated=model.is_simulated,
        base_url=model.base_url,
    )
    return PartitionWork(request, ctx, scenario, sweep)


NOT_IN_SWEEP: dict[str, Any] = {
    "in_sweep": False,
    "note": "no sweep config pairs this model and scenario; nothing to run",
}


@dg.asset(
    partitions_def=SCENARIO_MODEL,
    group_name=GROUP,
    kinds={"python"},
    retry_policy=SERVICE_STEP_RETRY,
    description="Launches (or resumes) the evaluation run of one scenario x model: POST /runs with an "
    "idempotent run_name.",
)
def eval_run(context: dg.AssetExecutionContext, paths: EvalPaths, eval_service: EvalService) -> dg.MaterializeResult:
    work = _partition_work(context, paths)
    if work is None:
        return dg.MaterializeResult(metadata=NOT_IN_SWEEP)
    request, ctx = work.request, work.ctx
    backend = eval_service.get_backend()
    with user_errors_are_final():
        run_id = backend.launch_or_resume(request)
    run = backend.find_run(ctx.run_name)
    context.log.info(f"run {run_id} ({ctx.run_name}) on the {backend.name} backend")
    # The embedded service's tool host runs here, so this process's probe is the host's answer.
    sandbox = sandbox_for([work.scenario]) if backend.name == "embedded" else None
    if (warning := sandbox_warning(sandbox)) is not None:
        context.log.warning(warning)
    return dg.MaterializeResult(
        metadata={
            **({"command_sandbox": sandbox.mode} if sandbox is not None else {}),
            "in_sweep": True,
            "run_id": run_id,
            "run_name": ctx.run_name,
            "sweep_id": ctx.sweep_id,
            "backend": backend.name,
            "simulated_model": ctx.is_simulated,
            "tasks": len(request.task_ids),
            "rollouts": run.total if run else len(request.task_ids) * request.rollout_count,
        }
    )


@dg.asset(
    partitions_def=SCENARIO_MODEL,
    group_name=GROUP,
    deps=[eval_run],
    kinds={"parquet"},
    metadata=table_definition("rollouts"),
    pool=LLM_POOL,
    retry_policy=LLM_STEP_RETRY,
    description="Waits for the run eval_run launched and writes its rollouts, messages, tool_calls and state_diffs "
    "to Parquet.",
)
def rollouts(context: dg.AssetExecutionContext, paths: EvalPaths, eval_service: EvalService) -> dg.MaterializeResult:
    work = _partition_work(context, paths)
    if work is None:
        return dg.MaterializeResult(metadata={**NOT_IN_SWEEP, **table_rows("rollouts", 0)})
    backend = eval_service.get_backend()
    done = 0

    def progress(_: object) -> None:
        nonlocal done
        done += 1
        if done % 10 == 0:
            context.log.info(f"{done} rollouts finished")

    with user_errors_are_final():
        summary = run_and_collect(
            backend,
            work.request,
            work.ctx,
            work.scenario,
            Warehouse(paths.warehouse),
            paths.traces,
            timeout_seconds=work.sweep.rollout_timeout_seconds,
            progress=progress,
            launch=False,
        )
    errors = sum(summary.by_error_class.values())
    if errors:
        context.log.warning(
            f"{errors} of {summary.rollouts} rollouts ended in errors (not the agent's failures): "
            + ", ".join(f"{k} {v}" for k, v in sorted(summary.by_error_class.items()))
        )
    return dg.MaterializeResult(
        metadata={
            "run_id": summary.run_id,
            "rollouts": summary.rollouts,
            "errors": errors,
            "retried_attempts": summary.retries,
            **{f"errors/{k}": v for k, v in sorted(summary.by_error_class.items())},
            **{f"status/{k}": v for k, v in sorted(summary.by_status.items())},
            **table_rows("rollouts", summary.rows_written.get("rollouts", 0)),
            "tables_written": table_counts(summary.rows_written),
            "preview": dg.MetadataValue.md(markdown_table(summary.preview)),
            # `eval-pipelines view` must be running for the link to answer
            "viewer": dg.MetadataValue.url(
                rollouts_link(work.ctx.sweep_id, model=work.ctx.model_name, scenario=work.request.scenario_id)
            ),
        }
    )


#: Verify a partition's rollouts when they are written outside a run that verifies them too (a manual
#: materialisation of `rollouts`), once. A verifier edit is not a trigger here: each scenario's verifiers have their
#: own version, and the `reverify_changed_verifiers` sensor requests exactly the partitions of the scenario whose
#: verifiers changed (an asset's code version is one for all its partitions, so it would re-verify them all).
VERIFY_CONDITION = dg.AutomationCondition.eager()


@dg.asset(
    name="verification",
    partitions_def=SCENARIO_MODEL,
    group_name=GROUP,
    deps=[rollouts],
    kinds={"parquet"},
    metadata=table_definition("verifications"),
    automation_condition=VERIFY_CONDITION,
    description="Runs the scenario's verifiers over every stored rollout of the partition (no agent re-run); "
    "rows carry the verifier version.",
)
def verification(context: dg.AssetExecutionContext, paths: EvalPaths) -> dg.MaterializeResult:
    model_key, scenario_key = keys_of(context)
    scenario = paths.catalog().get(scenario_key)
    # A sweep's run verifies that sweep's rollouts; a run without one (a verifier changed) verifies them all.
    sweep_id = context.run.tags.get(SWEEP_ID_TAG)
    summary = verify_partition(Warehouse(paths.warehouse), scenario, model_key, scenario_key, sweep_id=sweep_id)
    rate = summary.passed / summary.rollouts_verified if summary.rollouts_verified else 0.0
    if summary.verifier_errors:
        context.log.warning(f"{summary.verifier_errors} rollouts got no verdict: verifier errors, not failures")
    context.log.info(
        f"verifier version {summary.verifier_version}: {summary.passed}/{summary.rollouts_verified} passed"
    )
    return dg.MaterializeResult(
        metadata={
            "verifier_version": summary.verifier_version,
            "rollouts_verified": summary.rollouts_verified,
            "passed": summary.passed,
            "pass_rate": round(rate, 4),
            "verifier_errors": summary.verifier_errors,
            "skipped": summary.skipped,
            **table_rows("verifications", summary.rows_written),
        }
    )


def build_scores_check() -> dg.AssetChecksDefinition:
    # Partitioned asset checks are a preview feature in Dagster 1.13; the check is what we need, so accept it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return _scores_check()


def build_error_check() -> dg.AssetChecksDefinition:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return _error_check()


def sweep_of(tags: Mapping[str, str], sweeps: dict[str, SweepConfig], model: str, scenario: str) -> SweepConfig | None:
    """The sweep a run stands for: the one its tag names, else the one that pairs the model and scenario."""
    if SWEEP_TAG in tags:
        return sweeps.get(tags[SWEEP_TAG])
    try:
        return find_sweep_for(sweeps, model, scenario)
    except ConfigError:
        return None


def _error_check() -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset="verification",
        name="errors_below_threshold",
        partitions_def=SCENARIO_MODEL,
        description="Fails when the share of the sweep's rollouts in this partition that ended in an error (model "
        "endpoint, tool server, NPC model, verifier, cancel, budget: anything but the agent) exceeds the sweep's "
        "error_threshold: then the pass rate says nothing about the model.",
    )
    def errors_below_threshold(context: dg.AssetCheckExecutionContext, paths: EvalPaths) -> dg.AssetCheckResult:
        model_key, scenario_key = keys_of(context)
        tags = context.run.tags
        sweep = sweep_of(tags, paths.sweeps(), model_key, scenario_key)
        threshold = sweep.error_threshold if sweep is not None else DEFAULT_ERROR_THRESHOLD
        scenario = paths.catalog().get(scenario_key)
        warehouse = Warehouse(paths.warehouse)
        share = partition_error_share(
            warehouse,
            model_key,
            scenario_key,
            sweep_id=tags.get(SWEEP_ID_TAG),
            verification_files=verification_files(
                warehouse, model_key, scenario_key, package_version(scenario.verifiers_dir)
            ),
        )
        passed, description, metadata = error_share_check(share, threshold)
        return dg.AssetCheckResult(passed=passed, description=description, metadata=metadata)

    return errors_below_threshold


def _scores_check() -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset="verification",
        name="scores_complete_and_in_range",
        partitions_def=SCENARIO_MODEL,
        description="Fails when a stored rollout of the partition has no score at the current verifier version, "
        "or a score lies outside [0, 1].",
    )
    def scores_complete_and_in_range(context: dg.AssetCheckExecutionContext, paths: EvalPaths) -> dg.AssetCheckResult:
        model_key, scenario_key = keys_of(context)
        scenario = paths.catalog().get(scenario_key)
        report = check_partition_scores(
            Warehouse(paths.warehouse), scenario, model_key, scenario_key, context.run.tags.get(SWEEP_ID_TAG)
        )
        return dg.AssetCheckResult(passed=report.passed, description=report.description, metadata=report.metadata())

    return scores_complete_and_in_range


@dg.asset(
    partitions_def=SCENARIO_MODEL,
    group_name=GROUP,
    deps=[rollouts],
    kinds={"parquet"},
    metadata=table_definition("verifications"),
    pool=LLM_POOL,
    automation_condition=dg.AutomationCondition.eager(),
    description="Judge validity: the sweep's rubric_judge scores every stored rollout against its task's rubric; "
    "the verdicts (kind rubric) are compared with the verifiers in rubric_verifier_agreement.",
)
def rubric_verification(context: dg.AssetExecutionContext, paths: EvalPaths) -> dg.MaterializeResult:
    work = _partition_work(context, paths)
    if work is None or work.sweep.rubric_judge is None:
        return dg.MaterializeResult(
            metadata={"judged": 0, "note": "the sweep names no rubric_judge", **table_rows("verifications", 0)}
        )
    model_key, scenario_key = keys_of(context)
    judge_config = shared_runtime(paths.catalog()).resolve(
        model_config_for(work.sweep.rubric_judge, source=f"sweep {work.sweep.name!r}: rubric_judge")
    )
    summary = judge_partition_rubrics(
        Warehouse(paths.warehouse),
        work.scenario,
        model_key,
        scenario_key,
        judge_config,
        max_concurrency=work.sweep.rubric_judge.max_concurrency,
        sweep_id=work.ctx.sweep_id,
    )
    return dg.MaterializeResult(
        metadata={
            "judge": work.sweep.rubric_judge.name,
            "simulated_judge": work.sweep.rubric_judge.is_simulated,
            "judged": summary.judged,
            "passed": summary.passed,
            "errors": summary.errors,
            # one verdict row of kind rubric per judged rollout
            **table_rows("verifications", summary.judged),
        }
    )


def _judge_min_kappa(context: dg.AssetExecutionContext, paths: EvalPaths) -> Callable[[str], float | None]:
    """Each sweep's `min_judge_kappa` for the catalog's `sweep_settings`, as the gate checks find it: by the sweep the
    run's tags name (a CLI sweep), else by the sweep id's config."""
    try:
        sweeps = paths.sweeps()
    except ConfigError as exc:
        context.log.warning(f"judges are flagged against the default min_judge_kappa: {exc}")
        sweeps = {}
    tags = context.run.tags
    launched = sweeps.get(tags.get(SWEEP_TAG, ""))
    sweep_id = tags.get(SWEEP_ID_TAG)
    return judge_min_kappa_of(sweeps, (sweep_id, launched) if sweep_id and launched else None)


#: Rebuild the catalog after any verdict or judgement lands, whoever wrote it (a schedule's run, a backfill, the
#: re-verification sensor, the UI), once the writes in flight are done. Missing upstream partitions do not hold
#: it back: the catalog is a set of views over whatever exists, and the model x scenario grid holds pairs that no
#: sweep asks for (two sweeps with different models and scenarios), which stay missing for good.
CATALOG_CONDITION = (
    dg.AutomationCondition.eager().without(~dg.AutomationCondition.any_deps_missing()).with_label("after_any_update")
)


@dg.asset(
    group_name=GROUP,
    deps=["verification", "rubric_verification", "judgements"],
    kinds={"duckdb"},
    automation_condition=CATALOG_CONDITION,
    description="DuckDB catalog (data/eval.duckdb): views over every Parquet table plus pass_rates and the metric "
    "views. Open it read-only.",
)
def eval_catalog(context: dg.AssetExecutionContext, paths: EvalPaths) -> dg.MaterializeResult:
    summary = build_catalog(paths.warehouse, paths.duckdb, judge_min_kappa=_judge_min_kappa(context, paths))
    latest = pass_rate_summary(paths.duckdb, chart_path=paths.reports / "pass_rates.svg")
    metadata: dict[str, Any] = {
        "path": str(paths.duckdb),
        "views": len(summary.views),
        "row_counts": table_counts(summary.row_counts),
        "latest_sweep": dg.MetadataValue.text(latest.sweep_id or "-"),
        "latest_sweep_pass_rates": dg.MetadataValue.md(f"{latest.table_markdown}\n\n{latest.chart_markdown}"),
    }
    if latest.chart_path is not None:
        metadata["latest_sweep_pass_rate_chart"] = dg.MetadataValue.path(str(latest.chart_path))
    return dg.MaterializeResult(metadata=metadata)


#: Rebuild the report after the catalog, only when the catalog's blocking gates (defs/evals/gates.py) passed, or
#: when the catalog is requested in the same tick: its gates then run in that run (they are requested with it), and
#: a failing one makes Dagster skip the report there. (Dagster's `all_deps_blocking_checks_passed` alone allows
#: the in-tick case too, but may look at a check before this tick has requested it.)
REPORT_CONDITION = dg.AutomationCondition.eager() & (
    dg.AutomationCondition.any_deps_match(dg.AutomationCondition.will_be_requested()).with_label(
        "catalog_requested_with_its_gates"
    )
    | dg.AutomationCondition.all_deps_blocking_checks_passed()
)


@dg.asset(
    group_name=GROUP,
    deps=[eval_catalog],
    kinds={"html"},
    automation_condition=REPORT_CONDITION,
    description="The HTML report of the latest sweep with its SVG charts (data/reports/report.html), as "
    "`eval-pipelines report` writes it; rebuilt after each catalog build whose blocking gates passed.",
)
def eval_report(context: dg.AssetExecutionContext, paths: EvalPaths) -> dg.MaterializeResult:
    try:
        files = build_report(paths.duckdb, paths.report_html)
    except ReportError as exc:  # nothing to report yet (an empty catalog): not a failure of this step
        context.log.info(f"no report: {exc}")
        return dg.MaterializeResult(metadata={"report": dg.MetadataValue.text(f"none: {exc}")})
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(files.html)),
            "sweep_id": dg.MetadataValue.text(files.sweep_id),
            "charts": len(files.charts),
        }
    )
