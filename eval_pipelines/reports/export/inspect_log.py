"""Inspect AI eval logs, written from the log schema so that inspect_ai is not a dependency: the fields follow the
schema's order, since Inspect reads a log's header by streaming up to `samples`.

A log is one model x scenario, laid out as Inspect lays out an eval with epochs: the dataset is the scenario's tasks
(sample id = task id), and a task's rollouts are that sample's epochs 1..k, so `inspect view` groups them and counts
`dataset.samples x epochs` samples. The log's status follows Inspect's end-of-run rule for `fail_on_error=True` with
`continue_on_fail=True` (every sample runs, as in a sweep): `error` when any sample errored, else `success`, and
`started` while rollouts are still pending."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_pipelines.reports.data import model_label
from eval_pipelines.reports.export.messages import inspect_messages
from eval_pipelines.reports.export.output import AtomicText, ExportError, ExportSummary, dump, exporter_version, iso_utc
from eval_pipelines.reports.export.reader import Group, RolloutRecord, SweepReader, verifier_results

INSPECT_LOG_VERSION = 2
#: The one Inspect scorer of an exported log: the rollout's outcome from its latest programmatic verdicts.
SCORER = "verifiers"
#: Inspect names a model `<provider>/<model>`; simulated models get this provider, so no log passes them off as
#: a real model.
SIMULATED_PROVIDER = "simulated"

_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9.-]+")


def inspect_model(model_name: str, provider: str | None, is_simulated: bool) -> str:
    return f"{SIMULATED_PROVIDER if is_simulated else provider or 'custom'}/{model_name}"


def _metrics(totals: Mapping[str, Any]) -> dict[str, Any]:
    """Inspect metrics from the catalog's `scenario_model_metrics`: the same pass rate and task-clustered
    standard error every report shows. None of them when nothing was scored."""
    row = totals.get("metrics") or {}
    if row.get("pass_rate") is None:
        return {}
    metrics: dict[str, Any] = {"accuracy": {"name": "accuracy", "value": row["pass_rate"], "params": {}}}
    if row.get("clustered_se") is not None:
        metrics["stderr"] = {
            "name": "stderr",
            "value": row["clustered_se"],
            "params": {"cluster": "task_id"},
            "metadata": {k: row.get(k) for k in ("ci_t_low", "ci_t_high", "ci_boot_low", "ci_boot_high")},
        }
    return metrics


def _results(totals: Mapping[str, Any]) -> dict[str, Any]:
    metrics = _metrics(totals)
    score = {
        "name": SCORER,
        "scorer": SCORER,
        "scored_samples": int(totals.get("scored") or 0),
        "unscored_samples": int(totals.get("n") or 0) - int(totals.get("scored") or 0),
        "params": {},
        "metrics": metrics,
    }
    return {
        # Inspect's counts: every sample of the log, and those that finished without an error.
        "total_samples": int(totals.get("n") or 0),
        "completed_samples": completed_samples(totals),
        "scores": [score],
        **({"headline": {"scorer": SCORER, "score": SCORER, "metric": "accuracy"}} if metrics else {}),
    }


def completed_samples(totals: Mapping[str, Any]) -> int:
    return int(totals.get("n") or 0) - int(totals.get("errors") or 0) - int(totals["unfinished"])


def log_status(totals: Mapping[str, Any]) -> str:
    """Inspect's status of a finished eval with `fail_on_error=True, continue_on_fail=True`: `error` as soon as one
    sample errored (its metrics still stand, computed without the errored samples), `success` otherwise."""
    if totals["unfinished"]:
        return "started"
    return "error" if int(totals.get("errors") or 0) else "success"


def _usage(prompt: int | None, completion: int | None, total: int | None, cost: float | None) -> dict[str, Any]:
    if prompt is None and completion is None and total is None:
        return {}
    usage: dict[str, Any] = {
        "input_tokens": int(prompt or 0),
        "output_tokens": int(completion or 0),
        "total_tokens": int(total if total is not None else (prompt or 0) + (completion or 0)),
    }
    if cost is not None:
        usage["total_cost"] = float(cost)
    return usage


def inspect_header(sweep_id: str, group: Group, totals: Mapping[str, Any]) -> dict[str, Any]:
    """Every field of Inspect's EvalLog before `samples`, in the schema's order (Inspect reads a log's header by
    streaming up to `samples`)."""
    simulated = bool(totals.get("is_simulated"))
    model = inspect_model(group.model_name, totals.get("provider"), simulated)
    created = iso_utc(totals.get("created_at")) or datetime.now(UTC).isoformat()
    usage = _usage(
        totals.get("prompt_tokens"), totals.get("completion_tokens"), totals.get("total_tokens"), totals.get("cost_usd")
    )
    version = group.scenario_id.partition(":")[2]
    eval_spec: dict[str, Any] = {
        "eval_id": _digest("eval", sweep_id, group.scenario_id, group.model_name),
        "run_id": sweep_id,
        "created": created,
        "task": group.scenario_id,
        "task_id": _digest("task", sweep_id, group.scenario_id, group.model_name),
        "task_version": version or 0,
        "task_display_name": group.scenario_id,
        "task_attribs": {},
        "task_args": {},
        "task_args_passed": {},
        "tags": ["eval_pipelines", *(["simulated"] if simulated else [])],
        "dataset": {
            "name": group.scenario_id,
            "samples": len(totals.get("task_ids") or []),
            "sample_ids": list(totals.get("task_ids") or []),
        },
        "model": model,
        "model_generate_config": {} if totals.get("temperature") is None else {"temperature": totals["temperature"]},
        "model_base_url": totals.get("base_url"),
        "model_args": {"model": totals.get("model_identifier"), "provider": totals.get("provider")},
        "config": {
            "epochs": int(totals.get("epochs") or 1),
            "fail_on_error": True,
            "continue_on_fail": True,
            "log_samples": True,
        },
        "packages": {"eval_pipelines": exporter_version()},
        "metadata": {
            "sweep_id": sweep_id,
            "model_name": group.model_name,
            "model_label": model_label(group.model_name, simulated),
            "is_simulated": simulated,
            "scenario_id": group.scenario_id,
            "run_ids": list(totals.get("run_ids") or []),
            "exported_by": "eval-pipelines export",
        },
        "scorers": [
            {
                "name": SCORER,
                "options": {},
                "metrics": [
                    {"name": "inspect_ai/accuracy", "options": {}},
                    {"name": "inspect_ai/stderr", "options": {"cluster": "task_id"}},
                ],
                "metadata": {"source": "latest programmatic verifier verdicts (rollout_scores)"},
            }
        ],
    }
    finished = not totals["unfinished"]
    return {
        "version": INSPECT_LOG_VERSION,
        "status": log_status(totals),
        "eval": eval_spec,
        "plan": {
            "name": "plan",
            "steps": [{"solver": "eval_pipelines/agent", "params": {"max_steps": totals.get("max_steps")}}],
            "config": eval_spec["model_generate_config"],
        },
        "results": _results(totals),
        "stats": {
            "started_at": iso_utc(totals.get("started_at")) or created,
            "completed_at": (iso_utc(totals.get("completed_at")) or "") if finished else "",
            "model_usage": {model: usage} if usage else {},
        },
        "invalidated": False,
        "tags": eval_spec["tags"],
        "metadata": eval_spec["metadata"],
    }


def _output(messages: list[dict[str, Any]], model: str, termination_reason: str | None) -> dict[str, Any]:
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if last is None:
        return {"model": model, "choices": [], "completion": ""}
    if last.get("tool_calls"):
        stop_reason = "tool_calls"
    else:
        stop_reason = "stop" if termination_reason == "final_response" else "unknown"
    return {
        "model": model,
        "choices": [{"message": last, "stop_reason": stop_reason}],
        "completion": "" if last.get("tool_calls") else last["content"],
    }


def _score(record: RolloutRecord, completion: str) -> dict[str, Any]:
    row = record.row
    verdicts = verifier_results(row)
    lines = [
        f"{'pass' if v.get('success') else 'FAIL'} {v['verifier']}" + (f": {v['message']}" if v.get("message") else "")
        for v in verdicts
        if v.get("kind") == "programmatic"
    ]
    if row.get("status") != "completed":
        # The agent ran out of steps or time, or crashed: a failure whatever the verifiers said of the state.
        lines.insert(0, f"rollout {row.get('status')}: {row.get('error') or row.get('termination_reason') or ''}")
    return {
        "value": "C" if record.outcome == "passed" else "I",
        "answer": completion,
        "explanation": "\n".join(lines),
        "metadata": {
            "reward": row.get("score"),
            "partial_credit": row.get("partial_credit"),
            "n_verifiers": row.get("n_verifiers"),
            "passed_verifiers": row.get("passed_verifiers"),
        },
        "history": [],
    }


def _eval_error(message: str) -> dict[str, Any]:
    return {"message": message, "traceback": message, "traceback_ansi": message}


def _sample_metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    keys = (
        "rollout_id",
        "sweep_id",
        "run_id",
        "model_name",
        "is_simulated",
        "scenario_id",
        "task_id",
        "task_name",
        "rollout_index",
        "status",
        "termination_reason",
        "outcome",
        "outcome_error_class",
        "attempts",
        "steps_taken",
        "cost_usd",
        "final_answer_is_tool_call",
    )
    found = {key: row.get(key) for key in keys}
    found["error_class"] = found.pop("outcome_error_class")
    found["verifier_results"] = verifier_results(row)
    return found


def inspect_sample(record: RolloutRecord, model: str, epoch: int) -> dict[str, Any]:
    """The rollout as epoch `epoch` of its task's sample; the rollout id is the sample's uuid."""
    row = record.row
    messages = inspect_messages(record, model)
    output = _output(messages, model, row.get("termination_reason"))
    first_user = next((m["content"] for m in messages if m["role"] == "user"), "")
    usage = _usage(row.get("prompt_tokens"), row.get("completion_tokens"), row.get("total_tokens"), row.get("cost_usd"))
    sample: dict[str, Any] = {
        "id": row["task_id"],
        "epoch": epoch,
        "input": row.get("instruction") or first_user,
        "target": "",
        "messages": messages,
        "output": output,
        "scores": _score(record, output["completion"]) if record.outcome in ("passed", "failed") else None,
        "metadata": _sample_metadata(row),
        "model_usage": {model: usage} if usage else {},
        "started_at": iso_utc(row.get("started_at")),
        "completed_at": iso_utc(row.get("completed_at")),
        "total_time": row.get("duration_seconds"),
        "working_time": row.get("duration_seconds"),
        "uuid": row["rollout_id"],
    }
    if sample["scores"] is not None:
        sample["scores"] = {SCORER: sample["scores"]}
    if record.outcome == "error":
        # An error says nothing about the model: Inspect keeps such a sample out of every metric, as we do.
        cause = row.get("error") or row.get("termination_reason") or "no detail recorded"
        sample["error"] = _eval_error(f"{row.get('outcome_error_class')}: {cause}")
    if record.retries:
        sample["error_retries"] = [
            _eval_error(f"attempt {r['attempt']}: {r.get('error_class')}: {r.get('message') or ''}")
            for r in record.retries
        ]
    if row.get("termination_reason") == "max_steps" and row.get("max_steps") is not None:
        sample["limit"] = {"type": "turn", "limit": float(row["max_steps"])}
    return sample


def inspect_log_name(header: Mapping[str, Any]) -> str:
    """`<created>_<task>_<model>_<task id>.json`, Inspect's own layout: `inspect view` lists only JSON logs named
    with a leading timestamp, and reads the task and its id from the name."""
    spec = header["eval"]
    created = datetime.fromisoformat(spec["created"]).astimezone(UTC).isoformat(timespec="seconds")
    parts = (created, spec["task"], spec["model"])
    return "_".join([*(_name_part(part) for part in parts), spec["task_id"]]) + ".json"


def _write_inspect_log(reader: SweepReader, group: Group, out_dir: Path) -> tuple[Path, int]:
    header = inspect_header(reader.sweep_id, group, reader.totals(group))
    model = header["eval"]["model"]
    path = out_dir / inspect_log_name(header)
    written = 0
    epochs = _Epochs()
    with AtomicText(path) as handle:
        # The header first and the samples streamed after it, one batch at a time.
        handle.write(dump(header)[:-1] + ', "samples": [')
        for batch in reader.batches_of(group):
            for record in batch:
                sample = inspect_sample(record, model, epochs.next(record.row["task_id"]))
                handle.write(("," if written else "") + "\n" + dump(sample))
                written += 1
        handle.write("\n]}\n")
    return path, written


class _Epochs:
    """A task's rollouts numbered 1..k in the export order (task, rollout index, rollout id): the rollout index
    plus one in a sweep, and still one (sample id, epoch) per rollout if a task's indexes repeat or skip."""

    def __init__(self) -> None:
        self.task: str | None = None
        self.epoch = 0

    def next(self, task_id: str) -> int:
        if task_id != self.task:
            self.task, self.epoch = task_id, 0
        self.epoch += 1
        return self.epoch


def export_inspect(reader: SweepReader, groups: list[Group], out: Path) -> ExportSummary:
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; inspect writes one log per model x scenario into a directory")
    files: list[Path] = []
    written = 0
    for group in groups:
        path, count = _write_inspect_log(reader, group, out)
        files.append(path)
        written += count
    return ExportSummary(reader.sweep_id, "inspect", files, written, 0, reader.batches)


def _name_part(text: str) -> str:
    """A part of a log's file name, cleaned as Inspect cleans its own: Inspect splits the name on `_`."""
    return _UNSAFE_IN_NAME.sub("-", text).strip("-") or "x"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:22]
