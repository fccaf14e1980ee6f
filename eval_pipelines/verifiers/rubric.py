"""The rubric judge: the universal verifier that asks an OpenAI-compatible model to score a rollout against a rubric.

The judge sees the rubric (a task override's `rubric_markdown` wins over the task's structured rubric), the
instruction, a compact transcript and the whole-rollout state diffs. It asks for one JSON object
`{verdict, score, confidence, evidence, failed_criteria, dimension_scores: [{dimension, score, reason}]}`.

The verdict is derived from the score, never taken on the model's word: PASS iff the clamped score reaches the
threshold. A failed call, a reply without a JSON object, or a JSON object without a numeric score is an ERROR
with score 0 and the reason kept; it is never a silent pass.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.errors import LLMBadRequestError, LLMError, truncate
from eval_pipelines.llm.pricing import estimate_cost_usd
from eval_pipelines.llm.types import ChatMessage, ChatRequest
from eval_pipelines.schemas.artifacts import META_STATE_DIFFS, RunArtifacts
from eval_pipelines.schemas.scenarios import Rubric
from eval_pipelines.schemas.tools import DiffScope
from eval_pipelines.schemas.verifiers import RUBRIC_PASS_THRESHOLD, JudgeVerdict, VerifierKind, VerifierOutcome

#: Where the executor puts a task override's rubric markdown.
META_RUBRIC_MARKDOWN = "rubric_markdown"
#: The `verifier` name of the judge's rows in the `verifications` table.
RUBRIC_VERIFIER_MODULE = "rubric_judge"
#: Rubric-judge calls in flight at once when the sweep's rubric_judge sets no `max_concurrency`.
DEFAULT_RUBRIC_JUDGE_CONCURRENCY = 8

DEFAULT_JUDGE_MAX_TOKENS = 1024
#: Compaction limits of the prompt. They are part of the judge's version: changing one changes what it sees.
MAX_MESSAGE_CHARS = 1200
MAX_TOOL_ARGUMENT_CHARS = 400
MAX_OBSERVATION_CHARS = 600
MAX_TRANSCRIPT_ITEMS = 60
TRANSCRIPT_HEAD_ITEMS = 20
MAX_TRANSCRIPT_CHARS = 24_000
MAX_DIFF_VALUE_CHARS = 1500
MAX_STATE_SECTION_CHARS = 30_000
MAX_REPLY_EXCERPT_CHARS = 2000

#: Tags delimiting the prompt's sections. `llm/sim_judge.py` (the offline judge) reads the same tags.
TAG_RUBRIC = "rubric"
TAG_INSTRUCTION = "instruction"
TAG_TRANSCRIPT = "transcript"
TAG_STATE_CHANGES = "state_changes"
#: Markers of one changed item in the state-changes section.
ITEM_ADDED, ITEM_CHANGED, ITEM_REMOVED = "[added]", "[changed]", "[removed]"
NO_FULL_DIFF_TEXT = "(no whole-rollout state diff was recorded for this rollout)"

SYSTEM_PROMPT_TEMPLATE = """\
You are a strict evaluator of an AI agent's work on a task. Judge what the agent actually changed in its \
environment (the state changes) and what it did (the transcript) against the rubric. Claims in the agent's \
messages that the state changes do not back up earn nothing.

Reply with exactly one JSON object and nothing else:
{{"verdict": "PASS" or "FAIL", "score": <number from 0 to 1>, "confidence": <number from 0 to 1>, \
"evidence": [<short facts quoted from the state changes or the transcript>], \
"failed_criteria": [<rubric criteria that are not met, as written in the rubric>], \
"dimension_scores": [{{"dimension": <a rubric criterion or quality dimension>, "score": <number from 0 to 1>, \
"reason": <one sentence>}}]}}

A score of {threshold} or more is a PASS."""

USER_PROMPT_TEMPLATE = """\
<{tag_rubric}>
{rubric}
</{tag_rubric}>

<{tag_instruction}>
{instruction}
</{tag_instruction}>

<{tag_transcript}>
{transcript}
</{tag_transcript}>

<{tag_state}>
{state_changes}
</{tag_state}>"""

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


def judge_version(model: str, threshold: float = RUBRIC_PASS_THRESHOLD) -> str:
    """Content hash of what decides a judge's scores: its prompt templates and limits, model and threshold."""
    limits = (
        MAX_MESSAGE_CHARS,
        MAX_TOOL_ARGUMENT_CHARS,
        MAX_OBSERVATION_CHARS,
        MAX_TRANSCRIPT_ITEMS,
        TRANSCRIPT_HEAD_ITEMS,
        MAX_TRANSCRIPT_CHARS,
        MAX_DIFF_VALUE_CHARS,
        MAX_STATE_SECTION_CHARS,
    )
    digest = hashlib.sha256()
    for part in (SYSTEM_PROMPT_TEMPLATE, USER_PROMPT_TEMPLATE, repr(limits), model.strip(), repr(float(threshold))):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


class DimensionScore(BaseModel):
    dimension: str
    score: float = Field(ge=0.0, le=1.0)
    reason: str = ""


RubricSource = Literal["rubric_markdown", "rubric", "none"]


class JudgeOutcome(BaseModel):
    """One judgement of one rollout, with what it cost."""

    verdict: JudgeVerdict
    score: float = Field(ge=0.0, le=1.0)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    evidence: list[str] = Field(default_factory=list)
    failed_criteria: list[str] = Field(default_factory=list)
    dimension_scores: list[DimensionScore] = Field(default_factory=list)
    #: Why the verdict is ERROR, or what the judge corrected (a clamped score, an overridden verdict).
    reason: str = ""
    #: The verdict the model wrote, when it differs from the one its score implies.
    stated_verdict: str | None = None
    verdict_overridden: bool = False
    #: The score as the model wrote it, when it was outside [0, 1].
    raw_score: float | None = None
    threshold: float = RUBRIC_PASS_THRESHOLD
    model: str
    judge_version: str
    rubric_source: RubricSource
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: None when the judge model has no known price.
    cost_usd: float | None = 0.0
    #: The start of the model's reply, for debugging a parse error.
    reply_excerpt: str = ""

    @property
    def success(self) -> bool:
        return self.verdict == JudgeVerdict.PASS

    def summary(self) -> str:
        if self.verdict == JudgeVerdict.ERROR:
            return f"ERROR: {self.reason}"
        comparison = ">=" if self.verdict == JudgeVerdict.PASS else "<"
        text = f"{self.verdict.value} (score {self.score:.2f} {comparison} {self.threshold:g})"
        if self.failed_criteria:
            text += "; failed: " + "; ".join(self.failed_criteria)
        return f"{text}; {self.reason}" if self.reason else text


# --- prompt ---------------------------------------------------------------------------------------------------


def render_rubric(rubric: Rubric) -> str:
    """The structured rubric as Markdown, the form `rubric_markdown` overrides come in."""
    lines = [f"# {rubric.title}"]
    if rubric.overview:
        lines += ["", rubric.overview]
    sections = (
        ("Success criteria", rubric.success_criteria),
        ("Testing requirements", rubric.testing_requirements),
        ("Quality criteria", rubric.quality_criteria),
        ("Notes", rubric.notes),
    )
    for heading, items in sections:
        if items:
            lines += ["", f"## {heading}", *(f"- {item}" for item in items)]
    if rubric.scoring:
        lines += ["", "## Scoring", *(f"- **{level.label}**: {level.description}" for level in rubric.scoring)]
    return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else _compact_json(value)


def _message_items(artifacts: RunArtifacts) -> list[str]:
    items: list[str] = []
    skipped_instruction = False
    for message in artifacts.messages:
        role = str(message.get("role", ""))
        content = message.get("content")
        if role == "system":
            continue
        if role == "user" and not skipped_instruction and _as_text(content).strip() == artifacts.task.strip():
            # Already shown in its own section.
            skipped_instruction = True
            continue
        if role == "tool":
            name = message.get("name") or message.get("tool_call_id") or ""
            items.append(f"tool result {name}: {_clip(_as_text(content), MAX_OBSERVATION_CHARS)}".rstrip())
            continue
        if content:
            items.append(f"{role}: {_clip(_as_text(content), MAX_MESSAGE_CHARS)}")
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            arguments = _clip(_as_text(function.get("arguments", "")), MAX_TOOL_ARGUMENT_CHARS)
            items.append(f"{role} calls {function.get('name', '?')}({arguments})")
    return items


def _tool_call_items(artifacts: RunArtifacts) -> list[str]:
    items: list[str] = []
    for index, call in enumerate(artifacts.tool_calls):
        arguments = _clip(_compact_json(call.parameters), MAX_TOOL_ARGUMENT_CHARS)
        items.append(f"agent calls {call.tool_server}.{call.tool_name}({arguments})")
        if index < len(artifacts.tool_results):
            result = artifacts.tool_results[index]
            marker = " [error]" if result.is_error else ""
            items.append(f"tool result{marker}: {_clip(_as_text(result.observation), MAX_OBSERVATION_CHARS)}")
    return items


def render_transcript(artifacts: RunArtifacts) -> str:
    """What the agent did, one line per message or call; long runs keep their start and their end."""
    # The agent's messages carry its reasoning between calls; bare tool-call records are the fallback.
    items = _message_items(artifacts) if artifacts.messages else _tool_call_items(artifacts)
    if artifacts.final_observation and not (items and artifacts.final_observation[:200] in items[-1]):
        items.append(f"final answer: {_clip(artifacts.final_observation, MAX_MESSAGE_CHARS)}")
    if artifacts.error:
        items.append(f"error: {_clip(artifacts.error, MAX_MESSAGE_CHARS)}")
    if len(items) > MAX_TRANSCRIPT_ITEMS:
        tail = MAX_TRANSCRIPT_ITEMS - TRANSCRIPT_HEAD_ITEMS
        omitted = len(items) - MAX_TRANSCRIPT_ITEMS
        items = [*items[:TRANSCRIPT_HEAD_ITEMS], f"[... {omitted} items omitted ...]", *items[-tail:]]
    if not items:
        return "(the agent did nothing: no messages and no tool calls)"
    return _clip("\n".join(items), MAX_TRANSCRIPT_CHARS)


def _render_value(value: Any) -> str:
    text = value if isinstance(value, str) else _compact_json(value)
    text = _clip(text, MAX_DIFF_VALUE_CHARS)
    # Multi-line text is indented under its field so item boundaries stay visible.
    return text.replace("\n", "\n      ")


def _render_item(marker: str, collection: str, key: str, before: Any, after: Any) -> list[str]:
    lines = [f"{marker} {collection}/{key}"]
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for field in list(after) + [f for f in before if f not in after]:
            old, new = before.get(field), after.get(field)
            if field not in before:
                lines.append(f"    {field}: (new) {_render_value(new)}")
            elif field not in after:
                lines.append(f"    {field}: {_render_value(old)} -> (removed)")
            elif old != new:
                lines.append(f"    {field}: {_render_value(old)} -> {_render_value(new)}")
            else:
                lines.append(f"    {field}: {_render_value(new)}")
        return lines
    value = after if marker != ITEM_REMOVED else before
    if isinstance(value, Mapping):
        lines.extend(f"    {field}: {_render_value(v)}" for field, v in value.items())
    elif marker == ITEM_CHANGED:
        lines.append(f"    {_render_value(before)} -> {_render_value(after)}")
    else:
        lines.append(f"    {_render_value(value)}")
    return lines


def _render_diff(diff: Mapping[str, Any]) -> list[str]:
    raw_before, raw_after = diff.get("before"), diff.get("after")
    before: Mapping[str, Any] = raw_before if isinstance(raw_before, Mapping) else {}
    after: Mapping[str, Any] = raw_after if isinstance(raw_after, Mapping) else {}
    lines = [f"### {diff.get('tool_server', '?')}: {diff.get('summary') or 'no changes'}"]
    for collection in list(after) + [c for c in before if c not in after]:
        old_items = before.get(collection) or {}
        new_items = after.get(collection) or {}
        if not isinstance(old_items, Mapping) or not isinstance(new_items, Mapping):
            lines.append(f"{ITEM_CHANGED} {collection}: {_render_value(old_items)} -> {_render_value(new_items)}")
            continue
        for key in new_items:
            marker = ITEM_CHANGED if key in old_items else ITEM_ADDED
            lines += _render_item(marker, str(collection), str(key), old_items.get(key), new_items[key])
        for key in old_items:
            if key not in new_items:
                lines += _render_item(ITEM_REMOVED, str(collection), str(key), old_items[key], None)
    return lines


def full_state_diffs(artifacts: RunArtifacts) -> list[Mapping[str, Any]]:
    raw = artifacts.metadata.get(META_STATE_DIFFS) or []
    diffs: list[Mapping[str, Any]] = []
    for diff in raw if isinstance(raw, list) else []:
        data = diff.model_dump(mode="json") if isinstance(diff, BaseModel) else diff
        if isinstance(data, Mapping) and data.get("scope") == DiffScope.FULL.value:
            diffs.append(data)
    return diffs


def render_state_changes(artifacts: RunArtifacts) -> str:
    """The whole-rollout diffs (initial vs final state, one per tool server), item by item."""
    diffs = full_state_diffs(artifacts)
    if not diffs:
        return NO_FULL_DIFF_TEXT
    lines: list[str] = []
    for diff in diffs:
        lines += _render_diff(diff)
    return _clip("\n".join(lines), MAX_STATE_SECTION_CHARS)


def build_messages(
    artifacts: RunArtifacts, rubric_text: str, threshold: float = RUBRIC_PASS_THRESHOLD
) -> list[ChatMessage]:
    user = USER_PROMPT_TEMPLATE.format(
        tag_rubric=TAG_RUBRIC,
        tag_instruction=TAG_INSTRUCTION,
        tag_transcript=TAG_TRANSCRIPT,
        tag_state=TAG_STATE_CHANGES,
        rubric=rubric_text.strip(),
        instruction=artifacts.task.strip(),
        transcript=render_transcript(artifacts),
        state_changes=render_state_changes(artifacts),
    )
    return [ChatMessage.system(SYSTEM_PROMPT_TEMPLATE.format(threshold=f"{threshold:g}")), ChatMessage.user(user)]


# --- reply parsing --------------------------------------------------------------------------------------------


def _balanced_objects(text: str) -> Iterable[str]:
    """Every `{...}` span whose braces balance (braces inside JSON strings ignored), leftmost first."""
    start = text.find("{")
    while start != -1:
        depth = 0
        in_string = escaped = False
        end = -1
        for index in range(start, len(text)):
            char = text[index]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    end = index
                    break
        if end != -1:
            yield text[start : end + 1]
        start = text.find("{", start + 1)


def _load_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The judge's JSON object from a reply: plain JSON, JSON in ``` fences, or JSON embedded in prose.

    In prose the first balanced object that parses wins, except that one carrying a `score` or `verdict` is
    preferred (a reasoning preamble may quote an unrelated object first).
    """
    stripped = text.strip()
    whole = _load_object(stripped)
    if whole is not None:
        return whole
    candidates: list[dict[str, Any]] = []
    for block in _FENCE.findall(text):
        parsed = _load_object(block.strip())
        if parsed is not None:
            candidates.append(parsed)
    for span in _balanced_objects(text):
        parsed = _load_object(span)
        if parsed is not None:
            candidates.append(parsed)
    for candidate in candidates:
        if "score" in candidate or "verdict" in candidate:
            return candidate
    return candidates[0] if candidates else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def _texts(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [v if isinstance(v, str) else _compact_json(v) for v in value if v not in (None, "")]
    return [_compact_json(value)]


def _dimension_scores(value: Any) -> list[DimensionScore]:
    if isinstance(value, Mapping):
        # Liberal: `{"accuracy": 0.8}` as well as the asked-for list of objects.
        value = [{"dimension": k, "score": v} for k, v in value.items()]
    scores: list[DimensionScore] = []
    for entry in value if isinstance(value, list) else []:
        if not isinstance(entry, Mapping):
            continue
        score = _number(entry.get("score"))
        name = entry.get("dimension") or entry.get("name") or entry.get("criterion")
        if score is None or not name:
            continue
        scores.append(DimensionScore(dimension=str(name), score=_clamp(score), reason=str(entry.get("reason") or "")))
    return scores


# --- the judge ------------------------------------------------------------------------------------------------


class RubricJudge:
    """`await RubricJudge(client, "gpt-4o-mini").judge(artifacts, task.rubric)` -> JudgeOutcome."""

    def __init__(
        self,
        client: ChatClient,
        model: str,
        *,
        threshold: float = RUBRIC_PASS_THRESHOLD,
        temperature: float = 0.0,
        max_tokens: int = DEFAULT_JUDGE_MAX_TOKENS,
    ) -> None:
        if not model.strip():
            raise ValueError("the judge model must be named")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be between 0.0 and 1.0")
        if not 0.0 <= temperature <= 2.0:
            raise ValueError("temperature must be between 0.0 and 2.0")
        self.client = client
        self.model = model.strip()
        self.threshold = threshold
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.version = judge_version(self.model, threshold)

    def __repr__(self) -> str:
        return f"RubricJudge(model={self.model!r}, threshold={self.threshold}, version={self.version!r})"

    def request(self, artifacts: RunArtifacts, rubric_text: str, *, json_mode: bool = True) -> ChatRequest:
        extra: dict[str, Any] = {"response_format": {"type": "json_object"}} if json_mode else {}
        return ChatRequest(
            model=self.model,
            messages=build_messages(artifacts, rubric_text, self.threshold),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            **extra,
        )

    def _outcome(self, source: RubricSource, **fields: Any) -> JudgeOutcome:
        prompt_tokens = fields.pop("prompt_tokens", 0)
        completion_tokens = fields.pop("completion_tokens", 0)
        return JudgeOutcome(
            model=self.model,
            judge_version=self.version,
            threshold=self.threshold,
            rubric_source=source,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=estimate_cost_usd(self.model, prompt_tokens, completion_tokens),
            **fields,
        )

    def _error(self, source: RubricSource, reason: str, **fields: Any) -> JudgeOutcome:
        return self._outcome(source, verdict=JudgeVerdict.ERROR, score=0.0, reason=reason, **fields)

    @staticmethod
    def rubric_text(
        artifacts: RunArtifacts, rubric: Rubric | None, rubric_markdown: str | None = None
    ) -> tuple[str | None, RubricSource]:
        """The rubric the judge shows: an explicit override, else the one the executor stored, else the task's."""
        override = rubric_markdown
        if override is None:
            stored = artifacts.metadata.get(META_RUBRIC_MARKDOWN)
            override = stored if isinstance(stored, str) else None
        if override is not None and override.strip():
            return override, "rubric_markdown"
        if rubric is not None:
            return render_rubric(rubric), "rubric"
        return None, "none"

    async def judge(
        self, artifacts: RunArtifacts, rubric: Rubric | None, rubric_markdown: str | None = None
    ) -> JudgeOutcome:
        text, source = self.rubric_text(artifacts, rubric, rubric_markdown)
        if text is None:
            return self._error(source, "no rubric: the task has none and no rubric_markdown override was given")
        request = self.request(artifacts, text)
        try:
            try:
                completion = await self.client.complete(request)
            except LLMBadRequestError:
                # `response_format` is only a hint; some OpenAI-compatible servers reject the field outright.
                completion = await self.client.complete(self.request(artifacts, text, json_mode=False))
        except LLMError as exc:
            return self._error(source, f"judge call failed: {exc}")
        usage = completion.usage
        tokens = {
            "prompt_tokens": usage.prompt_tokens if usage else 0,
            "completion_tokens": usage.completion_tokens if usage else 0,
        }
        reply = completion.text
        return self._parse(source, reply, tokens)

    def _parse(self, source: RubricSource, reply: str, tokens: dict[str, int]) -> JudgeOutcome:
        excerpt = _clip(reply, MAX_REPLY_EXCERPT_CHARS)
        if not reply.strip():
            return self._error(source, "judge reply has no text", reply_excerpt=excerpt, **tokens)
        data = extract_json_object(reply)
        if data is None:
            return self._error(
                source, f"judge reply holds no JSON object: {truncate(reply)}", reply_excerpt=excerpt, **tokens
            )
        raw_score = _number(data.get("score"))
        if raw_score is None:
            return self._error(
                source,
                f"judge reply has no numeric 'score' (got {truncate(_compact_json(data.get('score')), 80)})",
                reply_excerpt=excerpt,
                **tokens,
            )
        notes: list[str] = []
        score = _clamp(raw_score)
        if score != raw_score:
            notes.append(f"score {raw_score:g} clamped to {score:g}")
        verdict = JudgeVerdict.PASS if score >= self.threshold else JudgeVerdict.FAIL
        stated = str(data.get("verdict") or "").strip().upper() or None
        overridden = stated is not None and stated != verdict.value
        if overridden:
            notes.append(f"model stated {stated} but its score {score:g} makes it {verdict.value}")
        confidence = _number(data.get("confidence"))
        return self._outcome(
            source,
            verdict=verdict,
            score=score,
            confidence=None if confidence is None else _clamp(confidence),
            evidence=_texts(data.get("evidence")),
            failed_criteria=_texts(data.get("failed_criteria")),
            dimension_scores=_dimension_scores(data.get("dimension_scores")),
            reason="; ".join(notes),
            stated_verdict=stated if overridden else None,
            verdict_overridden=overridden,
            raw_score=raw_score if score != raw_score else None,
            reply_excerpt=excerpt,
            **tokens,
        )

    def to_outcome(self, outcome: JudgeOutcome, module: str = RUBRIC_VERIFIER_MODULE) -> VerifierOutcome:
        """The judgement as a `verifications` row: kind rubric, reward = score, version = the judge's hash."""
        return judge_outcome_to_verifier_outcome(outcome, module)


def judge_outcome_to_verifier_outcome(outcome: JudgeOutcome, module: str = RUBRIC_VERIFIER_MODULE) -> VerifierOutcome:
    return VerifierOutcome(
        module=module,
        verifier_version=outcome.judge_version,
        kind=VerifierKind.RUBRIC,
        success=outcome.success,
        reward=outcome.score,
        message=outcome.summary(),
        output=outcome.model_dump(mode="json"),
    )


__all__ = [
    "META_RUBRIC_MARKDOWN",
    "RUBRIC_VERIFIER_MODULE",
    "DimensionScore",
    "JudgeOutcome",
    "RubricJudge",
    "build_messages",
    "extract_json_object",
    "judge_outcome_to_verifier_outcome",
    "judge_version",
    "render_rubric",
    "render_state_changes",
    "render_transcript",
]
