"""The rollout folders `simlab eval` reads (SimLab's CLI writes one per `simlab tasks run`): one
`agent_run_<task>_<time>_<digest>/` per rollout, holding

- `artifacts.json`: SimLab's RunArtifacts (task_id, task, model, provider, messages, tool_calls, tool_results,
  metadata, final_observation, error, steps_taken, max_steps, created_at), with the token, cost and timing
  figures where SimLab's report reads them (`metadata.rollout_metrics`);
- `verifier/reward.json` and `verifier/reward.txt`, as SimLab writes them after its verifiers ran (Harbor's
  layout): the reward, and each programmatic verifier's verdict as one result;
- `agent/trajectory.json`: the rollout's ATIF trajectory, where Harbor and newer SimLab read one.

SimLab's `error` is set only for a rollout that ended in an *error* (not the model's fault), which then has no
reward files: `simlab eval` reports it as an error (termination `error`, no reward) and leaves it out of the
reward-earned rate, as every pass rate here leaves errors out. An agent that ran out of steps or crashed is a
failure with a reward of 0, as SimLab grades it. The folder names come from the rollouts alone, so exporting
again writes the same folders with the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eval_pipelines.reports.export.atif import (
    atif_trajectory,
    export_per_rollout,
    rollout_error,
    rollout_provider,
    write_trajectory,
)
from eval_pipelines.reports.export.messages import CallRequest, Turn, transcript_turns
from eval_pipelines.reports.export.output import (
    AtomicText,
    ExportSummary,
    iso_utc,
    rollout_stem,
    scrubbed,
)
from eval_pipelines.reports.export.reader import Group, RolloutRecord, SweepReader, verifier_results
from eval_pipelines.reports.export.tools import TaskTools

#: The RunArtifacts version SimLab 0.2 writes.
SIMLAB_ARTIFACTS_VERSION = "0.1"
RUN_FOLDER_PREFIX = "agent_run_"
ARTIFACTS_FILE = "artifacts.json"
VERIFIER_DIR = "verifier"
REWARD_JSON = "reward.json"
REWARD_TXT = "reward.txt"
TRAJECTORY_PATH = Path("agent") / "trajectory.json"
#: The `metadata` key of this project's fields of a rollout (SimLab keeps its own runtime's under `cli_runtime`).
METADATA_KEY = "eval_pipelines"


def run_folder_name(row: Mapping[str, Any]) -> str:
    return f"{RUN_FOLDER_PREFIX}{rollout_stem(row)}"


def _wire_call(call: CallRequest) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _messages(turns: list[Turn]) -> list[dict[str, Any]]:
    """The transcript as SimLab's reference agent records it: an assistant turn that calls tools has an object
    content with the calls, and each tool message's content is SimLab's tool payload (call id, server, tool,
    is_error, summary)."""
    messages: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role != "tool":
            if turn.role == "assistant" and turn.calls:
                calls = [_wire_call(c.request) for c in turn.calls]
                messages.append({"role": "assistant", "content": {"content": turn.content, "tool_calls": calls}})
            else:
                messages.append({"role": turn.role, "content": turn.content})
        for call in turn.calls:
            if call.result is None:
                continue
            payload: dict[str, Any] = {
                "tool_call_id": call.request.id,
                "tool_server": call.tool_server,
                "tool_name": call.tool_name,
                "is_error": call.is_error,
            }
            if call.result:
                payload["summary"] = call.result
            messages.append({"role": "tool", "content": payload})
        for call_id, text in turn.unmatched:
            messages.append({"role": "tool", "content": {"tool_call_id": call_id, "summary": text}})
    return messages


def _json_object(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _rollout_metrics(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "token_usage": {
            "prompt_tokens_total": row.get("prompt_tokens"),
            "completion_tokens_total": row.get("completion_tokens"),
            "total_tokens_total": row.get("total_tokens"),
        },
        "timing": {"duration_seconds": row.get("duration_seconds")},
        "cost": {"estimated_cost_usd": row.get("cost_usd")},
    }


def _metadata(record: RolloutRecord) -> dict[str, Any]:
    row = record.row
    keys = (
        "sweep_id",
        "run_id",
        "rollout_id",
        "rollout_index",
        "scenario_id",
        "task_name",
        "model_name",
        "model_identifier",
        "is_simulated",
        "status",
        "termination_reason",
        "attempts",
        "partial_credit",
        "final_answer_is_tool_call",
    )
    ours = {key: row.get(key) for key in keys}
    ours.update(
        outcome=record.outcome,
        error_class=row.get("outcome_error_class"),
        # The agent's own failure (a crash, a timeout) is no SimLab `error`; its text is kept here.
        agent_error=None if record.outcome == "error" else row.get("error"),
    )
    return {"rollout_metrics": _rollout_metrics(row), METADATA_KEY: ours}


def _final_observation(record: RolloutRecord, turns: list[Turn]) -> str | None:
    """The agent's final answer, as SimLab records it: the last assistant text of a rollout that ended on one."""
    if record.row.get("termination_reason") != "final_response":
        return None
    last = next((t for t in reversed(turns) if t.role == "assistant"), None)
    return last.content if last is not None and not last.calls else None


def simlab_artifacts(record: RolloutRecord) -> dict[str, Any]:
    """One rollout as SimLab's RunArtifacts (`artifacts.json`), in its field order, secrets removed."""
    row = record.row
    turns = transcript_turns(record)
    artifacts = {
        "version": SIMLAB_ARTIFACTS_VERSION,
        "task_id": row["task_id"],
        "task": row.get("instruction") or next((t.content for t in turns if t.role == "user"), ""),
        "model": row["model_name"],
        "provider": rollout_provider(row),
        "messages": _messages(turns),
        "tool_calls": [
            {
                "tool_server": call["tool_server"],
                "tool_name": call["tool_name"],
                "parameters": _json_object(call.get("parameters_json")),
            }
            for call in record.tool_calls
        ],
        "tool_results": [
            {"observation": {"text": call.get("observation")}, "is_error": bool(call.get("is_error"))}
            for call in record.tool_calls
        ],
        "metadata": _metadata(record),
        "final_observation": _final_observation(record, turns),
        "error": rollout_error(record),
        "steps_taken": int(row.get("steps_taken") or 0),
        "max_steps": row.get("max_steps"),
        "created_at": iso_utc(row.get("created_at")) or iso_utc(row.get("started_at")),
    }
    return dict(scrubbed(artifacts))


def simlab_reward(record: RolloutRecord) -> dict[str, Any] | None:
    """`verifier/reward.json` as SimLab writes it (reward, one result per programmatic verifier, a rubric judge's
    verdict as `rubric_result`); None for a rollout without a pass or a fail."""
    if record.outcome not in ("passed", "failed"):
        return None
    verdicts = verifier_results(record.row)
    payload: dict[str, Any] = {
        "reward": float(record.row.get("score") or 0.0),
        "verifier_results": [
            {
                "module": v["verifier"],
                "success": bool(v.get("success")),
                "message": v.get("message") or "",
                "output": "",
            }
            for v in verdicts
            if v.get("kind") == "programmatic"
        ],
    }
    rubric = next((v for v in verdicts if v.get("kind") == "rubric"), None)
    if rubric is not None:
        payload["rubric_result"] = {
            "score": rubric.get("reward"),
            "verdict": ("PASS" if rubric.get("success") else "FAIL")
            + (f": {rubric['message']}" if rubric.get("message") else ""),
        }
    return dict(scrubbed(payload))


def _write_json(path: Path, value: Any) -> None:
    with AtomicText(path) as handle:
        handle.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def write_run_folder(folder: Path, record: RolloutRecord, tools: list[dict[str, Any]] | None) -> None:
    _write_json(folder / ARTIFACTS_FILE, simlab_artifacts(record))
    write_trajectory(folder / TRAJECTORY_PATH, atif_trajectory(record, tools))
    verifier = folder / VERIFIER_DIR
    reward = simlab_reward(record)
    if reward is None:
        # A re-export after the rollout lost its verdict (re-verified into an error) leaves no stale reward.
        for name in (REWARD_JSON, REWARD_TXT):
            (verifier / name).unlink(missing_ok=True)
        return
    _write_json(verifier / REWARD_JSON, reward)
    with AtomicText(verifier / REWARD_TXT) as handle:
        handle.write("1" if record.outcome == "passed" else "0")


def export_simlab(reader: SweepReader, groups: list[Group], out: Path, tools: TaskTools) -> ExportSummary:
    def write(out: Path, group: Group, record: RolloutRecord) -> None:
        task_tools = tools.of(group.scenario_id, record.row["task_id"])
        write_run_folder(out / run_folder_name(record.row), record, task_tools)

    return export_per_rollout(reader, groups, out, format_name="simlab", unit="folder", write=write)
