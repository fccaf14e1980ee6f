"""`eval-pipelines`: run sweeps through Dagster and query the results.

User errors (a bad config, a missing key variable, an unknown scenario) print one line naming the file and
the field, and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval_pipelines.paths import data_dir, project_root, scenarios_dir, sweeps_dir
from eval_pipelines.scenarios.catalog import ScenarioCatalog, ScenarioError, partition_key
from eval_pipelines.sweeps import (
    ConfigError,
    default_sweep_id,
    load_all_sweeps,
    load_sweep,
    model_config_for,
    run_name,
    sweep_scenarios,
)

EXIT_USER_ERROR = 2
SERVICE_KEY_ENV = "EVAL_SERVICE_API_KEY"
PARTITION_STEPS = ("eval_run", "rollouts", "verification", "rubric_verification")
ASSESSMENT_STEPS = ("assessment_dataset", "judgements")
#: The progress bar is the CLI's view of a sweep; Dagster's own event stream stays in its storage and UI.
QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


class UserError(Exception):
    pass


def _dagster_instance() -> Any:
    import dagster as dg

    if os.environ.get("DAGSTER_HOME"):
        return dg.DagsterInstance.get()
    # The repository's dagster.yaml keeps storage under data/dagster, relative to the repository root.
    os.chdir(project_root())
    return dg.DagsterInstance.from_config(str(project_root()))


CLI_PID_TAG = "eval_pipelines/cli_pid"
CLI_HOST_TAG = "eval_pipelines/cli_host"


def fail_abandoned_cli_runs(instance: Any) -> int:
    """Runs this host's CLI started that are still STARTED although their process is gone (kill -9): fail them
    and free their pool slots, which run monitoring does not do for in-process runs. Returns how many."""
    import socket

    import dagster as dg

    host = socket.gethostname()
    statuses = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING]
    failed = 0
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=statuses, tags={CLI_HOST_TAG: host})):
        pid = int(run.tags.get(CLI_PID_TAG, "0") or 0)
        if pid > 0:
            try:
                os.kill(pid, 0)
                continue  # that sweep is still running
            except ProcessLookupError:
                pass
            except PermissionError:
                continue  # alive, owned by someone else
        instance.report_run_failed(run, message=f"the sweep process (pid {pid}) is gone")
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        failed += 1
    return failed


def cmd_sweep(args: argparse.Namespace) -> int:
    import dagster as dg
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from eval_pipelines.clients.backend import EvaluationBackend
    from eval_pipelines.definitions import assets_by_name
    from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
    from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
    from eval_pipelines.defs.evals.resources import EvalPaths, EvalService
    from eval_pipelines.reports.data import pass_rate_rows

    console = Console(stderr=True)
    assets = assets_by_name()
    partition_assets = [assets[k] for k in PARTITION_STEPS + (() if args.skip_assessment else ASSESSMENT_STEPS)]
    eval_catalog = assets["eval_catalog"]
    config_path = Path(args.config).resolve()
    sweep = load_sweep(config_path)
    catalog = ScenarioCatalog()
    load_all_sweeps(config_path.parent)  # the assets read every config beside this one: fail here, by name
    scenarios = sweep_scenarios(sweep, catalog, source=str(config_path))
    known_tasks = {task_id for s in scenarios for task_id in s.tasks()}
    for index, task_id in enumerate(sweep.task_ids or []):
        if task_id not in known_tasks:
            raise UserError(
                f"{config_path}: task_ids[{index}]: unknown task {task_id!r} in scenarios "
                f"{[s.scenario_id for s in scenarios]}"
            )
    for model in sweep.models:
        model_config_for(model, source=str(config_path))  # a missing key variable fails here, before any run
    sweep_id = args.sweep_id or default_sweep_id(sweep)
    instance = _dagster_instance()
    abandoned = fail_abandoned_cli_runs(instance)
    instance.add_dynamic_partitions(MODELS.name, [m.name for m in sweep.models])
    instance.add_dynamic_partitions(SCENARIOS.name, [s.key for s in scenarios])

    paths = EvalPaths(sweeps_dir=str(config_path.parent))
    if args.backend == "http":
        if not args.base_url:
            raise UserError("--backend http needs --base-url (the evaluation service's address)")
        if not os.environ.get(SERVICE_KEY_ENV):
            raise UserError(f"--backend http needs the service's API key in the environment variable {SERVICE_KEY_ENV}")
        from eval_pipelines.clients.http_backend import HttpEvaluationBackend

        # The assets read the key through EnvVar (never shown in Dagster); the progress poller reads it directly.
        eval_service = EvalService(backend="http", base_url=args.base_url, api_key=dg.EnvVar(SERVICE_KEY_ENV))
        backend: EvaluationBackend = HttpEvaluationBackend(args.base_url, os.environ[SERVICE_KEY_ENV])
    else:
        eval_service = EvalService()
        backend = eval_service.get_backend()
    resources = {"paths": paths, "eval_service": eval_service}
    pairs = [(m, s) for s in scenarios for m in sweep.models]
    total = sum(
        len([t for t in s.tasks() if not sweep.task_ids or t in sweep.task_ids]) * sweep.rollout_count for _, s in pairs
    )
    labels = {m.name: f"{m.name} (simulated)" if m.is_simulated else m.name for m in sweep.models}
    import socket

    cli_tags = {CLI_PID_TAG: str(os.getpid()), CLI_HOST_TAG: socket.gethostname()}
    if abandoned:
        console.print(f"marked {abandoned} run(s) of a killed sweep as failed and freed their pool slots")
    console.print(
        f"sweep [bold]{sweep.name}[/] id [bold]{sweep_id}[/]: {len(sweep.models)} models x {len(scenarios)} "
        f"scenarios x rollout_count {sweep.rollout_count} = {total} rollouts"
    )

    stop = threading.Event()
    failures: list[str] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task("rollouts", total=total)

        def poll() -> None:
            names = [run_name(sweep_id, s.scenario_id, m.name) for m, s in pairs]
            while not stop.wait(0.5):
                finished = 0
                for name in names:
                    run = backend.find_run(name)
                    if run is not None:
                        finished += run.total - run.pending - run.running
                progress.update(bar, completed=finished)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            for model, scenario in pairs:
                progress.update(bar, description=f"{labels[model.name]} x {scenario.scenario_id}")
                result = dg.materialize(
                    partition_assets,
                    partition_key=partition_of(model.name, scenario.key),
                    instance=instance,
                    resources=resources,
                    tags={SWEEP_TAG: sweep.name, SWEEP_ID_TAG: sweep_id, **cli_tags},
                    run_config=QUIET_CONSOLE,
                    raise_on_error=False,
                )
                if not result.success:
                    failures.append(f"{model.name}|{scenario.key}")
            catalog_result = dg.materialize(
                [eval_catalog],
                instance=instance,
                resources=resources,
                run_config=QUIET_CONSOLE,
                tags=cli_tags,
                raise_on_error=False,
            )
            if not catalog_result.success:
                failures.append("eval_catalog")
        finally:
            stop.set()
            poller.join()
        progress.update(bar, completed=total, description="done")

    _, rows = pass_rate_rows(paths.duckdb, sweep_id)
    print_pass_rates(rows, sweep_id=sweep_id)
    if failures:
        console.print(f"[red]failed partitions:[/] {', '.join(failures)} (see `dagster dev -w workspace.yaml`)")
        return 1
    return 0


def print_pass_rates(rows: Sequence[dict[str, Any]], sweep_id: str) -> None:
    """One sweep's pass rates with their task-clustered 95% t-intervals (scenario_model_metrics)."""
    from rich.console import Console
    from rich.table import Table

    from eval_pipelines.reports import model_label

    table = Table(title=f"Pass rates: sweep {sweep_id}")
    for column in ("scenario", "model", "tasks", "n", "passes", "pass rate", "95% CI", "variance", "std"):
        table.add_column(column, justify="left" if column in ("scenario", "model") else "right")
    for row in rows:
        low, high = row["ci_t_low"], row["ci_t_high"]
        interval = "-" if low is None or high is None else f"{max(low, 0.0):.2f}-{min(high, 1.0):.2f}"
        table.add_row(
            row["scenario_id"],
            model_label(row["model_name"], row["is_simulated"]),
            str(row["n_tasks"]),
            str(row["n"]),
            str(row["passes"]),
            f"{row['pass_rate']:.3f}",
            interval,
            f"{row['variance']:.3f}",
            f"{row['std']:.3f}",
        )
    Console(width=140).print(table)


def cmd_report(args: argparse.Namespace) -> int:
    from eval_pipelines.lib.progress import ProgressReporter
    from eval_pipelines.reports import ReportError, build_report

    db = Path(args.db) if args.db else data_dir() / "eval.duckdb"
    try:
        with ProgressReporter(None, "report", transient=True) as progress:
            files = build_report(db, Path(args.out), sweep_id=args.sweep, progress=progress)
    except ReportError as exc:
        raise UserError(str(exc)) from None
    print(f"sweep {files.sweep_id}: {files.html}")
    for chart in files.charts.values():
        print(f"  {chart}")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    import duckdb

    from eval_pipelines.pipeline.summary import markdown_table
    from eval_pipelines.warehouse.catalog import connect_read_only

    path = Path(args.db) if args.db else data_dir() / "eval.duckdb"
    if not path.is_file():
        raise UserError(f"{path}: no catalog yet; run `eval-pipelines sweep` first")
    con = connect_read_only(path)
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
    from eval_pipelines.defs.evals.partitions import SCENARIOS

    _dagster_instance().add_dynamic_partitions(SCENARIOS.name or "scenarios", [partition_key(args.scenario_id)])
    summary = results.filter_summary or {}
    print(f"wrote {len(results.tasks)} tasks to {folder}; filter summary: {json.dumps(summary, default=str)}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Run a local service in the foreground; each service parses its own options."""
    if args.service == "platform":
        from eval_pipelines.platform.serve import main as serve_platform

        return serve_platform(args.options)
    from eval_pipelines.service.serve import main as serve_eval_service

    return serve_eval_service(args.options)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eval-pipelines", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sweep = sub.add_parser("sweep", help="run a model-comparison sweep through Dagster and print pass rates")
    sweep.add_argument("--config", default=str(sweeps_dir() / "default.yaml"))
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
    sql = sub.add_parser("sql", help="run a read-only SQL query against data/eval.duckdb")
    sql.add_argument("query")
    sql.add_argument("--format", choices=("markdown", "csv", "json"), default="markdown")
    sql.add_argument("--db", default=None)
    sql.set_defaults(func=cmd_sql)
    report = sub.add_parser("report", help="write a self-contained HTML report with PNG charts for one sweep")
    report.add_argument("--sweep", default=None, help="sweep id; default: the most recently started sweep")
    report.add_argument("--out", default=str(data_dir() / "reports" / "report.html"), help="HTML path; PNGs beside it")
    report.add_argument("--db", default=None, help="catalog to read; default: data/eval.duckdb")
    report.set_defaults(func=cmd_report)
    generate = sub.add_parser(
        "generate-tasks", help="generate a new scenario from a toolset (spec 000 task generation)"
    )
    source = generate.add_mutually_exclusive_group(required=True)
    source.add_argument("--toolset", help="JSON file: a list of tools, or a tool server's {'tools': [...]} listing")
    source.add_argument("--tool-server-url", help="read the toolset from a running tool server's /tools")
    generate.add_argument("--scenario-id", required=True, help="id of the new scenario, e.g. 'calendar_gen:1.0.0'")
    generate.add_argument("--num-tasks", type=int, default=None)
    generate.add_argument("--preset", default=None)
    generate.add_argument("--model", default=None, help="'schema' forces the deterministic generator")
    generate.add_argument("--seed", type=int, default=None)
    generate.add_argument("--overwrite", action="store_true")
    generate.set_defaults(func=cmd_generate_tasks)
    serve = sub.add_parser("serve", help="run a local service: eval-service (spec 000) or platform (spec 002)")
    serve.add_argument("service", choices=("eval-service", "platform"))
    serve.add_argument("options", nargs=argparse.REMAINDER, help="the service's own options (see --help after it)")
    serve.set_defaults(func=cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ConfigError, ScenarioError, UserError) as exc:
        print(f"eval-pipelines: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
