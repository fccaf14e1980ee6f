"""`eval-pipelines`: run sweeps through Dagster and query the results.

User errors (a bad config, a missing key variable, an unknown scenario) print one line naming the file and
the field, and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipelines.inputs.paths import PROJECT_DIR_ENV, data_dir, project_dir, scenarios_dir, sweeps_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError, ScenarioFiles
from eval_pipelines.inputs.sweeps import (
    ConfigError,
    default_sweep_id,
    load_all_sweeps,
    load_sweep,
    model_config_for,
    run_name,
    selected_task_ids,
    sweep_notices,
    sweep_scenarios,
    unknown_scenario_hint,
    user_model_for,
)
from eval_pipelines.lib.confine import make_undumpable
from eval_pipelines.lib.redact import install_log_redaction
from eval_pipelines.lib.suggest import SuggestingArgumentParser, did_you_mean
from eval_pipelines.lib.sweep_control import StopTally, SweepLock, SweepLocked, SweepStop, stop_on_signals
from eval_pipelines.reports.viewer.links import DEFAULT_HOST as VIEWER_HOST
from eval_pipelines.reports.viewer.links import DEFAULT_PORT as VIEWER_PORT
from eval_pipelines.schemas.sweep import SweepConfig
from eval_pipelines.schemas.taskgen import DEFAULT_NUM_TASKS

if TYPE_CHECKING:  # the CLI imports Dagster (through the runner) only when a sweep runs
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from eval_pipelines.clients.backend import EvaluationBackend, OutageEvent
    from eval_pipelines.defs.reverify import Recorder, ReverifyFailure
    from eval_pipelines.defs.runner import SweepRun
    from eval_pipelines.pipeline.gates import Thresholds
    from eval_pipelines.pipeline.reverification import StoredPartition, VerificationPass

#: A Dagster step of the sweep failed (its run in the UI says why).
EXIT_STEP_FAILED = 1
EXIT_USER_ERROR = 2
#: A gate that holds the report failed (`pipeline/gates.py`: coverage, error_share, parity, judge_agreement), e.g.
#: some model x scenario ended in errors above the sweep's `error_threshold`: its pass rate is not a result.
EXIT_ERRORS = 3
#: `eval-pipelines parity`: our verdict and the upstream grader's differ on a deterministic component.
EXIT_PARITY_DISAGREEMENT = 1


class UserError(Exception):
    pass


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.console import Console

    from eval_pipelines.defs.runner import SweepRun

    console = Console(stderr=True)
    config_path = Path(args.config).resolve() if args.config else sweeps_dir() / "default.yaml"
    sweep = load_sweep(config_path)
    catalog = ScenarioCatalog()
    scenarios = checked_scenarios(sweep, catalog, config_path)
    run = SweepRun(
        sweep=sweep,
        sweep_id=args.sweep_id or default_sweep_id(sweep),
        scenarios=scenarios,
        sweeps_dir=config_path.parent,
        backend=args.backend,
        base_url=args.base_url,
        skip_assessment=args.skip_assessment,
    )
    total = sum(len(selected_task_ids(sweep, s, str(config_path))) * sweep.rollout_count for _, s in run.pairs)
    console.print(
        f"sweep [bold]{sweep.name}[/] id [bold]{run.sweep_id}[/]: {len(sweep.models)} models x {len(scenarios)} "
        f"scenarios x rollout_count {sweep.rollout_count} = {total} rollouts"
    )
    if args.backend != "http":  # a served service's tool host may be elsewhere: its own log says
        from eval_pipelines.pipeline.command_sandbox import sandbox_for, sandbox_warning

        warning = sandbox_warning(sandbox_for(scenarios))
        if warning is not None:
            console.print(f"[yellow]{warning}[/]", markup=True, highlight=False)
    every_scenario = sweep_scenarios(sweep, catalog, str(config_path), runnable_only=False)
    for line in sweep_notices(sweep, every_scenario, str(config_path)):
        console.print(line, markup=False, highlight=False)
    stop = SweepStop()
    held = contextlib.ExitStack()
    try:
        # Signals first: every thread and process the sweep starts (the embedded service's too) inherits them.
        with stop_on_signals(stop), SweepLock(data_dir(), run.sweep_id), held:
            backend = sweep_backend(args, held)
            started = time.monotonic()
            outcome = execute_with_progress(run, backend, total, stop, console)
            elapsed = time.monotonic() - started
    except SweepLocked as locked:
        raise UserError(str(locked)) from None
    code = report_sweep(run, outcome, stop, console)
    if stop.signum is None:
        warn_schedule_pace(sweep, elapsed, console)
    return code


def warn_schedule_pace(sweep: SweepConfig, seconds: float, console: Console) -> None:
    """Warn when the sweep's cron fires more often than this sweep took: under the daemon its ticks would queue
    runs faster than they finish (the schedule's tick logs the same from the runs it sees)."""
    from eval_pipelines.pipeline.schedule_pace import pace_warning

    warning = pace_warning(sweep.name, sweep.cron, last_sweep_seconds=seconds) if sweep.cron else None
    if warning is not None:
        console.print(f"warning: {warning}", style="yellow", markup=False, highlight=False)


def checked_scenarios(sweep: SweepConfig, catalog: ScenarioCatalog, config_path: Path) -> list[ScenarioFiles]:
    """The sweep's scenarios, once everything a run would fail on is known to be right (exit 2 otherwise)."""
    from eval_pipelines.benchmarks.catalog import ensure_materialised

    load_all_sweeps(config_path.parent)  # the assets read every config beside this one: fail here, by name
    # The benchmarks the sweep names are made (once per pinned version) before its scenarios are resolved.
    scenarios = sweep_scenarios(sweep, catalog, source=str(config_path), prepare=ensure_materialised)
    for scenario in scenarios:
        chosen = selected_task_ids(sweep, scenario, str(config_path))  # an entry's unknown task or split fails here
        for model in sweep.models:
            user_model_for(sweep, model, scenario, chosen, str(config_path))  # a simulated user needs its model
    known_tasks = {task_id for s in scenarios for task_id in s.tasks()}
    for index, task_id in enumerate(sweep.task_ids or []):
        if task_id not in known_tasks:
            raise UserError(
                f"{config_path}: task_ids[{index}]: unknown task {task_id!r} in scenarios "
                f"{[s.scenario_id for s in scenarios]}"
            )
    for model in sweep.models:
        model_config_for(model, source=str(config_path))  # a missing key variable fails here, before any run
    preflight(sweep, scenarios, config_path)
    return list(scenarios)


def sweep_backend(args: argparse.Namespace, held: contextlib.ExitStack) -> EvaluationBackend:
    """The service the sweep's progress is read from, held open for the whole sweep by `held`. The embedded
    service is started here once, so every partition's run shares it rather than starting its own."""
    from eval_pipelines.defs.runner import SERVICE_KEY_ENV

    if args.backend != "http":
        from eval_pipelines.local.services import local_evaluation_service

        local = held.enter_context(local_evaluation_service(data_dir(), scenarios_dir()))
        embedded = local.backend()
        held.callback(embedded.close)
        return embedded
    if not args.base_url:
        raise UserError("--backend http needs --base-url (the evaluation service's address)")
    if not os.environ.get(SERVICE_KEY_ENV):
        raise UserError(f"--backend http needs the service's API key in the environment variable {SERVICE_KEY_ENV}")
    from eval_pipelines.clients.backend import EvaluationBackend
    from eval_pipelines.clients.evaluation import EvaluationClient, EvaluationClientSync

    # The progress bar only reads counts: it says the service is away and goes on drawing, while the sweep's own
    # steps (Dagster's resource, another backend) wait for it to come back.
    client = EvaluationClientSync(EvaluationClient(args.base_url, os.environ[SERVICE_KEY_ENV]))
    remote = EvaluationBackend(client, outage_seconds=0)
    held.callback(remote.close)
    return remote


@dataclass
class SweepOutcome:
    failures: list[str]
    crashed: BaseException | None = None
    #: What the sweep's rollouts ended as, counted once a stop request ended it (None otherwise).
    stopped: StopTally | None = None


class OutageStatus:
    """The evaluation service's outage on the sweep's progress bar: an outage listener (`clients.backend`) that
    puts "evaluation service unreachable ..." in the bar's description while any call of this process waits for
    the service, and gives the bar its own description back once the service answers. The log file still gets the
    client's waiting and recovery lines; this is what the user sees meanwhile, instead of a stalled bar."""

    def __init__(self, progress: Progress, bar: TaskID, description: str = "rollouts") -> None:
        self._progress = progress
        self._bar = bar
        self._normal = description
        self._waiting: dict[str, OutageEvent] = {}
        self._lock = threading.Lock()

    @property
    def text(self) -> str | None:
        """The outage line, None while every service answers."""
        with self._lock:
            event = max(self._waiting.values(), key=lambda e: e.attempt, default=None)
        if event is None:
            return None
        return (
            f"evaluation service unreachable at {event.url}, waiting up to {event.limit_seconds:.0f} s "
            f"(attempt {event.attempt})"
        )

    def __call__(self, event: OutageEvent) -> None:
        with self._lock:
            if event.state == "waiting":
                self._waiting[event.url] = event
            else:  # recovered, or the call gave up and fails its step (which says so)
                self._waiting.pop(event.url, None)
        self._progress.update(self._bar, description=self.describe(None))

    def describe(self, normal: str | None) -> str:
        """The bar's description: `normal` (kept for when the outage ends), unless an outage is going on."""
        if normal is not None:
            self._normal = normal
        return self.text or self._normal


def sweep_progress(console: Console) -> Progress:
    """The sweep's progress bar: description, bar, rollouts done of total, errors, elapsed and remaining time."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[errors]}"))
    timing = (TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    return Progress(*columns, *timing, console=console, transient=False)


def execute_with_progress(
    run: SweepRun, backend: EvaluationBackend, total: int, stop: SweepStop, console: Console
) -> SweepOutcome:
    """Run the sweep on a worker thread and draw its progress bar from this one, which also sees SIGINT and
    SIGTERM (Dagster takes over signals only on the main thread) and cancels the active runs when asked."""
    from eval_pipelines.clients.backend import SERVICE_DOWN_ERRORS, outage_listener
    from eval_pipelines.lib.step_log import StepLog, sweep_log_path

    names = [run_name(run.sweep_id, s.scenario_id, m.name) for m, s in run.pairs]
    outcome = SweepOutcome(failures=["sweep"])
    # Dagster's log lines and Python's warnings go to this file while the bar is drawn, not over it.
    step_log = StepLog(sweep_log_path(data_dir(), run.sweep_id), f"eval-pipelines sweep {run.sweep_id}")

    def execute() -> None:
        try:
            outcome.failures = run.execute(lambda model, scenario: None, stop)
        except Exception as exc:  # reported once, without a traceback on the user's terminal
            outcome.crashed = exc

    worker = threading.Thread(target=execute, name="sweep", daemon=True)
    with sweep_progress(console) as progress, step_log:
        bar = progress.add_task("rollouts", total=total, errors="")
        outage = OutageStatus(progress, bar)
        with outage_listener(outage):
            worker.start()
            cancelled = False
            while worker.is_alive():
                stop.wait(PROGRESS_SECONDS)
                try:
                    runs = [found for name in names if (found := backend.find_run(name)) is not None]
                    if stop.requested and not cancelled:
                        progress.update(bar, description=outage.describe(f"stopping ({stop.signal_name})"))
                        for found in runs:
                            if not found.is_finished:
                                backend.cancel(found.run_id)
                        cancelled = True
                except SERVICE_DOWN_ERRORS:
                    # The sweep's steps wait for the service to come back (or fail once the wait runs out).
                    progress.update(bar, description=outage.text or f"evaluation service unreachable at {backend.url}")
                    continue
                errors = sum(r.errors for r in runs)
                active = next((r for r in runs if not r.is_finished), None)
                description = "rollouts" if active is None else active.run_name or active.scenario_id
                progress.update(
                    bar,
                    completed=sum(r.total - r.pending - r.running for r in runs),
                    description=outage.describe(f"stopping ({stop.signal_name})" if cancelled else description),
                    errors=f"[red]{errors} errors[/]" if errors else "",
                )
        progress.update(bar, description="stopped" if stop.requested else "done")
    if step_log.lines:
        console.print(f"Dagster's log of the sweep's steps (warnings, errors): {step_log.path}", soft_wrap=True)
    if stop.requested:
        outcome.stopped = stop_tally(backend, names, total)
    return outcome


def stop_tally(backend: EvaluationBackend, names: Sequence[str], total: int) -> StopTally | None:
    """What the sweep's rollouts ended as once a stop ended it, read back from the service (None when it
    cannot be reached): a cancel reaches a rollout mid-step, and one that finishes its step first completes."""
    from eval_pipelines.clients.backend import PAGE_SIZE, SERVICE_DOWN_ERRORS
    from eval_pipelines.schemas.runs import RolloutStatus, TerminationReason

    tally = StopTally(not_run=total)
    try:
        for name in names:
            found = backend.find_run(name)
            if found is None:
                continue
            tally.not_run -= found.total
            for page in backend.rollout_pages(found.run_id, PAGE_SIZE):
                for rollout in page:
                    if rollout.status == RolloutStatus.COMPLETED:
                        tally.completed += 1
                    elif rollout.termination_reason == TerminationReason.CANCELLED.value:
                        tally.cancelled += 1
                    elif rollout.status.is_terminal:
                        tally.failed += 1
                    else:
                        tally.not_run += 1
    except SERVICE_DOWN_ERRORS:
        return None
    return tally


def report_sweep(run: SweepRun, outcome: SweepOutcome, stop: SweepStop, console: Console) -> int:
    """What the user reads at the end, and the exit code (see the README's table)."""
    from eval_pipelines.reports.data import ReportError, pass_rate_rows

    if outcome.crashed is not None:
        crash = outcome.crashed
        print(f"eval-pipelines: the sweep stopped: {type(crash).__name__}: {crash}", file=sys.stderr)
        return EXIT_STEP_FAILED
    if run.user_errors:
        for line in dict.fromkeys(run.user_errors):
            print(f"eval-pipelines: error: {line}", file=sys.stderr)
        return EXIT_USER_ERROR
    if stop.signum is not None:
        console.print(stop.summary(outcome.stopped) + "; run the same command to resume")
        return 128 + stop.signum
    if run.abandoned_runs:
        console.print(f"marked {run.abandoned_runs} run(s) of a killed sweep as failed and freed their pool slots")
    try:
        _, rows = pass_rate_rows(run.paths().duckdb, run.sweep_id)
    except ReportError as exc:  # no catalog: every pair failed before writing one
        console.print(f"no pass rates: {exc}")
        rows = []
    print_pass_rates(rows, sweep_id=run.sweep_id)
    print_comparisons(run.paths().duckdb, run.sweep_id, run.sweep)
    from eval_pipelines.pipeline.gates import Thresholds, planned_rollouts

    planned = planned_rollouts(run.sweep, ScenarioCatalog())
    return sweep_exit_code(run.paths().duckdb, run.sweep_id, Thresholds.of(run.sweep), outcome.failures, planned)


#: How often the progress bar reads the runs' counts.
PROGRESS_SECONDS = 0.5
#: How often `reverify` looks whether its work ended: a re-verification of a few partitions takes a second or two,
#: and half a second of PROGRESS_SECONDS after it would be a noticeable share of it.
REVERIFY_POLL_SECONDS = 0.05


def sweep_exit_code(
    duckdb_path: Path,
    sweep_id: str,
    thresholds: Thresholds,
    failures: Sequence[str],
    planned: Mapping[tuple[str, str], int] | None = None,
) -> int:
    """Say what makes the sweep's numbers untrustworthy, one line each, and choose the exit code: a gate that
    failed (EXIT_ERRORS; the verdict `eval_catalog`'s blocking checks record), then a Dagster step that failed
    (EXIT_STEP_FAILED)."""
    gates_failed = print_gate_verdict(duckdb_path, sweep_id, thresholds, planned) if duckdb_path.is_file() else False
    if failures:
        print(f"eval-pipelines: failed: {', '.join(failures)} (see `dagster dev -w workspace.yaml`)", file=sys.stderr)
    if gates_failed:
        return EXIT_ERRORS
    return EXIT_STEP_FAILED if failures else 0


def print_gate_verdict(
    duckdb_path: Path, sweep_id: str | None, thresholds: Thresholds, planned: Mapping[tuple[str, str], int] | None
) -> bool:
    """Print each failing gate's lines (naming the gate) to stderr; True when some gate failed."""
    from eval_pipelines.pipeline.gates import evaluate_gates

    verdict = evaluate_gates(duckdb_path, sweep_id, thresholds, planned)
    for line in verdict.lines():
        print(f"eval-pipelines: {line}", file=sys.stderr)
    if not verdict.passed:
        names = ", ".join(r.gate for r in verdict.failed)
        print(f"eval-pipelines: not published: gate(s) {names} failed", file=sys.stderr)
    return not verdict.passed


def preflight(sweep: SweepConfig, scenarios: Sequence[ScenarioFiles], config_path: Path) -> None:
    """Refuse, before anything runs, what every rollout would fail on: a run larger than the service takes, or a
    verifier package that cannot even be imported (checked in the contained worker verifiers run in)."""
    from eval_pipelines.schemas.limits import DEFAULT_MAX_ROLLOUTS_PER_RUN
    from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, WorkerStartError

    for scenario in scenarios:
        tasks = len(selected_task_ids(sweep, scenario, str(config_path)))
        if tasks * sweep.rollout_count > DEFAULT_MAX_ROLLOUTS_PER_RUN:
            raise UserError(
                f"{config_path}: rollout_count: {sweep.rollout_count} x {tasks} tasks of {scenario.scenario_id} "
                f"is more than the {DEFAULT_MAX_ROLLOUTS_PER_RUN} rollouts one run may hold"
            )

    def load(scenario: ScenarioFiles) -> str | None:
        if not (scenario.verifiers_dir / "__init__.py").is_file():
            return None
        try:
            with IsolatedVerifierRunner(scenario.verifiers_dir) as runner:
                runner.start()
        except WorkerStartError as exc:
            return f"{scenario.verifiers_dir}: the verifier package cannot be loaded: {exc}"
        return None

    with ThreadPoolExecutor(max_workers=len(scenarios) or 1) as pool:
        problems = [p for p in pool.map(load, scenarios) if p]
    if problems:
        raise UserError(problems[0])


def print_pass_rates(rows: Sequence[dict[str, Any]], sweep_id: str) -> None:
    """One sweep's pass rates with their task-clustered 95% t-intervals (scenario_model_metrics). Errored
    rollouts are not in n or the rate: their count stands beside them."""
    from rich.console import Console
    from rich.table import Table

    from eval_pipelines.reports import model_label
    from eval_pipelines.reports.data import simulator_error_note
    from eval_pipelines.reports.viewer.links import rollouts_link

    table = Table(title=f"Pass rates: sweep {sweep_id}", caption="errors: rollouts that say nothing about the model")
    columns = (
        "scenario", "model", "tasks", "n", "passes", "pass rate", "95% CI", "errors", "variance", "std", "$/rollout"
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column in ("scenario", "model") else "right")
    for row in rows:
        low, high = row["ci_t_low"], row["ci_t_high"]
        interval = "-" if low is None or high is None else f"{max(low, 0.0):.2f}-{min(high, 1.0):.2f}"
        n_errors = row.get("n_errors") or 0
        errors = f"{n_errors} ({row['error_share']:.0%}{simulator_error_note(row)})" if n_errors else "0"
        table.add_row(
            row["scenario_id"],
            model_label(row["model_name"], row["is_simulated"]),
            str(row["n_tasks"]),
            str(row["n"]),
            str(row["passes"]),
            _rate(row["pass_rate"]),
            interval,
            f"[red]{errors}[/]" if n_errors else errors,
            _rate(row["variance"]),
            _rate(row["std"]),
            _cost(row.get("cost_per_rollout_usd")),
        )
    console = Console(width=150)
    console.print(table)
    if rows:
        # rich would wrap a long URL mid-way; a terminal links it whole
        print(f"every rollout, with transcripts and state diffs: eval-pipelines view, then {rollouts_link(sweep_id)}")


def print_comparisons(duckdb_path: Path, sweep_id: str, sweep: SweepConfig) -> None:
    """Each model against the sweep's `baseline_model` (else each pair once), paired by task and epoch: the
    difference beside the smallest this sweep could see (MDD: 80% power, alpha 0.05), the paired tests, and the
    epochs per task the sweep's `detectable_difference` would need (`model_comparison`)."""
    from rich.console import Console
    from rich.table import Table

    from eval_pipelines.reports import model_label
    from eval_pipelines.reports.comparisons import comparison_rows, epochs_for
    from eval_pipelines.reports.data import ReportError, open_catalog

    try:
        con = open_catalog(duckdb_path)
    except ReportError:  # no catalog: the pass-rate table already said so
        return
    try:
        rows = comparison_rows(con, sweep_id, sweep.baseline_model)
    finally:
        con.close()
    if not rows:
        return
    baseline = sweep.baseline_model if all(r["model_b"] == sweep.baseline_model for r in rows) else None
    target = sweep.detectable_difference
    table = Table(
        title=f"Paired comparisons{f' against {baseline}' if baseline else ''}: sweep {sweep_id}",
        caption="points; MDD: the smallest difference this sweep detects with 80% power (alpha 0.05)",
    )
    columns = (
        "scenario", "A", "B", "tasks", "epochs", "diff", "95% CI", "p (tasks)", "McNemar p", "MDD",
        f"epochs for {target * 100:g} pts",
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column in ("scenario", "A", "B") else "right")
    for row in rows:
        needed = epochs_for(row, target)
        low, high = row["ci_low"], row["ci_high"]
        table.add_row(
            row["scenario_id"],
            model_label(row["model_a"], row["a_is_simulated"]),
            model_label(row["model_b"], row["b_is_simulated"]),
            str(row["n_tasks"]),
            "-" if row["epochs"] is None else f"{row['epochs']:g}",
            _points(row["diff"], signed=True),
            "-" if low is None or high is None else f"{low * 100:+.1f} to {high * 100:+.1f}",
            _rate(row["p_value"]),
            _rate(row["mcnemar_p_value"]),
            _points(row["mdd"]),
            str(needed) if needed is not None else ("more tasks" if row["sigma2_within"] is not None else "-"),
        )
    Console(width=150).print(table)


def _points(value: float | None, *, signed: bool = False) -> str:
    """A difference of pass rates in percentage points."""
    if value is None:
        return "-"
    return f"{value * 100:+.1f}" if signed else f"{value * 100:.1f}"


def _cost(value: float | None) -> str:
    """A NULL cost (no model price known) is unknown, never $0, which would read as free."""
    from eval_pipelines.reports.data import UNKNOWN_COST

    return UNKNOWN_COST if value is None else f"{value:.4f}"


def _rate(value: float | None) -> str:
    """A NULL rate (no scored rollout: all errored) is shown as such, never as 0."""
    return "-" if value is None else f"{value:.3f}"


def cmd_reverify(args: argparse.Namespace) -> int:
    """Re-verify stored rollouts with the scenarios' current verifiers, then compare the pass rates by version."""
    from eval_pipelines.defs.reverify import Recorder

    with Recorder() as recorder:  # imports Dagster meanwhile the partitions are selected (defs/reverify.py)
        return _reverify_command(args, recorder)


def _reverify_command(args: argparse.Namespace, recorder: Recorder) -> int:
    from rich.console import Console

    from eval_pipelines.pipeline.reverification import stored_partitions, stored_sweep_ids, version_pass_rates
    from eval_pipelines.warehouse.store import Warehouse

    console = Console(stderr=True)
    catalog = ScenarioCatalog()
    scenario_ids = known_scenario_ids(args.scenario, catalog) if args.scenario else None
    warehouse = Warehouse(data_dir() / "warehouse")
    found = stored_partitions(warehouse, catalog, scenario_ids=scenario_ids, sweep_id=args.sweep)
    if args.sweep is not None and not found and args.sweep not in (known := stored_sweep_ids(warehouse)):
        raise UserError(
            f"--sweep: no stored rollouts of sweep {args.sweep!r}; sweeps in the warehouse: {known}"
            f"{did_you_mean(args.sweep, known)}"
        )
    selected = found if args.all else [p for p in found if p.stale]
    if not selected:
        of_sweep = f" of sweep {args.sweep}" if args.sweep else ""
        why = (
            f"every stored rollout{of_sweep} has verdicts at its scenario's current verifier version "
            "(--all re-verifies them anyway)"
            if found
            else f"no stored rollouts{of_sweep} of the selected scenarios"
        )
        print(f"nothing to re-verify: {why}")
        return 0
    for scenario_id, version in sorted({(p.scenario.scenario_id, p.verifier_version) for p in selected}):
        mine = [p for p in selected if p.scenario.scenario_id == scenario_id]
        console.print(
            f"{scenario_id} at verifier version [bold]{version}[/]: {len(mine)} model(s), "
            f"{sum(p.unscored for p in mine)} of {sum(p.rollouts for p in mine)} rollouts without a verdict at it"
        )
    stop = SweepStop()
    with stop_on_signals(stop):
        failures = reverify_with_progress(selected, args.sweep, stop, console, recorder)
    if stop.signum is not None:
        console.print(f"stopped by {stop.signal_name}: run the same command to re-verify the rest")
        return 128 + stop.signum
    duckdb_path = data_dir() / "eval.duckdb"
    # A failed catalog rebuild leaves the old catalog, whose table would show the verdicts from before.
    if not any(f.name in ("eval_catalog", "reverify") for f in failures) and duckdb_path.is_file():
        verified = [p for p in selected if not any(f.partition is p for f in failures)]
        passes = version_pass_rates(duckdb_path, verified, sweep_id=args.sweep)
        if passes:
            print_version_pass_rates(passes)  # meanwhile the recorder records them in Dagster
    if (recorded := recorder.wait()) is not None:
        failures.append(recorded)
    for failure in failures:
        print(f"eval-pipelines: failed: {failure.name}: {failure.cause}", file=sys.stderr)
    if failures:
        print("eval-pipelines: the failed run is in the Dagster UI (`dagster dev -w workspace.yaml`)", file=sys.stderr)
    return EXIT_STEP_FAILED if failures else 0


def known_scenario_ids(requested: Sequence[str], catalog: ScenarioCatalog) -> list[str]:
    """The catalog's ids of the requested scenarios (an id, a partition key or a family); exit 2 on an unknown one."""
    ids = []
    for raw in requested:
        try:
            ids.append(catalog.get(raw).scenario_id)
        except KeyError:
            raise UserError(
                f"--scenario: unknown scenario {raw!r}; known scenarios: {catalog.ids()}"
                f"{unknown_scenario_hint(raw, catalog)}"
            ) from None
    return sorted(set(ids))


def reverify_with_progress(
    partitions: Sequence[StoredPartition],
    sweep_id: str | None,
    stop: SweepStop,
    console: Console,
    recorder: Recorder | None = None,
) -> list[ReverifyFailure]:
    """Re-verify on a worker thread and draw the progress bar from this one, which also sees SIGINT and SIGTERM
    (Dagster takes over signals only on the main thread): a signal lets the current partition finish."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from eval_pipelines.defs.reverify import ReverifyFailure, reverify_partitions

    failures: list[ReverifyFailure] = []
    crashed: list[BaseException] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("re-verifying", total=len(partitions))

        def on_progress(done: int, current: StoredPartition | None) -> None:
            description = current.label if current is not None else "rebuilding the catalog"
            progress.update(bar, completed=done, description=description)

        def execute() -> None:
            try:
                failures.extend(
                    reverify_partitions(
                        partitions, sweep_id=sweep_id, on_progress=on_progress, stop=stop, recorder=recorder
                    )
                )
            except Exception as exc:  # reported once, without a traceback on the user's terminal
                crashed.append(exc)

        worker = threading.Thread(target=execute, name="reverify", daemon=True)
        worker.start()
        while worker.is_alive():
            stop.wait(REVERIFY_POLL_SECONDS)
            if stop.requested:
                progress.update(bar, description=f"stopping ({stop.signal_name})")
        progress.update(bar, description="stopped" if stop.requested else "done")
    if crashed:
        return [ReverifyFailure("reverify", f"it stopped: {type(crashed[0]).__name__}: {crashed[0]}")]
    return failures


def print_version_pass_rates(passes: Sequence[VerificationPass]) -> None:
    """Each re-verified sweep x scenario x model's pass rate at every verification pass, oldest first, the current
    one last; `change` is against the pass before, and the verifiers column says which verifier changed."""
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title="Pass rates by verifier version",
        caption="one row per verification pass, the last of each group is the current version; errors are not in n",
    )
    columns = (
        "scenario",
        "model",
        "sweep",
        "verified (UTC)",
        "verifiers changed",
        "n",
        "pass rate",
        "errors",
        "change",
    )
    for column in columns:
        table.add_column(column, justify="right" if column in ("n", "pass rate", "errors", "change") else "left")
    groups: dict[tuple[str, str, str], list[VerificationPass]] = {}
    for found in passes:
        groups.setdefault((found.scenario_id, found.model_name, found.sweep_id), []).append(found)
    for (scenario_id, model_name, sweep_id), group in groups.items():
        for index, current in enumerate(group):
            before = group[index - 1] if index else None
            changed = "" if before is None else ", ".join(current.changed_verifiers(before)) or "none"
            change = "" if before is None else _change(before.pass_rate, current.pass_rate)
            table.add_row(
                scenario_id if index == 0 else "",
                model_name if index == 0 else "",
                sweep_id if index == 0 else "",
                current.verified_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
                changed,
                str(current.n),
                _rate(current.pass_rate),
                str(current.n_errors),
                change,
                style="bold" if index == len(group) - 1 else None,
                end_section=index == len(group) - 1,
            )
    Console(width=150).print(table)


def _change(before: float | None, after: float | None) -> str:
    return "-" if before is None or after is None else f"{after - before:+.3f}"


def cmd_report(args: argparse.Namespace) -> int:
    from eval_pipelines.lib.progress import ProgressReporter
    from eval_pipelines.reports import ReportError, build_report

    db = Path(args.db) if args.db else data_dir() / "eval.duckdb"
    if db.is_file() and report_gates_failed(db, args.sweep) and not args.ignore_gates:
        return EXIT_ERRORS
    try:
        with ProgressReporter(None, "report", transient=True) as progress:
            out = Path(args.out) if args.out else data_dir() / "reports" / "report.html"
            files = build_report(db, out, sweep_id=args.sweep, progress=progress)
    except ReportError as exc:
        raise UserError(str(exc)) from None
    print(f"sweep {files.sweep_id}: {files.html}")
    for chart in files.charts.values():
        print(f"  {chart}")
    return 0


def report_gates_failed(db: Path, sweep_id: str | None) -> bool:
    """The gates of the sweep the report would show, with its config's thresholds (the defaults when no config
    of the project names it); True, after printing why, when one fails and the report must not be written."""
    from eval_pipelines.pipeline.gates import Thresholds, latest_sweep_id, planned_rollouts, sweep_config_for

    sweep_id = sweep_id or latest_sweep_id(db)
    if sweep_id is None:
        return False  # an empty catalog: the report says so
    try:
        sweep = sweep_config_for(sweep_id, load_all_sweeps(sweeps_dir()))
    except ConfigError as exc:
        print(f"eval-pipelines: the gates use their default thresholds: {exc}", file=sys.stderr)
        sweep = None
    planned = planned_rollouts(sweep, ScenarioCatalog()) if sweep is not None else None
    return print_gate_verdict(db, sweep_id, Thresholds.of(sweep), planned)


def cmd_export(args: argparse.Namespace) -> int:
    from eval_pipelines.reports import ReportError
    from eval_pipelines.reports.export import export_results

    db = Path(args.db) if args.db else data_dir() / "eval.duckdb"
    try:
        summary = export_results(
            db,
            Path(args.out),
            args.format,
            sweep_id=args.sweep,
            model_name=args.model,
            scenario_id=args.scenario,
            include_errors=args.include_errors,
        )
    except ReportError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"cannot write {args.out}: {exc}") from None
    left_out = (
        f", {summary.left_out} errored or unscored left out (--include-errors keeps them)" if summary.left_out else ""
    )
    print(f"sweep {summary.sweep_id}: {summary.rollouts} rollouts exported as {summary.format}{left_out}")
    for path in summary.files:
        print(f"  {path}")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    """Serve the results viewer in the foreground until Ctrl-C."""
    from eval_pipelines.reports import ReportError
    from eval_pipelines.reports.viewer.app import serve

    db = Path(args.db) if args.db else data_dir() / "eval.duckdb"
    try:
        serve(db, args.host, args.port, announce=lambda line: print(line, flush=True))
    except ReportError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:  # the port is taken, or the host is not an address of this machine
        raise UserError(f"cannot listen on {args.host}:{args.port}: {exc}") from None
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from eval_pipelines.inputs.paths import scenarios_dir
    from eval_pipelines.inputs.simlab_bundle import BundleImportError, import_bundle

    target = Path(args.scenarios_dir) if args.scenarios_dir else scenarios_dir()
    try:
        report = import_bundle(
            Path(args.bundle),
            target,
            args.scenario_id,
            overwrite=args.overwrite,
            servers_file=Path(args.servers) if args.servers else None,
            simlab_package=Path(args.simlab_package) if args.simlab_package else None,
            allow_ungraded=args.allow_ungraded,
        )
    except BundleImportError as exc:
        raise UserError(str(exc)) from None
    print("\n".join(report.lines()))
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    """Each task of the scenarios named (default: every one but the materialised benchmarks): runnable, or why not."""
    catalog = ScenarioCatalog()
    scenarios = [s for s in catalog.all() if not s.benchmark] if not args.scenario else []
    for raw in args.scenario:
        try:
            scenarios.append(catalog.get(raw))
        except KeyError:
            raise UserError(
                f"unknown scenario {raw!r}; known: {catalog.ids()}{unknown_scenario_hint(raw, catalog)}"
            ) from None
    for scenario in scenarios:
        tasks = list(scenario.tasks().values())
        unrunnable = [t for t in tasks if t.unrunnable_reason]
        print(f"{scenario.scenario_id}: {len(tasks)} task(s), {len(unrunnable)} unrunnable")
        for task in unrunnable if args.unrunnable else tasks:
            print(
                f"  {task.task_id}: "
                + (f"UNRUNNABLE: {task.unrunnable_reason}" if task.unrunnable_reason else "runnable")
            )
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    import duckdb

    from eval_pipelines.pipeline.summary import markdown_table

    path = Path(args.db) if args.db else data_dir() / "eval.duckdb"
    if not path.is_file():
        raise UserError(f"{path}: no catalog yet; run `eval-pipelines sweep` first")
    # What `warehouse.catalog.connect_read_only` does, without importing the catalog builder and its modules.
    con = duckdb.connect(str(path.resolve()), read_only=True)
    try:
        cursor = con.execute(args.query)
        names = [d[0] for d in cursor.description or []]
        rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
    except duckdb.Error as exc:
        raise UserError(f"query failed: {exc}") from None
    finally:
        con.close()
    if args.format == "json":
        print(json.dumps(rows, default=str, indent=2))
    elif args.format == "csv":
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=names)
        writer.writeheader()
        writer.writerows(rows)
    else:
        print(markdown_table(rows))
    return 0


def cmd_generate_tasks(args: argparse.Namespace) -> int:
    from eval_pipelines.pipeline.generation import generate_into_catalog, load_toolset, toolset_from_server
    from eval_pipelines.taskgen import BundleError, TaskGenFailed, TaskGenRequestError

    try:
        toolset = load_toolset(Path(args.toolset)) if args.toolset else toolset_from_server(args.tool_server_url)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the toolset: {exc}") from None
    options = {
        "num_tasks": args.num_tasks,
        "preset": args.preset,
        "model": args.model,
        "diversity": {"seed": args.seed} if args.seed is not None else None,
    }
    try:
        results, folder = generate_into_catalog(
            toolset,
            scenarios_dir(),
            args.scenario_id,
            options,
            progress=lambda text: print(text, file=sys.stderr),
            overwrite=args.overwrite,
        )
    except TaskGenRequestError as exc:
        raise UserError(str(exc)) from None
    except (TaskGenFailed, BundleError) as exc:
        print(f"eval-pipelines: task generation failed: {exc}", file=sys.stderr)
        return 1
    from eval_pipelines.defs.runner import register_scenario_partition

    register_scenario_partition(args.scenario_id)
    summary = results.filter_summary or {}
    print(f"wrote {len(results.tasks)} tasks to {folder}; filter summary: {json.dumps(summary, default=str)}")
    return 0


def use_project_dir(path: Path) -> None:
    """Make `path` the project directory of this process and of every process it starts (services, workers,
    Dagster runs), which read it from the environment."""
    if not path.is_dir():
        raise UserError(f"--project-dir: {path} is not a directory")
    os.environ[PROJECT_DIR_ENV] = str(path.resolve())


def cmd_init(args: argparse.Namespace) -> int:
    from eval_pipelines.inputs.scaffold import ScaffoldError, scaffold_project

    root = Path(args.directory) if args.directory else project_dir()
    production = args.postgres or args.celery
    # In a project that already exists, --postgres/--celery add the production files and leave the rest alone.
    production_only = production and (root / "workspace.yaml").is_file()
    try:
        made = scaffold_project(
            root, force=args.force, postgres=args.postgres, celery=args.celery, production_only=production_only
        )
    except ScaffoldError as exc:
        raise UserError(str(exc)) from None
    for path in made.written:
        print(f"wrote {path.relative_to(made.root)}")
    where = "" if made.root == Path.cwd().resolve() else f"cd {made.root} && "
    if production:
        print(init_production_next(made.root, celery=args.celery))
    print(f"next: {where}eval-pipelines sweep   (then `dagster dev -w workspace.yaml` for the UI)")
    return 0


def init_production_next(root: Path, *, celery: bool) -> str:
    """What a production project needs besides its files: the environment, and the worker command."""
    from eval_pipelines.inputs.scaffold import CELERY_WORKER_COMMAND, CELERY_WORKER_SCRIPT

    extras = "celery,postgres" if celery else "postgres"
    lines = [
        f"dagster.yaml now stores runs in Postgres (needs: pip install 'eval_pipelines[{extras}]'); set, wherever "
        "Dagster or a worker runs:",
        f"  export DAGSTER_HOME={root} DAGSTER_PG_HOST=... DAGSTER_PG_PORT=5432 DAGSTER_PG_USERNAME=... "
        "DAGSTER_PG_PASSWORD=... DAGSTER_PG_DB=...",
        "  dagster instance concurrency set llm_api 4   # once per database, before the first sweep",
    ]
    if celery:
        lines += [
            "Celery workers (same environment, plus the broker and a shared data folder):",
            "  export DAGSTER_CELERY_BROKER_URL=redis://HOST:6379/0 DAGSTER_CELERY_BACKEND_URL=redis://HOST:6379/1 "
            "EVAL_PIPELINES_DATA_DIR=/shared/eval-data",
            f"  {CELERY_WORKER_SCRIPT}   # runs: {CELERY_WORKER_COMMAND}",
            "  EVAL_PIPELINES_EXECUTOR=celery dagster dev -w workspace.yaml   # sweeps' schedules use the Celery job",
        ]
    lines.append("check it with: eval-pipelines doctor")
    return "\n".join(lines)


def cmd_doctor(args: argparse.Namespace) -> int:
    """What is installed, what is running, where the data is, whether the sandbox is on; 1 when something
    configured is missing or unreachable, or commands are not sandboxed."""
    from eval_pipelines.local.doctor import diagnose, render

    sections = diagnose()
    print(render(sections))
    return 0 if all(line.ok for section in sections for line in section.lines) else 1


def cmd_serve(args: argparse.Namespace) -> int:
    """Run a local service in the foreground; each service parses its own options."""
    if args.service == "platform":
        from eval_pipelines.platform.serve import main as serve_platform

        return serve_platform(args.options)
    from eval_pipelines.service.serve import main as serve_eval_service

    return serve_eval_service(args.options)


def cmd_sandbox(args: argparse.Namespace) -> int:
    """Say how `run_command` isolates a model's commands on this host; 1 when the namespaces are missing."""
    from eval_pipelines.toolservers.files import SANDBOX_NAMESPACES, command_sandbox

    sandbox = command_sandbox()
    print(f"run_command sandbox: {sandbox.mode}" + (f" ({sandbox.reason})" if sandbox.reason else ""))
    return 0 if sandbox.mode == SANDBOX_NAMESPACES else 1


def cmd_parity(args: argparse.Namespace) -> int:
    """Grade a sweep's benchmark rollouts with the benchmarks' own graders and compare with our verdicts."""
    import asyncio

    from eval_pipelines.benchmarks.parity import ParityError, catalog_tasks, run_parity, summary_lines
    from eval_pipelines.warehouse.catalog import build_catalog

    warehouse_root = data_dir() / "warehouse"
    try:
        report = asyncio.run(
            run_parity(warehouse_root, args.sweep, task_of=catalog_tasks(ScenarioCatalog()), benchmark=args.benchmark)
        )
    except ParityError as exc:
        raise UserError(str(exc)) from None
    if report.files:  # the viewer and `eval-pipelines sql` read the `parity` view from the catalog
        build_catalog(warehouse_root, data_dir() / "eval.duckdb", judge_min_kappa=project_judge_min_kappa())
    print("\n".join(summary_lines(report, args.show)))
    return EXIT_PARITY_DISAGREEMENT if report.deterministic_disagreements else 0


def project_judge_min_kappa() -> Callable[[str], float | None]:
    """Each sweep's `min_judge_kappa` from the project's sweep configs, for a catalog this command rebuilds (its
    `sweep_settings`, what the report and the viewer flag judges against); the default for a sweep none names."""
    from eval_pipelines.pipeline.gates import judge_min_kappa_of

    try:
        sweeps = load_all_sweeps(sweeps_dir())
    except ConfigError as exc:
        print(f"eval-pipelines: judges are flagged against the default min_judge_kappa: {exc}", file=sys.stderr)
        sweeps = {}
    return judge_min_kappa_of(sweeps)


def cmd_benchmarks(args: argparse.Namespace) -> int:
    """`benchmarks install [NAME...]`: make the upstream venvs ahead of a sweep; `benchmarks list`: what exists."""
    from eval_pipelines.benchmarks import catalog
    from eval_pipelines.benchmarks.environments import ensure, is_installed, venv_dir

    adapters = catalog.adapters()
    if args.action == "list":
        for name, adapter in sorted(adapters.items()):
            made = [f for f in adapter.families if catalog.is_materialised(f)]
            state = "installed" if is_installed(adapter.environment) else "not installed"
            print(f"{name} {adapter.version}: {adapter.environment.label}, {state} ({venv_dir(adapter.environment)})")
            for family in adapter.families:
                print(f"  {family}" + (" (materialised)" if family in made else ""))
            for family, reason in sorted(adapter.refused.items()):
                print(f"  {family}: {reason}")
        return 0
    names = args.names or sorted(adapters)
    for name in names:
        found = adapters.get(name) or catalog.adapter_of(name)
        if found is None:
            raise UserError(f"benchmarks install: unknown benchmark {name!r}; known: {sorted(adapters)}")
        python = ensure(found.environment)
        print(f"{found.name}: {found.environment.label} ready ({python})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    # Every option has its help text (tests/test_cli_manners.py walks the tree), and a mistyped command or choice
    # is answered with the closest one.
    parser = SuggestingArgumentParser(prog="eval-pipelines", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--project-dir",
        default=None,
        help="the project directory (sweeps/, scenarios/, data/, dagster.yaml); default: $EVAL_PIPELINES_PROJECT_DIR, "
        "else the current directory",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser(
        "init", help="make a project directory: a sweep config, an example scenario, dagster.yaml, workspace.yaml"
    )
    init.add_argument("directory", nargs="?", default=None, help="default: the project directory")
    init.add_argument("--force", action="store_true", help="replace the files it would write")
    init.add_argument(
        "--postgres",
        action="store_true",
        help="write the production dagster.yaml (runs in PostgreSQL, settings from DAGSTER_PG_*); in an existing "
        "project only that file is written",
    )
    init.add_argument(
        "--celery",
        action="store_true",
        help="also the Celery workers' settings and start command (celery/worker.sh); implies --postgres",
    )
    init.set_defaults(func=cmd_init)
    doctor = sub.add_parser(
        "doctor", help="say what is installed, what is running, where the data is and whether the sandbox is on"
    )
    doctor.set_defaults(func=cmd_doctor)
    sweep = sub.add_parser("sweep", help="run a model-comparison sweep through Dagster and print pass rates")
    sweep.add_argument(
        "--config", default=None, help="a sweep config; default: sweeps/default.yaml of the project (else the built-in)"
    )
    sweep.add_argument("--sweep-id", default=None, help="default: <sweep name>-<UTC date>; re-runs resume it")
    sweep.add_argument(
        "--backend",
        choices=("embedded", "http"),
        default="embedded",
        help="embedded: in-process (default); http: an evaluation service at --base-url, key in EVAL_SERVICE_API_KEY",
    )
    sweep.add_argument("--base-url", default=None, help="the evaluation service for --backend http")
    sweep.add_argument(
        "--skip-assessment", action="store_true", help="do not send verified rollouts to the assessment platform"
    )
    sweep.set_defaults(func=cmd_sweep)
    reverify = sub.add_parser(
        "reverify",
        help="re-verify stored rollouts with the scenarios' current verifiers (no model runs) and compare the pass "
        "rates by verifier version",
    )
    reverify.add_argument(
        "--scenario",
        action="extend",
        nargs="+",
        default=None,
        metavar="ID",
        help="only these scenarios (ids, e.g. email_ops:1.0.0); default: every scenario",
    )
    reverify.add_argument("--sweep", default=None, help="only this sweep's rollouts; default: every sweep's")
    reverify.add_argument(
        "--all",
        action="store_true",
        help="re-verify every stored partition of the selection, not only those without verdicts at the current "
        "version (e.g. after a change outside the verifier package)",
    )
    reverify.set_defaults(func=cmd_reverify)
    sql = sub.add_parser("sql", help="run a read-only SQL query against data/eval.duckdb")
    sql.add_argument("query", help="the SQL to run, e.g. 'select * from pass_rates' (the catalog is opened read-only)")
    sql.add_argument(
        "--format", choices=("markdown", "csv", "json"), default="markdown", help="output format (default: markdown)"
    )
    sql.add_argument("--db", default=None, help="catalog to read; default: data/eval.duckdb")
    sql.set_defaults(func=cmd_sql)
    report = sub.add_parser("report", help="write a self-contained HTML report with SVG charts for one sweep")
    report.add_argument("--sweep", default=None, help="sweep id; default: the most recently started sweep")
    report.add_argument("--out", default=None, help="HTML path, SVGs beside it; default: data/reports/report.html")
    report.add_argument("--db", default=None, help="catalog to read; default: data/eval.duckdb")
    report.add_argument(
        "--ignore-gates",
        action="store_true",
        help="write the report even when a gate fails (the failing gates are still printed); default: a failing "
        f"gate writes nothing and exits {EXIT_ERRORS}",
    )
    report.set_defaults(func=cmd_report)
    export = sub.add_parser(
        "export",
        help="export one sweep's results: Inspect AI logs, OpenAI chat-format JSONL, Parquet tables, ATIF "
        "trajectories, or SimLab run folders",
    )
    export.add_argument(
        "--format",
        required=True,
        choices=("inspect", "jsonl", "parquet", "atif", "simlab"),
        help="inspect: Inspect AI eval logs; jsonl: OpenAI chat-format JSONL; parquet: the tables' rows; atif: ATIF "
        "trajectories; simlab: SimLab run folders",
    )
    export.add_argument("--sweep", default=None, help="sweep id; default: the most recently started sweep")
    export.add_argument("--model", default=None, help="only this model (its name in the sweep config)")
    export.add_argument("--scenario", default=None, help="only this scenario id, e.g. email_ops:1.0.0")
    export.add_argument("--db", default=None, help="catalog to read; default: data/eval.duckdb")
    export.add_argument(
        "--out",
        required=True,
        help="a directory for inspect (one log per model x scenario), parquet, atif (one trajectory per rollout) "
        "and simlab (one run folder per rollout, as `simlab eval` reads them), a file for jsonl",
    )
    export.add_argument(
        "--include-errors",
        action="store_true",
        help="jsonl: also write errored and unverified rollouts (reward null); by default only passes and fails",
    )
    export.set_defaults(func=cmd_export)
    view = sub.add_parser(
        "view", help="serve a web viewer of the results: pass-rate matrix, every rollout, two models side by side"
    )
    view.add_argument("--port", type=int, default=VIEWER_PORT, help=f"port to listen on (default: {VIEWER_PORT})")
    view.add_argument("--host", default=VIEWER_HOST, help="address to listen on; the default is this machine only")
    view.add_argument("--db", default=None, help="catalog to read; default: data/eval.duckdb")
    view.set_defaults(func=cmd_view)
    importer = sub.add_parser("import", help="import a SimLab task bundle (tasks/*.json, verifiers/*.py) as a scenario")
    importer.add_argument("bundle", help="the bundle folder")
    importer.add_argument("--scenario-id", default=None, help="default: <folder name>:1.0.0")
    importer.add_argument("--scenarios-dir", default=None, help="default: the project's scenarios/")
    importer.add_argument("--overwrite", action="store_true", help="replace a scenario of the same id")
    importer.add_argument(
        "--servers",
        default=None,
        help="YAML/JSON naming the servers no built-in one plays: {servers: {name: {url} | {command, args, env}}} "
        "or SimLab's mcp-servers.json (one in or beside the bundle is read anyway)",
    )
    importer.add_argument(
        "--simlab-package", default=None, help="a SimLab package folder to take simlab.verifiers.<name> modules from"
    )
    importer.add_argument(
        "--allow-ungraded", action="store_true", help="keep a task with no verifier and no rubric runnable"
    )
    importer.set_defaults(func=cmd_import)
    tasks = sub.add_parser("tasks", help="list scenarios' tasks: runnable, or unrunnable with the reason")
    tasks.add_argument("scenario", nargs="*", help="scenario ids (default: every scenario but the benchmarks)")
    tasks.add_argument("--unrunnable", action="store_true", help="list only the tasks that cannot run here")
    tasks.set_defaults(func=cmd_tasks)
    generate = sub.add_parser(
        "generate-tasks", help="generate a new scenario from a toolset (spec 000 task generation)"
    )
    source = generate.add_mutually_exclusive_group(required=True)
    source.add_argument("--toolset", help="JSON file: a list of tools, or a tool server's {'tools': [...]} listing")
    source.add_argument("--tool-server-url", help="read the toolset from a running tool server's /tools")
    generate.add_argument("--scenario-id", required=True, help="id of the new scenario, e.g. 'calendar_gen:1.0.0'")
    generate.add_argument(
        "--num-tasks", type=int, default=None, help=f"how many tasks to generate (default: {DEFAULT_NUM_TASKS})"
    )
    generate.add_argument(
        "--preset", default=None, help="a built-in preset: the agent, scenario and workflows the tasks exercise"
    )
    generate.add_argument("--model", default=None, help="'schema' forces the deterministic generator")
    generate.add_argument("--seed", type=int, default=None, help="seed of the generator's choices, for repeatable runs")
    generate.add_argument("--overwrite", action="store_true", help="replace a scenario of the same id")
    generate.set_defaults(func=cmd_generate_tasks)
    serve = sub.add_parser("serve", help="run a local service: eval-service (spec 000) or platform (spec 002)")
    serve.add_argument(
        "service", choices=("eval-service", "platform"), help="eval-service (spec 000) or platform (spec 002)"
    )
    serve.add_argument("options", nargs=argparse.REMAINDER, help="the service's own options (see --help after it)")
    serve.set_defaults(func=cmd_serve)
    parity = sub.add_parser(
        "parity",
        help="grade a sweep's benchmark rollouts with the upstream graders and compare them with ours "
        f"(exit {EXIT_PARITY_DISAGREEMENT} on a disagreement on a deterministic component)",
    )
    parity.add_argument("--sweep", required=True, help="the sweep id whose benchmark rollouts are graded")
    parity.add_argument("--benchmark", default=None, help="only this benchmark's rollouts (bfcl, tau2)")
    parity.add_argument("--show", type=int, default=20, help="disagreeing rollouts listed per benchmark (default 20)")
    parity.set_defaults(func=cmd_parity)
    sandbox = sub.add_parser("sandbox", help="say how run_command isolates a model's commands on this host")
    sandbox.set_defaults(func=cmd_sandbox)
    benchmarks = sub.add_parser("benchmarks", help="the upstream benchmarks' environments (bfcl, tau2)")
    benchmarks_sub = benchmarks.add_subparsers(dest="action", required=True)
    install = benchmarks_sub.add_parser("install", help="make the benchmarks' cached venvs now (default: all)")
    install.add_argument("names", nargs="*", help="benchmark names (bfcl, tau2) or scenario ids")
    benchmarks_sub.add_parser("list", help="the benchmarks, their pinned versions, venvs and materialised scenarios")
    benchmarks.set_defaults(func=cmd_benchmarks)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # This process holds keys: nothing a model or verifier runs may read its memory or environment.
    make_undumpable()
    install_log_redaction()
    args = build_parser().parse_args(argv)
    try:
        if args.project_dir is not None:
            use_project_dir(Path(args.project_dir))
        return int(args.func(args))
    except (ConfigError, ScenarioError, UserError) as exc:
        print(f"eval-pipelines: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:  # a second Ctrl-C, from a user who would not wait for the clean stop
        print("eval-pipelines: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
