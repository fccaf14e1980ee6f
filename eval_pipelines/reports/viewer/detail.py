"""A rollout page's content, shaped from the rows the queries read: the transcript with each tool call's result
and state diffs beside it, the rubric judge's verdicts, the status events and the NPC conversations.

Nothing here renders HTML: the templates do, with autoescaping, so every string below may be hostile model output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from eval_pipelines.llm.types import wire_tool_name
from eval_pipelines.reports.export.messages import openai_messages
from eval_pipelines.reports.export.reader import RolloutRecord
from eval_pipelines.schemas.artifacts import META_NPC_TRANSCRIPTS, RunArtifacts, UnreadableArtifacts


def pretty_json(text: str | None) -> str:
    """JSON text indented for reading; any other text as it is (a model's malformed arguments stay visible)."""
    if text is None:
        return ""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(value, indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class StateDiffView:
    tool_server: str
    scope: str
    tool_name: str | None
    step_index: int | None
    summary: str
    before: str
    after: str

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> StateDiffView:
        return cls(
            tool_server=row["tool_server"],
            scope=row["scope"],
            tool_name=row.get("tool_name"),
            step_index=row.get("step_index"),
            summary=row["summary"],
            before=pretty_json(row.get("before_json")),
            after=pretty_json(row.get("after_json")),
        )


@dataclass(frozen=True)
class CallRequest:
    """A tool call as the assistant wrote it."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class CallResult:
    """A `tool_calls` row: what was called, what came back, and the state it changed."""

    call_index: int
    tool_server: str
    tool_name: str
    parameters: str
    observation: str | None
    is_error: bool
    raw_arguments: str | None
    arguments_error: str | None
    diffs: list[StateDiffView] = field(default_factory=list)

    @property
    def name(self) -> str:
        return wire_tool_name(self.tool_server, self.tool_name)


@dataclass(frozen=True)
class Turn:
    index: int
    role: str
    content: str
    requests: list[CallRequest]
    #: for a tool message, the call it answers
    call: CallResult | None = None


@dataclass(frozen=True)
class Transcript:
    turns: list[Turn]
    #: calls no message answers (an agent may record calls without a chat transcript)
    unanswered: list[CallResult]
    #: `full` diffs: each server's initial vs final state
    full_diffs: list[StateDiffView]
    #: per-call diffs no recorded call accounts for
    unmatched_diffs: list[StateDiffView]


def _call_results(
    calls: Sequence[Mapping[str, Any]], diffs: Sequence[Mapping[str, Any]]
) -> tuple[list[CallResult], list[StateDiffView]]:
    """Each call with the diffs it caused. A diff's `step_index` counts the steps its tool server took in this
    rollout, so the k-th call that reached a server made that server's step k; a call whose arguments were not
    JSON never reached it. Diffs that match no call by server, step and tool are returned apart."""
    by_step: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    unmatched: list[Mapping[str, Any]] = []
    for diff in diffs:
        if diff["scope"] != "tool_call":
            continue
        if diff.get("step_index") is None:
            unmatched.append(diff)
        else:
            by_step.setdefault((diff["tool_server"], diff["step_index"]), []).append(diff)
    steps: dict[str, int] = {}
    results: list[CallResult] = []
    for call in calls:
        caused: list[Mapping[str, Any]] = []
        if not call.get("arguments_error"):
            server = call["tool_server"]
            step = steps.get(server, 0)
            steps[server] = step + 1
            found = by_step.get((server, step), [])
            caused = [d for d in found if d.get("tool_name") in (None, call["tool_name"])]
            by_step[(server, step)] = [d for d in found if d not in caused]
        results.append(
            CallResult(
                call_index=call["call_index"],
                tool_server=call["tool_server"],
                tool_name=call["tool_name"],
                parameters=pretty_json(call.get("parameters_json")),
                observation=call.get("observation"),
                is_error=bool(call.get("is_error")),
                raw_arguments=call.get("raw_arguments"),
                arguments_error=call.get("arguments_error"),
                diffs=[StateDiffView.of(d) for d in caused],
            )
        )
    unmatched += [d for left in by_step.values() for d in left]
    return results, [StateDiffView.of(d) for d in unmatched]


def transcript(record: RolloutRecord, diffs: Sequence[Mapping[str, Any]]) -> Transcript:
    """The conversation in the export's OpenAI form (one reading of content parts and call arguments for every
    consumer), with each tool message joined to its `tool_calls` row: results come in the order of the recorded
    calls, so the k-th tool message answers the k-th row, provided the function names agree."""
    results, unmatched = _call_results(record.tool_calls, diffs)
    pending = iter(results)
    upcoming = next(pending, None)
    functions: dict[str, str] = {}
    turns: list[Turn] = []
    for index, message in enumerate(openai_messages(record)):
        requests = [
            CallRequest(
                call_id=str(call.get("id", "")),
                name=str(call["function"]["name"]),
                arguments=pretty_json(call["function"]["arguments"]),
            )
            for call in message.get("tool_calls") or []
        ]
        functions.update((r.call_id, r.name) for r in requests)
        answered: CallResult | None = None
        if message["role"] == "tool" and upcoming is not None:
            function = functions.get(str(message.get("tool_call_id") or ""))
            if function is None or function == upcoming.name:
                answered, upcoming = upcoming, next(pending, None)
        turns.append(Turn(index, str(message["role"]), str(message.get("content") or ""), requests, answered))
    unanswered = ([upcoming] if upcoming is not None else []) + list(pending)
    full = [StateDiffView.of(d) for d in diffs if d["scope"] != "tool_call"]
    return Transcript(turns, unanswered, full, unmatched)


def rubric_verdicts(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rubric-judge rows with their judgement (`output_json`: verdict, score, evidence, failed criteria,
    dimension scores) read out; a row whose output is not an object keeps only its message."""
    verdicts = []
    for row in rows:
        try:
            output = json.loads(row.get("output_json") or "null")
        except ValueError:
            output = None
        judged = output if isinstance(output, dict) else {}

        def texts(key: str, judged: dict[str, Any] = judged) -> list[str]:
            value = judged.get(key)
            return [str(v) for v in value] if isinstance(value, list) else []

        dimensions = judged.get("dimension_scores")
        verdicts.append(
            {
                "row": row,
                "verdict": judged.get("verdict"),
                "score": judged.get("score", row.get("reward")),
                "threshold": judged.get("threshold"),
                "confidence": judged.get("confidence"),
                "model": judged.get("model"),
                "reason": judged.get("reason"),
                "evidence": texts("evidence"),
                "failed_criteria": texts("failed_criteria"),
                "dimensions": [d for d in dimensions if isinstance(d, dict)] if isinstance(dimensions, list) else [],
            }
        )
    return verdicts


@dataclass(frozen=True)
class StatusEvent:
    at: datetime | None
    status: str
    detail: str | None = None


def status_events(row: Mapping[str, Any], attempts: Sequence[Mapping[str, Any]]) -> list[StatusEvent]:
    """The rollout's life as the warehouse keeps it: created, started, each attempt's end (an errored attempt
    with its class and cause), and the final status with why it stopped."""
    events = [StatusEvent(row.get("created_at"), "created"), StatusEvent(row.get("started_at"), "started")]
    for attempt in attempts:
        if attempt.get("is_final"):
            continue
        if attempt.get("error_class"):
            what = f"attempt {attempt['attempt']} ended in error: {attempt['error_class']}, retried"
        else:
            what = f"attempt {attempt['attempt']} ended {attempt['status']}"
        events.append(StatusEvent(attempt.get("completed_at"), what, attempt.get("message")))
    final = next((a for a in attempts if a.get("is_final")), None)
    reason = row.get("termination_reason")
    if row.get("outcome") == "error":
        # An error is stored with the engine's status "failed"; what a person must read is that it is an error.
        ended = "error" + (f": {row['error_class']}" if row.get("error_class") else "")
    else:
        ended = f"{row.get('status')}" + (f": {reason}" if reason else "")
    if final is not None and final["attempt"] > 1:
        ended = f"attempt {final['attempt']} ended {ended}"
    events.append(StatusEvent(row.get("completed_at"), ended, final.get("message") if final else row.get("error")))
    return [e for e in events if e.at is not None or e is events[-1]]


def npc_transcripts(artifacts_path: str | None) -> dict[str, list[dict[str, str]]] | None:
    """profile -> the NPC's conversation with the agent, from the rollout's trace (the warehouse does not keep
    them). None when the trace cannot be read here (another machine's path, a remote service's download that is
    gone, a damaged file, or one above the stored-artifacts size limit); {} when the rollout had no NPC."""
    if not artifacts_path:
        return None
    try:
        trace = RunArtifacts.load(artifacts_path)
    except (OSError, UnreadableArtifacts):
        return None
    raw = trace.metadata.get(META_NPC_TRANSCRIPTS)
    if not isinstance(raw, dict):
        return {}
    return {
        str(profile): [
            {key: str(turn.get(key) or "") for key in ("role", "content", "timestamp")}
            for turn in turns
            if isinstance(turn, dict)
        ]
        for profile, turns in raw.items()
        if isinstance(turns, list)
    }


@dataclass(frozen=True)
class RolloutDetail:
    #: the `rollouts` row with its index entry (outcome, error class, flags)
    row: dict[str, Any]
    label: str
    task: dict[str, Any] | None
    transcript: Transcript
    #: latest programmatic verdicts
    verdicts: list[dict[str, Any]]
    #: latest rubric-judge verdicts, read out
    rubric: list[dict[str, Any]]
    #: older verdicts (re-verification appends; the latest of each verifier is above)
    verdict_history: list[dict[str, Any]]
    #: latest quality and safety judgements
    judgements: list[dict[str, Any]]
    judgement_history: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    events: list[StatusEvent]
    npc_transcripts: dict[str, list[dict[str, str]]] | None
