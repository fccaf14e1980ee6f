"""`eval-pipelines export`: a sweep's results in the formats other tools read.

- `inspect`: Inspect AI eval logs (JSON, log format version 2), one per model x scenario, for `inspect view` and
  `inspect_ai.log.read_eval_log`. Written here from the log schema, so inspect_ai is not a dependency.
- `jsonl`: one rollout per line in OpenAI chat-messages form with its reward, for SFT and RL loaders.
- `parquet`: the sweep's rows of every table, one Parquet file per table.
- `atif`: one ATIF trajectory per rollout (Harbor's Agent Trajectory Interchange Format, read by Harbor, verifiers
  and SimLab), written from the format's schema, so no ATIF package is a dependency.
- `simlab`: one SimLab run folder per rollout (`artifacts.json`, `verifier/reward.json` and `reward.txt`, and the
  ATIF trajectory at `agent/trajectory.json`), the layout `simlab eval` reads.

Reads the DuckDB catalog only, and streams: rollouts are read per model x scenario in batches of `batch_size`, each
with its messages, tool calls and retries. A model x scenario's rows are read once per table, spooled to temporary
files by their rollout's place in the export order (under `spool_dir`, default the system's temporary directory), and
taken back in that order (see `reader.py`), so the time grows linearly with the sweep and the memory stays bounded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipelines.lib.lazy_names import lazy_names
from eval_pipelines.reports.export.output import ExportError, ExportSummary
from eval_pipelines.reports.export.reader import DEFAULT_BATCH_SIZE

if TYPE_CHECKING:
    from eval_pipelines.reports.export.atif import ATIF_SCHEMA_VERSION, atif_file_name, atif_trajectory
    from eval_pipelines.reports.export.inspect_log import (
        INSPECT_LOG_VERSION,
        SCORER,
        SIMULATED_PROVIDER,
        inspect_header,
        inspect_log_name,
        inspect_model,
        inspect_sample,
    )
    from eval_pipelines.reports.export.jsonl import jsonl_line
    from eval_pipelines.reports.export.messages import CallRequest, inspect_messages, openai_messages
    from eval_pipelines.reports.export.parquet import PARQUET_TABLES
    from eval_pipelines.reports.export.reader import Group, RolloutRecord, SweepReader
    from eval_pipelines.reports.export.simlab_runs import run_folder_name, simlab_artifacts, simlab_reward
    from eval_pipelines.reports.export.tools import TaskTools

#: Where each name below lives. They load on first use (PEP 562): an export imports the one format's writer it
#: needs, not every format's (the ATIF and SimLab writers' tool listings alone pull in the tool servers and httpx).
_HOMES = {
    "ATIF_SCHEMA_VERSION": "atif",
    "atif_file_name": "atif",
    "atif_trajectory": "atif",
    "INSPECT_LOG_VERSION": "inspect_log",
    "SCORER": "inspect_log",
    "SIMULATED_PROVIDER": "inspect_log",
    "inspect_header": "inspect_log",
    "inspect_log_name": "inspect_log",
    "inspect_model": "inspect_log",
    "inspect_sample": "inspect_log",
    "jsonl_line": "jsonl",
    "CallRequest": "messages",
    "inspect_messages": "messages",
    "openai_messages": "messages",
    "PARQUET_TABLES": "parquet",
    "Group": "reader",
    "RolloutRecord": "reader",
    "SweepReader": "reader",
    "run_folder_name": "simlab_runs",
    "simlab_artifacts": "simlab_runs",
    "simlab_reward": "simlab_runs",
    "TaskTools": "tools",
}

__all__ = [
    "ATIF_SCHEMA_VERSION",
    "DEFAULT_BATCH_SIZE",
    "FORMATS",
    "INSPECT_LOG_VERSION",
    "PARQUET_TABLES",
    "SCORER",
    "SIMULATED_PROVIDER",
    "CallRequest",
    "ExportError",
    "ExportSummary",
    "Group",
    "RolloutRecord",
    "SweepReader",
    "TaskTools",
    "atif_file_name",
    "atif_trajectory",
    "export_results",
    "inspect_header",
    "inspect_log_name",
    "inspect_messages",
    "inspect_model",
    "inspect_sample",
    "jsonl_line",
    "openai_messages",
    "run_folder_name",
    "simlab_artifacts",
    "simlab_reward",
]


__getattr__ = lazy_names(__name__, globals(), _HOMES)


FORMATS = ("inspect", "jsonl", "parquet", "atif", "simlab")


def export_results(
    db: Path,
    out: Path,
    fmt: str,
    *,
    sweep_id: str | None = None,
    model_name: str | None = None,
    scenario_id: str | None = None,
    include_errors: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    scenarios_root: Path | None = None,
    spool_dir: Path | None = None,
) -> ExportSummary:
    """Export one sweep (default: the most recently started), narrowed to a model and/or a scenario.

    `out` is a directory for inspect, parquet, atif and simlab, a file for jsonl. `include_errors` (jsonl only)
    also writes errored and not yet verified rollouts, with reward null; the other formats always hold them (the
    inspect logs as samples with `error` set and as unscored samples). `spool_dir` is where a model x scenario's
    rows are spooled while it is exported (every format but parquet; default: the system's temporary directory).
    """
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose one of {list(FORMATS)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    from eval_pipelines.reports.data import open_catalog, resolve_sweep
    from eval_pipelines.reports.export.reader import SweepReader, select_groups

    con = open_catalog(db)
    try:
        # Timestamps come back in UTC, whatever the machine's zone: every log and line states them so.
        con.execute("set TimeZone = 'UTC'")
        sweep = resolve_sweep(con, sweep_id)
        groups = select_groups(con, sweep, model_name, scenario_id)
        if fmt == "parquet":
            from eval_pipelines.reports.export.parquet import export_parquet

            return export_parquet(con, sweep, model_name, scenario_id, Path(out))
        # The jsonl lines alone show no tool results.
        reader = SweepReader(con, sweep, batch_size, tool_results=fmt != "jsonl", spool_dir=spool_dir)
        try:
            if fmt == "inspect":
                from eval_pipelines.reports.export.inspect_log import export_inspect

                return export_inspect(reader, groups, Path(out))
            from eval_pipelines.inputs.paths import scenarios_dir
            from eval_pipelines.reports.export.tools import TaskTools

            tools = TaskTools(scenarios_root or scenarios_dir())
            if fmt == "atif":
                from eval_pipelines.reports.export.atif import export_atif

                return export_atif(reader, groups, Path(out), tools)
            if fmt == "simlab":
                from eval_pipelines.reports.export.simlab_runs import export_simlab

                return export_simlab(reader, groups, Path(out), tools)
            from eval_pipelines.reports.export.jsonl import export_jsonl

            return export_jsonl(reader, groups, Path(out), tools, include_errors)
        finally:
            reader.close()
    finally:
        con.close()
