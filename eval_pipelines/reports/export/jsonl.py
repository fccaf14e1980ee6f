"""The SFT/RL form: one line per rollout, and only passed or failed ones unless asked, because an error or a
missing verdict says nothing about the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_pipelines.reports.export.messages import openai_messages
from eval_pipelines.reports.export.output import AtomicText, ExportError, ExportSummary, dump
from eval_pipelines.reports.export.reader import Group, RolloutRecord, SweepReader, verifier_results
from eval_pipelines.reports.export.tools import TaskTools


def jsonl_line(record: RolloutRecord, tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    row = record.row
    return {
        "sweep_id": row["sweep_id"],
        "run_id": row["run_id"],
        "rollout_id": row["rollout_id"],
        "rollout_index": row["rollout_index"],
        "model_name": row["model_name"],
        "model_identifier": row.get("model_identifier"),
        "is_simulated": bool(row.get("is_simulated")),
        "scenario_id": row["scenario_id"],
        "task_id": row["task_id"],
        "messages": openai_messages(record),
        "tools": tools,
        "reward": row.get("score"),
        "outcome": record.outcome,
        "error_class": row.get("outcome_error_class"),
        "verifier_results": verifier_results(row),
        "termination_reason": row.get("termination_reason"),
        "usage": {
            "prompt_tokens": row.get("prompt_tokens"),
            "completion_tokens": row.get("completion_tokens"),
            "total_tokens": row.get("total_tokens"),
            "cost_usd": row.get("cost_usd"),
        },
    }


def export_jsonl(
    reader: SweepReader, groups: list[Group], out: Path, tools: TaskTools, include_errors: bool
) -> ExportSummary:
    if out.is_dir():
        raise ExportError(f"--out {out} is a directory; jsonl writes one file, e.g. {out / 'rollouts.jsonl'}")
    written = left_out = 0
    with AtomicText(out) as handle:
        for group in groups:
            for batch in reader.batches_of(group):
                for record in batch:
                    # Only a pass or a fail says something about the model; an error or a missing verdict does not.
                    if record.outcome not in ("passed", "failed") and not include_errors:
                        left_out += 1
                        continue
                    line = jsonl_line(record, tools.of(group.scenario_id, record.row["task_id"]))
                    handle.write(dump(line) + "\n")
                    written += 1
    return ExportSummary(reader.sweep_id, "jsonl", [out], written, left_out, reader.batches)
