"""The record in Dagster of one `eval-pipelines reverify`, in a process of its own (`python -m`, started by
defs/reverify.py, which did the work): one run of the op job `__cli_reverify`, tagged `eval_pipelines/reverify`
with the verifier versions (and `eval_pipelines/sweep_id` with `--sweep`), whose op logs

- per re-verified partition, a `verification` materialisation with the asset's metadata (and the standard table
  keys), tagged with the verifier version, then both of the asset's checks' evaluations, targeting it;
- the `eval_catalog` materialisation with the asset's metadata;

and fails, after logging all that, when a partition or the catalog failed (the run's error names them).

Why one run and not one per partition: each Dagster run starts an event-log database of its own (stamped by
alembic) and writes a score of events, which cost more than verifying a few partitions. Why a run at all, not
`report_runless_asset_event`: a runless check evaluation of a partition can be recorded only once (the instance's
`asset_check_executions` table is unique on asset, check, run and partition, and runless events share one run id),
so the second re-verification of a partition would fail to record its checks.
"""

import json
import logging
import os
import socket
import sys
import uuid
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any

import dagster as dg
from dagster import OpExecutionContext
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

from eval_pipelines.defs.evals.cli_runs import CLI_HOST_TAG, CLI_PID_TAG, Heartbeat
from eval_pipelines.defs.instance import open_instance
from eval_pipelines.defs.reverify import CatalogOutcome, PartitionOutcome, TableColumns, failure_cause

REVERIFY_JOB = "__cli_reverify"
#: The tags of defs/evals/automation.py (REVERIFY_TAG) and defs/evals/assets.py (SWEEP_ID_TAG), spelled out here:
#: importing those modules loads every asset's dependencies (tests/test_reverify_cli.py holds them equal).
REVERIFY_TAG = "eval_pipelines/reverify"
SWEEP_ID_TAG = "eval_pipelines/sweep_id"
#: The dynamic partitions of defs/evals/partitions.py, by name (importing it loads the scenario schemas).
MODELS, SCENARIOS = "models", "scenarios"
#: defs/table_metadata.py's standard table metadata, built here from the columns the CLI sends (importing that
#: module loads the warehouse package); tests/test_reverify_cli.py holds the two equal.
CATALOG_SCHEMA = "eval.main"
_COUNTS_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn(name="table", type="string", description="table or view of the catalog (eval.main)"),
        dg.TableColumn(name="rows", type="int"),
    ]
)


def table_rows(table: str, rows: int, columns: TableColumns) -> dict[str, Any]:
    """`table_metadata.table_rows`: the row count, table name and column schema of a materialisation."""
    schema = [
        dg.TableColumn(name=name, type=kind, description=doc, constraints=dg.TableColumnConstraints(nullable=nullable))
        for name, kind, doc, nullable in columns["columns"]
    ]
    schema += [dg.TableColumn(name=name, type="string", description=doc) for name, doc in columns["partition_by"]]
    return {
        "dagster/row_count": int(rows),
        "dagster/table_name": f"{CATALOG_SCHEMA}.{table}",
        "dagster/column_schema": dg.TableSchema(columns=schema),
    }


def table_counts(rows_by_table: dict[str, int]) -> dg.TableMetadataValue:
    """`table_metadata.table_counts`: several tables' row counts as one table-valued entry."""
    records = [dg.TableRecord({"table": name, "rows": int(rows)}) for name, rows in sorted(rows_by_table.items())]
    return dg.MetadataValue.table(records=records, schema=_COUNTS_SCHEMA)


VERIFICATION = dg.AssetKey("verification")
CATALOG = dg.AssetKey("eval_catalog")
#: The CLI reports failures itself, one line each; the run's events stay in Dagster's storage and UI.
SILENT_CONSOLE = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def partition_of(model: str, scenario: str) -> str:
    """The key of defs/evals/partitions.py's `partition_of(model, scenario)`: `model|scenario`."""
    return str(dg.MultiPartitionKey({"model": model, "scenario": scenario}))


def verification_materialization(done: PartitionOutcome, columns: TableColumns) -> dg.AssetMaterialization:
    """The `verification` asset's metadata (defs/evals/assets.py), tagged with the verifier version."""
    summary = done["summary"]
    verified = summary["rollouts_verified"]
    return dg.AssetMaterialization(
        asset_key=VERIFICATION,
        partition=partition_of(done["model"], done["scenario"]),
        metadata={
            "verifier_version": summary["verifier_version"],
            "rollouts_verified": verified,
            "passed": summary["passed"],
            "pass_rate": round(summary["passed"] / verified if verified else 0.0, 4),
            "verifier_errors": summary["verifier_errors"],
            "skipped": summary["skipped"],
            **table_rows("verifications", summary["rows_written"], columns),
        },
        tags={REVERIFY_TAG: summary["verifier_version"]},
    )


def catalog_materialization(catalog: CatalogOutcome) -> dg.AssetMaterialization:
    """The `eval_catalog` asset's metadata (defs/evals/assets.py)."""
    metadata: dict[str, Any] = {
        "path": catalog["path"],
        "views": catalog["views"],
        "row_counts": table_counts(catalog["row_counts"]),
        "latest_sweep": dg.MetadataValue.text(catalog["latest_sweep"] or "-"),
        "latest_sweep_pass_rates": dg.MetadataValue.md(f"{catalog['table_markdown']}\n\n{catalog['chart_markdown']}"),
    }
    if catalog["chart_path"] is not None:
        metadata["latest_sweep_pass_rate_chart"] = dg.MetadataValue.path(catalog["chart_path"])
    return dg.AssetMaterialization(asset_key=CATALOG, metadata=metadata)


def _target(instance: dg.DagsterInstance, partition: str) -> AssetCheckEvaluationTargetMaterializationData | None:
    """The partition's latest materialisation, which its checks evaluated (as a check in an asset run finds it)."""
    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=VERIFICATION, asset_partitions=[partition]), limit=1
    ).records
    if not found:
        return None
    return AssetCheckEvaluationTargetMaterializationData(
        run_id=found[0].event_log_entry.run_id, storage_id=found[0].storage_id, timestamp=found[0].timestamp
    )


def _events(context: OpExecutionContext, outcome: dict[str, Any]) -> Iterator[dg.Output[None]]:
    partitions: list[PartitionOutcome] = outcome["partitions"]
    for done in partitions:
        errors = done["summary"]["verifier_errors"]
        if errors:
            context.log.warning(
                f"{done['model']} x {done['scenario']}: {errors} rollouts got no verdict: verifier errors, not failures"
            )
        context.log_event(verification_materialization(done, outcome["verifications"]))
    if outcome["catalog"] is not None:
        context.log_event(catalog_materialization(outcome["catalog"]))
    yield dg.Output(None)  # stores the materialisations logged so far; the checks then target them
    for done in partitions:
        partition = partition_of(done["model"], done["scenario"])
        target = _target(context.instance, partition)
        for check in done["checks"]:
            evaluation = dg.AssetCheckEvaluation(
                asset_key=VERIFICATION,
                check_name=check["name"],
                passed=check["passed"],
                description=check["description"],
                metadata=dict(check["metadata"]),
                partition=partition,
                target_materialization_data=target,
                blocking=False,
            )
            # log_event takes check evaluations too (OpExecutionContext.log_event), though its annotation omits them
            context.log_event(evaluation)  # type: ignore[arg-type]
    if outcome["failures"]:
        # Raised after the events above were stored: the run fails, and says what did.
        raise dg.Failure(
            description="; ".join(f"{f['name']}: {f['cause']}" for f in outcome["failures"]),
            metadata={"failed": dg.MetadataValue.json([f["name"] for f in outcome["failures"]])},
        )


def _job(outcome: dict[str, Any]) -> dg.JobDefinition:
    @dg.op(name="reverify", description="Records the verdicts and catalog that `eval-pipelines reverify` wrote.")
    def reverify(context: OpExecutionContext) -> Iterator[dg.Output[None]]:  # Dagster reads this annotation
        yield from _events(context, outcome)

    @dg.job(name=REVERIFY_JOB, description="`eval-pipelines reverify`: its verdicts, checks and catalog.")
    def record() -> None:
        reverify()

    return record


class ReverifyRecorder:
    """The CLI's instance, with the partitions about to be re-verified registered; `record` runs the job."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance

    @classmethod
    def open(cls, keys: Sequence[Sequence[str]]) -> "ReverifyRecorder":
        instance = open_instance()
        try:
            # As automation.register_partitions does: the dimension keys the instance lacks.
            for name, new in ((MODELS, {m for m, _ in keys}), (SCENARIOS, {s for _, s in keys})):
                missing = sorted(k for k in new if not instance.has_dynamic_partition(name, k))
                if missing:
                    instance.add_dynamic_partitions(name, missing)
        except BaseException:
            instance.dispose()
            raise
        return cls(instance)

    def __enter__(self) -> "ReverifyRecorder":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.instance.dispose()

    def record(self, outcome: dict[str, Any]) -> dg.ExecuteInProcessResult:
        """One run of the op job recording `outcome`, with a heartbeat and the tags that let a later sweep fail it
        if this process dies mid-run (defs/evals/cli_runs.py)."""
        versions = sorted({done["summary"]["verifier_version"] for done in outcome["partitions"]})
        tags = {CLI_PID_TAG: str(os.getpid()), CLI_HOST_TAG: socket.gethostname()}
        if versions:
            tags[REVERIFY_TAG] = ",".join(versions)
        if outcome["sweep_id"] is not None:
            tags[SWEEP_ID_TAG] = outcome["sweep_id"]
        run_id = str(uuid.uuid4())
        with Heartbeat(self.instance, run_id):
            return _job(outcome).execute_in_process(
                instance=self.instance,
                run_id=run_id,
                tags=tags,
                run_config=dict(SILENT_CONSOLE),
                raise_on_error=False,
            )


def _answer(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def main() -> int:
    """Imports first (at module level), then reads the partitions' keys (the first line of stdin) and opens the
    instance, then the outcome (the second line, defs/reverify.py's `Outcome`); answers one JSON line on stdout:
    the run's id and success, or the error that kept it from being recorded."""
    line = sys.stdin.readline()
    if not line:  # nothing to re-verify, or the CLI stopped first: the instance stays untouched
        return 0
    keys = json.loads(line)
    try:
        recorder = ReverifyRecorder.open(keys)
    except Exception as exc:
        _answer(error=failure_cause(exc))
        return 1
    with recorder:
        line = sys.stdin.readline()
        if not line:  # the CLI stopped before handing anything over: nothing to record
            _answer(error="no outcome came")
            return 1
        try:
            result = recorder.record(json.loads(line))
        except Exception as exc:
            _answer(error=failure_cause(exc))
            return 1
    _answer(run_id=result.run_id, success=result.success)
    return 0


def _exit(code: int) -> None:
    """Ends the process without the interpreter's teardown of Dagster's modules, which costs a third of a second of
    CPU here: the instance is disposed and the answer written by now; what remains to flush is flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit(main())
