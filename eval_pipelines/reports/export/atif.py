"""ATIF (Agent Trajectory Interchange Format), the trajectory Harbor, verifiers and SimLab read: one trajectory per
rollout, written from the format's published schema (Harbor's RFC 0001), so no ATIF package is a dependency.

A system or user message is a step of its own; an assistant message is an agent step holding its tool calls and,
as its observation, the tool results that answered them (paired by call id). The verdict has no field in ATIF: the
reward, outcome and verifier results are in the root's `extra.eval_pipelines`, and a rollout that ended in an
*error* (the model endpoint, a tool server, a verifier...) has reward null and outcome `error` there, and ends
with a system step saying so, never a reward of 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from eval_pipelines.reports.export.inspect_log import SIMULATED_PROVIDER
from eval_pipelines.reports.export.messages import AnsweredCall, Turn, transcript_turns
from eval_pipelines.reports.export.output import (
    AtomicText,
    ExportError,
    ExportSummary,
    dump,
    exporter_version,
    iso_utc,
    name_part,
    rollout_stem,
    scrubbed,
)
from eval_pipelines.reports.export.reader import Group, RolloutRecord, SweepReader, verifier_results
from eval_pipelines.reports.export.tools import TaskTools

#: The newest ATIF version Harbor's models accept; nothing of a later version (audio content) is written.
ATIF_SCHEMA_VERSION = "ATIF-v1.7"
#: The agent system ATIF names: the harness that ran the rollout (the model is `agent.model_name`).
ATIF_AGENT_NAME = "eval_pipelines"
#: The root `extra` key holding this project's fields of a rollout.
EXTRA_KEY = "eval_pipelines"


def rollout_provider(row: Mapping[str, Any]) -> str:
    """The provider a rollout's model is named under; simulated models get their own, so no export passes them
    off as a real model."""
    return SIMULATED_PROVIDER if row.get("is_simulated") else row.get("provider") or "custom"


def rollout_error(record: RolloutRecord) -> str | None:
    """The error of a rollout that ended in one (outcome `error`: not the model's fault), as one line naming its
    class; None for a pass, a fail, or a rollout not yet verified."""
    if record.outcome != "error":
        return None
    row = record.row
    cause = row.get("error") or row.get("termination_reason") or "no detail recorded"
    return f"{row.get('outcome_error_class') or 'error'}: {cause}"


def _timestamp(text: str | None) -> str | None:
    """A message's recorded time when it is ISO 8601 (the form ATIF requires), else none."""
    if not text:
        return None
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return text


def _tool_call(call: AnsweredCall) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "tool_call_id": call.request.id,
        "function_name": call.request.name,
        "arguments": call.arguments if call.arguments is not None else {},
    }
    extra: dict[str, Any] = {}
    if call.tool_server:
        extra["tool_server"] = call.tool_server
    if call.arguments is None:
        # ATIF's arguments are an object: the model's text goes beside it, as it wrote it.
        extra["raw_arguments"] = call.request.arguments
        extra["arguments_error"] = call.arguments_error or "the arguments are not a JSON object"
    if extra:
        entry["extra"] = extra
    return entry


def _observation(turn: Turn) -> dict[str, Any] | None:
    results: list[dict[str, Any]] = [
        {
            "source_call_id": call.request.id,
            "content": call.result,
            "extra": {"tool_server": call.tool_server, "tool_name": call.tool_name, "is_error": call.is_error},
        }
        for call in turn.calls
        if call.result is not None
    ]
    # A tool message that answers no call of the turn keeps its id out of `source_call_id`, which must name one.
    results += [{"content": content, "extra": {"tool_call_id": call_id}} for call_id, content in turn.unmatched]
    return {"results": results} if results else None


def _step(step_id: int, turn: Turn) -> dict[str, Any]:
    source = {"assistant": "agent", "user": "user"}.get(turn.role, "system")
    step: dict[str, Any] = {"step_id": step_id, "source": source, "message": turn.content}
    if (timestamp := _timestamp(turn.timestamp)) is not None:
        step["timestamp"] = timestamp
    if source == "agent" and turn.calls:
        step["tool_calls"] = [_tool_call(call) for call in turn.calls]
    if (observation := _observation(turn)) is not None:
        step["observation"] = observation
    if turn.role not in ("assistant", "user", "system"):
        step["extra"] = {"role": turn.role}
    return step


def _status_step(step_id: int, record: RolloutRecord) -> dict[str, Any] | None:
    """The closing system step of a rollout that did not end on the agent's final answer: an error, or the
    agent's failure to finish (out of steps or time, a crash of its own)."""
    row = record.row
    error = rollout_error(record)
    if error is None and row.get("status") in ("completed", "pending", "running", None):
        return None
    message = error or f"rollout {row.get('status')}: {row.get('error') or row.get('termination_reason') or ''}"
    extra = {
        "kind": "run_status",
        "status": row.get("status"),
        "termination_reason": row.get("termination_reason"),
        "outcome": record.outcome,
        "error_class": row.get("outcome_error_class"),
    }
    return {"step_id": step_id, "source": "system", "message": message.strip(), "extra": extra}


def _final_metrics(row: Mapping[str, Any], total_steps: int) -> dict[str, Any]:
    metrics: dict[str, Any] = {
        "total_prompt_tokens": row.get("prompt_tokens"),
        "total_completion_tokens": row.get("completion_tokens"),
        "total_cost_usd": row.get("cost_usd"),
        "total_steps": total_steps,
        "extra": {
            "total_tokens": row.get("total_tokens"),
            "tool_calls": row.get("steps_taken"),
            "duration_seconds": row.get("duration_seconds"),
        },
    }
    return {key: value for key, value in metrics.items() if value is not None}


def _rollout_extra(record: RolloutRecord) -> dict[str, Any]:
    row = record.row
    keys = (
        "sweep_id",
        "run_id",
        "rollout_id",
        "rollout_index",
        "scenario_id",
        "task_id",
        "task_name",
        "model_name",
        "is_simulated",
        "status",
        "termination_reason",
        "attempts",
        "steps_taken",
        "max_steps",
        "partial_credit",
        "n_verifiers",
        "passed_verifiers",
        "final_answer_is_tool_call",
    )
    extra = {key: row.get(key) for key in keys}
    extra.update(
        outcome=record.outcome,
        # A reward only for a pass or a fail: an error or a missing verdict says nothing about the model.
        reward=row.get("score") if record.outcome in ("passed", "failed") else None,
        error_class=row.get("outcome_error_class"),
        error=rollout_error(record) or row.get("error"),
        verifier_results=verifier_results(row),
        created_at=iso_utc(row.get("created_at")),
        started_at=iso_utc(row.get("started_at")),
        completed_at=iso_utc(row.get("completed_at")),
    )
    return extra


def atif_trajectory(record: RolloutRecord, tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """One rollout as an ATIF trajectory (a JSON object), secrets removed."""
    row = record.row
    steps = [_step(index, turn) for index, turn in enumerate(transcript_turns(record), start=1)]
    if (closing := _status_step(len(steps) + 1, record)) is not None:
        steps.append(closing)
    agent: dict[str, Any] = {
        "name": ATIF_AGENT_NAME,
        "version": exporter_version(),
        "model_name": row.get("model_identifier") or row["model_name"],
        "tool_definitions": None,
        "extra": {
            "provider": rollout_provider(row),
            "model_name": row["model_name"],
            "is_simulated": bool(row.get("is_simulated")),
            "temperature": row.get("temperature"),
        },
    }
    trajectory: dict[str, Any] = scrubbed(
        {
            "schema_version": ATIF_SCHEMA_VERSION,
            "session_id": row["rollout_id"],
            "trajectory_id": row["rollout_id"],
            "agent": agent,
            "steps": steps,
            "final_metrics": _final_metrics(row, len(steps)),
            "extra": {EXTRA_KEY: _rollout_extra(record)},
        }
    )
    # The scenario's own tool definitions are no run data: scrubbing would drop a parameter named like a secret.
    if tools is None:
        del trajectory["agent"]["tool_definitions"]
    else:
        trajectory["agent"]["tool_definitions"] = tools
    return trajectory


def atif_file_name(row: Mapping[str, Any]) -> str:
    """`<model>_<task>_<time>_<digest>.json`: unique per rollout, the same at every export."""
    return f"{name_part(row.get('model_name'), 'model')}_{rollout_stem(row)}.json"


def write_trajectory(path: Path, trajectory: Mapping[str, Any]) -> None:
    with AtomicText(path) as handle:
        handle.write(dump(trajectory) + "\n")


def export_per_rollout(
    reader: SweepReader,
    groups: list[Group],
    out: Path,
    *,
    format_name: str,
    unit: str,
    write: Callable[[Path, Group, RolloutRecord], None],
) -> ExportSummary:
    """The exports that write one `unit` (a file, a folder) per rollout into the directory `out` (ATIF
    trajectories, SimLab run folders): `write(out, group, record)` for every rollout of `groups`."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; {format_name} writes one {unit} per rollout into a directory")
    written = 0
    for group in groups:
        for batch in reader.batches_of(group):
            for record in batch:
                write(out, group, record)
                written += 1
    return ExportSummary(reader.sweep_id, format_name, [out], written, 0, reader.batches)


def export_atif(reader: SweepReader, groups: list[Group], out: Path, tools: TaskTools) -> ExportSummary:
    def write(out: Path, group: Group, record: RolloutRecord) -> None:
        trajectory = atif_trajectory(record, tools.of(group.scenario_id, record.row["task_id"]))
        write_trajectory(out / atif_file_name(record.row), trajectory)

    return export_per_rollout(reader, groups, out, format_name="atif", unit="trajectory", write=write)
