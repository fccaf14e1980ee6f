"""`eval-pipelines reverify` from the CLI: the verification work in this process, its record in Dagster in another.

The work is the `verification` asset's and its checks', done by the same Dagster-free functions
(`pipeline.steps.verify_partition`, `check_partition_scores`, `pipeline.health.partition_error_share`), then the
`eval_catalog` asset's (`warehouse.catalog.build_catalog`, `reports.pass_rate_summary`). What it did is then
recorded in Dagster by `defs/reverify_record.py` in one run: each re-verified partition's `verification`
materialisation with the asset's metadata and both checks' evaluations, and the catalog's materialisation.

Importing Dagster and opening its instance cost about a second of CPU, more than verifying a few partitions, so
the recorder is a process of its own, started before the work: it imports and opens while the verifiers run, then
waits for the outcome on its stdin (one JSON line; `Outcome` below) and answers on its stdout. A thread would
share this process's interpreter lock, and the verification, which mostly waits for its worker process, waited
for the lock instead (each partition took twice as long). This module imports neither Dagster nor, until it
works, the pipeline, so the recorder can import it cheaply.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from eval_pipelines.inputs.sweeps import SweepConfig
    from eval_pipelines.lib.sweep_control import SweepStop
    from eval_pipelines.pipeline.reverification import StoredPartition

#: Names of the `verification` asset's checks (defs/evals/assets.py), evaluated here as they are there.
SCORES_CHECK = "scores_complete_and_in_range"
ERRORS_CHECK = "errors_below_threshold"
#: What a failure is named when it is not a partition's (`model|scenario`).
CATALOG = "eval_catalog"
DAGSTER_RECORD = "dagster"
RECORDER_MODULE = "eval_pipelines.defs.reverify_record"


@dataclass(frozen=True)
class ReverifyFailure:
    """What failed in a re-verification, and why (one line): a partition (named `model|scenario`, as a sweep names
    it), the catalog (`eval_catalog`, partition None) or the record in Dagster (`dagster`, partition None)."""

    name: str
    cause: str
    partition: StoredPartition | None = None


class CheckOutcome(TypedDict):
    """One asset check's evaluation, as the check function of defs/evals/assets.py returns it."""

    name: str
    passed: bool
    description: str
    metadata: dict[str, str | int | float]


class PartitionOutcome(TypedDict):
    """A re-verified partition: its Dagster partition's dimensions, the verification's summary, its checks."""

    model: str
    scenario: str
    summary: dict[str, Any]
    checks: list[CheckOutcome]


class TableColumns(TypedDict):
    """What defs/table_metadata.py builds a table's Dagster column schema from (warehouse.tables), for the recorder,
    which would otherwise import the warehouse package (a sixth of its CPU)."""

    columns: list[tuple[str, str, str, bool]]
    partition_by: list[tuple[str, str]]


def table_columns(table: str) -> TableColumns:
    """(name, type, doc, nullable) of each column, (name, doc) of each Hive partition column."""
    from eval_pipelines.warehouse.tables import HIVE_COLUMN_DOCS, table_spec

    spec = table_spec(table)
    return TableColumns(
        columns=[(c.name, str(c.type), c.doc, c.nullable) for c in spec.columns],
        partition_by=[(name, HIVE_COLUMN_DOCS[name]) for name in spec.partition_by],
    )


class CatalogOutcome(TypedDict):
    path: str
    views: int
    row_counts: dict[str, int]
    latest_sweep: str | None
    table_markdown: str
    chart_markdown: str
    chart_path: str | None


@dataclass
class Outcome:
    """Everything one re-verification did, as the recorder reads it (`to_json`)."""

    sweep_id: str | None = None
    partitions: list[PartitionOutcome] = field(default_factory=list)
    catalog: CatalogOutcome | None = None
    failures: list[ReverifyFailure] = field(default_factory=list)
    #: the `verifications` table's columns, for its materialisations' standard table metadata
    verifications: TableColumns | None = None

    def to_json(self) -> str:
        failures = [{"name": f.name, "cause": f.cause} for f in self.failures]
        document = {"sweep_id": self.sweep_id, "partitions": self.partitions, "catalog": self.catalog}
        return json.dumps({**document, "failures": failures, "verifications": self.verifications})


def failure_cause(exc: BaseException) -> str:
    """One line: the innermost cause's class and the first line of its message (as a failed Dagster step says)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


class _Thresholds:
    """The error check's threshold: the sweep's that pairs the partition, else the default (as the check finds
    it in a run without a sweep tag); the project's sweeps are read once."""

    def __init__(self) -> None:
        self._sweeps: dict[str, SweepConfig] | None = None

    def of(self, model_key: str, scenario_key: str) -> float:
        from eval_pipelines.inputs.sweeps import ConfigError, find_sweep_for, load_all_sweeps
        from eval_pipelines.schemas.sweep import DEFAULT_ERROR_THRESHOLD

        if self._sweeps is None:
            self._sweeps = load_all_sweeps()
        try:
            return find_sweep_for(self._sweeps, model_key, scenario_key).error_threshold
        except ConfigError:
            return DEFAULT_ERROR_THRESHOLD


def verify_and_check(
    partition: StoredPartition, sweep_id: str | None, warehouse_dir: Path, thresholds: _Thresholds
) -> PartitionOutcome:
    """The `verification` asset's work on one partition, then both its checks', as a run of it does them."""
    from eval_pipelines.inputs.scenarios import partition_key
    from eval_pipelines.pipeline.health import error_share_check, partition_error_share
    from eval_pipelines.pipeline.steps import check_partition_scores, verification_files, verify_partition
    from eval_pipelines.warehouse.store import Warehouse

    warehouse = Warehouse(warehouse_dir)
    model_key, scenario = partition.model_key, partition.scenario
    scenario_key = partition_key(scenario.scenario_id)
    summary = verify_partition(warehouse, scenario, model_key, scenario_key, sweep_id=sweep_id)
    report = check_partition_scores(warehouse, scenario, model_key, scenario_key, sweep_id)
    scores = CheckOutcome(
        name=SCORES_CHECK, passed=report.passed, description=report.description, metadata=report.metadata()
    )
    threshold = thresholds.of(model_key, scenario_key)
    share = partition_error_share(
        warehouse,
        model_key,
        scenario_key,
        sweep_id=sweep_id,
        verification_files=verification_files(warehouse, model_key, scenario_key, summary.verifier_version),
    )
    passed, description, metadata = error_share_check(share, threshold)
    errors = CheckOutcome(name=ERRORS_CHECK, passed=passed, description=description, metadata=metadata)
    return PartitionOutcome(
        model=model_key,
        scenario=scenario.scenario_id,
        summary={
            "verifier_version": summary.verifier_version,
            "rollouts_verified": summary.rollouts_verified,
            "passed": summary.passed,
            "skipped": summary.skipped,
            "rows_written": summary.rows_written,
            "verifier_errors": summary.verifier_errors,
        },
        checks=[scores, errors],
    )


def rebuild_catalog(data: Path) -> CatalogOutcome:
    """The `eval_catalog` asset's work: the DuckDB catalog and the latest sweep's pass-rate table and chart."""
    from eval_pipelines.reports.build import pass_rate_summary
    from eval_pipelines.warehouse.catalog import build_catalog

    summary = build_catalog(data / "warehouse", data / "eval.duckdb")
    latest = pass_rate_summary(data / "eval.duckdb", chart_path=data / "reports" / "pass_rates.svg")
    return CatalogOutcome(
        path=str(summary.path),
        views=len(summary.views),
        row_counts=dict(summary.row_counts),
        latest_sweep=latest.sweep_id,
        table_markdown=latest.table_markdown,
        chart_markdown=latest.chart_markdown,
        chart_path=str(latest.chart_path) if latest.chart_path is not None else None,
    )


class Recorder:
    """The recorder process (`python -m eval_pipelines.defs.reverify_record`). Started first, it imports Dagster
    while the CLI selects the partitions; `begin` names them (it then opens the instance and registers them while
    the work runs); `hand_over` gives it the outcome to record and `wait` waits for the run. Leaving the `with`
    block waits for a record handed over; before `begin` (nothing to do, a bad option) it stops the process, which
    has not touched the instance yet; after `begin` without an outcome it lets it end on its own."""

    def __init__(self) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by `wait` or `close`
        self._process = subprocess.Popen(
            # -P: the project directory (the working directory) is not on its module path
            [sys.executable, "-P", "-m", RECORDER_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            # Its own session: a Ctrl-C in the terminal stops the work (see `reverify_partitions`), not the record.
            start_new_session=True,
        )
        self._begun = self._handed_over = False
        self._recorded: ReverifyFailure | None = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _send(self, line: str) -> None:
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(line.encode("utf-8") + b"\n")
            self._process.stdin.flush()
        except BrokenPipeError:  # it stopped early; `wait` reads why
            pass

    def begin(self, partitions: Sequence[StoredPartition]) -> None:
        self._begun = True
        self._send(json.dumps([[p.model_key, p.scenario.scenario_id] for p in partitions]))

    def hand_over(self, outcome: Outcome) -> None:
        self._handed_over = True
        self._send(outcome.to_json())

    def close(self) -> None:
        if self._handed_over:
            self.wait()
        elif self._process.returncode is None:
            if not self._begun:
                self._process.kill()  # still importing: it has not touched the instance
            self._process.communicate()  # after `begin`, its stdin closes and it ends without a record
        if not self._stderr.closed:
            self._stderr.close()

    def wait(self) -> ReverifyFailure | None:
        """Waits for the run of the outcome handed over: None when it is recorded (or nothing was handed over),
        else the failure (one line)."""
        if not self._handed_over or self._process.returncode is not None:
            return self._recorded
        out, _ = self._process.communicate()
        self._stderr.seek(0)
        err = self._stderr.read().decode("utf-8", "replace")
        self._stderr.close()
        lines = out.decode("utf-8", "replace").strip().splitlines()
        answer = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        why: str | None = None
        if "error" in answer:
            why = str(answer["error"])
        elif self._process.returncode != 0 or not answer:
            tail = err.strip().splitlines()[-1:] or [f"exit status {self._process.returncode}"]
            why = f"the recorder stopped: {tail[0]}"
        if why is not None:
            self._recorded = ReverifyFailure(
                DAGSTER_RECORD, f"the verdicts are written, but not recorded in Dagster: {why}"
            )
        return self._recorded


def reverify_partitions(
    partitions: Sequence[StoredPartition],
    *,
    sweep_id: str | None = None,
    on_progress: Callable[[int, StoredPartition | None], None] = lambda done, current: None,
    stop: SweepStop | None = None,
    recorder: Recorder | None = None,
) -> list[ReverifyFailure]:
    """Verify each partition (with the `verification` asset's checks), rebuild the catalog once, and record it all
    in Dagster in one run; returns what failed and why (empty when all passed).

    With `sweep_id` only that sweep's rollouts are verified, else every sweep's. No model, agent or tool server
    runs, so no evaluation service is started. `on_progress(done, current)` is called before each partition and
    once more (current None) before the catalog rebuild. Once `stop` is requested no further partition starts;
    the catalog is still rebuilt over what was verified, and that is recorded.

    `recorder`: one the caller started earlier (the CLI, before selecting the partitions), which is handed the
    outcome and not waited for here (the caller's `recorder.wait()` says whether it was recorded); else one is
    started and waited for, and its failure is in the list."""
    if recorder is not None:
        return _reverify(partitions, sweep_id, on_progress, stop, recorder)
    with Recorder() as own:
        failures = _reverify(partitions, sweep_id, on_progress, stop, own)
        recorded = own.wait()
    return failures if recorded is None else [*failures, recorded]


def _reverify(
    partitions: Sequence[StoredPartition],
    sweep_id: str | None,
    on_progress: Callable[[int, StoredPartition | None], None],
    stop: SweepStop | None,
    recorder: Recorder,
) -> list[ReverifyFailure]:
    from eval_pipelines.inputs.paths import data_dir

    recorder.begin(partitions)
    outcome = Outcome(sweep_id=sweep_id, verifications=table_columns("verifications"))
    data = data_dir()
    thresholds = _Thresholds()
    done = 0
    for partition in partitions:
        if stop is not None and stop.requested:
            break
        on_progress(done, partition)
        try:
            outcome.partitions.append(verify_and_check(partition, sweep_id, data / "warehouse", thresholds))
        except Exception as exc:
            name = f"{partition.model_key}|{partition.scenario.scenario_id}"
            outcome.failures.append(ReverifyFailure(name, failure_cause(exc), partition))
        done += 1
    on_progress(done, None)
    try:
        outcome.catalog = rebuild_catalog(data)
    except Exception as exc:
        outcome.failures.append(ReverifyFailure(CATALOG, failure_cause(exc)))
    recorder.hand_over(outcome)
    return list(outcome.failures)
