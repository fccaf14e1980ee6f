"""The rubric judge against a real OpenAI-compatible endpoint (a scripted stand-in served over HTTP)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.pricing import estimate_cost_usd
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.scenarios import Rubric
from eval_pipelines.schemas.verifiers import RUBRIC_PASS_THRESHOLD, JudgeVerdict, VerifierKind
from eval_pipelines.verifiers.rubric import (
    META_RUBRIC_MARKDOWN,
    NO_FULL_DIFF_TEXT,
    RUBRIC_VERIFIER_MODULE,
    RubricJudge,
    extract_json_object,
    judge_version,
)
from tests.support.scripted_llm import Script, create_scripted_app, text_reply
from tests.verifiers.conftest import REFERENCE, Replays

MODEL = "gpt-4o-mini"  # a priced model, so the recorded cost is not trivially zero
CANARY_KEY = "sk-judge-canary-0123456789abcdef"
VALID = {
    "verdict": "PASS",
    "score": 0.9,
    "confidence": 0.8,
    "evidence": ["email e-021 to aisha.okafor@example.com, subject 'Room 4B projector for Thursday'"],
    "failed_criteria": [],
    "dimension_scores": [
        {"dimension": "recipient", "score": 1, "reason": "only Aisha"},
        {"dimension": "content", "score": 0.8, "reason": "room named"},
    ],
}


@pytest.fixture(scope="module")
def script() -> Script:
    return Script(replies=[text_reply("{}")])


@pytest.fixture(scope="module")
def endpoint(script: Script) -> Iterator[str]:
    with BackgroundServer(create_scripted_app(script)) as server:
        yield f"{server.url}/v1"


@pytest.fixture
def scripted(script: Script) -> Any:
    def set_replies(*replies: dict[str, Any]) -> Script:
        script.replies[:] = list(replies)
        script.requests.clear()
        return script

    return set_replies


async def _no_sleep(_: float) -> None:
    return None


def _judge(endpoint: str, **options: Any) -> RubricJudge:
    client = ChatClient(
        endpoint,
        CANARY_KEY,
        timeout_seconds=10,
        retry=RetryPolicy.for_llm(max_attempts=3, base_delay=0.01),
        sleep=_no_sleep,
    )
    return RubricJudge(client, MODEL, **options)


@pytest.fixture
def artifacts(replays: Replays) -> RunArtifacts:
    return replays[("email_ops_001", REFERENCE)].model_copy(deep=True)


@pytest.fixture
def rubric(email_ops: Any) -> Rubric:
    rubric = email_ops.task("email_ops_001").rubric
    assert rubric is not None
    return rubric


def _user_prompt(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


async def test_valid_json_passes_and_records_model_tokens_and_cost(
    endpoint: str, scripted: Any, artifacts: RunArtifacts, rubric: Rubric
) -> None:
    script = scripted(text_reply(json.dumps(VALID)))
    judge = _judge(endpoint)
    outcome = await judge.judge(artifacts, rubric)

    assert outcome.verdict == JudgeVerdict.PASS and outcome.success and outcome.score == 0.9
    assert outcome.confidence == 0.8 and outcome.evidence == VALID["evidence"] and outcome.failed_criteria == []
    assert [(d.dimension, d.score) for d in outcome.dimension_scores] == [("recipient", 1.0), ("content", 0.8)]
    assert not outcome.verdict_overridden and outcome.reason == ""
    assert outcome.model == MODEL and outcome.rubric_source == "rubric"
    assert (outcome.prompt_tokens, outcome.completion_tokens) == (10, 5)
    assert outcome.cost_usd == pytest.approx(estimate_cost_usd(MODEL, 10, 5)) and outcome.cost_usd > 0

    (request,) = script.requests
    assert request["model"] == MODEL and request["temperature"] == 0.0
    assert request["response_format"] == {"type": "json_object"}
    prompt = _user_prompt(request)
    for criterion in rubric.success_criteria:
        assert criterion in prompt
    assert artifacts.task in prompt
    # The transcript shows the call, and the whole-rollout diff shows the email it added.
    assert "email__send_email" in prompt
    assert "[added] emails/" in prompt and "    subject: Room 4B projector for Thursday\n" in prompt
    system = next(m["content"] for m in request["messages"] if m["role"] == "system")
    assert "dimension_scores" in system and "failed_criteria" in system and str(RUBRIC_PASS_THRESHOLD) in system


async def test_verifier_outcome_lands_in_the_verifications_shape(
    endpoint: str, scripted: Any, artifacts: RunArtifacts, rubric: Rubric
) -> None:
    scripted(text_reply(json.dumps({**VALID, "score": 0.4, "verdict": "FAIL", "failed_criteria": ["Body mentions"]})))
    judge = _judge(endpoint)
    outcome = judge.to_outcome(await judge.judge(artifacts, rubric))

    assert outcome.kind == VerifierKind.RUBRIC and outcome.module == RUBRIC_VERIFIER_MODULE
    assert outcome.success is False and outcome.reward == 0.4
    assert outcome.verifier_version == judge.version == judge_version(MODEL, RUBRIC_PASS_THRESHOLD)
    assert outcome.message.startswith("FAIL (score 0.40 < 0.6)") and "Body mentions" in outcome.message
    assert outcome.output["model"] == MODEL and outcome.output["prompt_tokens"] == 10
    assert CANARY_KEY not in json.dumps(outcome.model_dump(mode="json"))


def test_judge_version_follows_model_and_threshold() -> None:
    base = judge_version(MODEL, 0.6)
    assert base == judge_version(MODEL, 0.6) and len(base) == 16
    assert len({base, judge_version("gpt-4o", 0.6), judge_version(MODEL, 0.7)}) == 3


@pytest.mark.parametrize(
    "reply",
    [
        'Here is my assessment.\n{"verdict": "PASS", "score": 0.75, "evidence": "sent {as asked}"}\nHope this helps.',
        'I checked the {state} first.\n{"verdict": "PASS", "score": 0.75}',
        '```json\n{"verdict": "PASS", "score": 0.75}\n```',
        'Verdict below.\n```\n{"verdict": "PASS",\n "score": "0.75"}\n```\nDone.',
    ],
    ids=["prose", "prose-with-stray-braces", "json-fence", "bare-fence-string-score"],
)
async def test_json_wrapped_in_prose_or_fences_is_parsed(
    endpoint: str, scripted: Any, artifacts: RunArtifacts, rubric: Rubric, reply: str
) -> None:
    scripted(text_reply(reply))
    outcome = await _judge(endpoint).judge(artifacts, rubric)
    assert outcome.verdict == JudgeVerdict.PASS and outcome.score == 0.75, outcome.reason


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("The agent did a great job, definitely a pass!", "holds no JSON object"),
        ("{not json at all", "holds no JSON object"),
        ('{"verdict": "PASS", "confidence": 1.0}', "no numeric 'score'"),
        ('{"verdict": "PASS", "score": "high"}', "no numeric 'score'"),
        ('{"verdict": "PASS", "score": true}', "no numeric 'score'"),
        ('["PASS", 1.0]', "holds no JSON object"),
        ("", "has no text"),
    ],
    ids=["prose-only", "broken-json", "missing-score", "word-score", "bool-score", "json-array", "empty"],
)
async def test_garbage_is_an_error_never_a_pass(
    endpoint: str, scripted: Any, artifacts: RunArtifacts, rubric: Rubric, reply: str, reason: str
) -> None:
    scripted(text_reply(reply))
    judge = _judge(endpoint)
    outcome = await judge.judge(artifacts, rubric)

    assert outcome.verdict == JudgeVerdict.ERROR and outcome.score == 0.0 and not outcome.success
    assert reason in outcome.reason
    assert outcome.prompt_tokens == 10  # the call was made and paid for
    stored = judge.to_outcome(outcome)
    assert stored.success is False and stored.reward == 0.0 and stored.message.startswith("ERROR: ")


@pytest.mark.parametrize(
    ("raw", "score", "verdict"),
    [(1.7, 1.0, JudgeVerdict.PASS), (-0.3, 0.0, JudgeVerdict.FAIL), (85, 1.0, JudgeVerdict.PASS)],
)
async def test_out_of_range_score_is_clamped(
    endpoint: str,
    scripted: Any,
    artifacts: RunArtifacts,
    rubric: Rubric,
    raw: float,
    score: float,
    verdict: JudgeVerdict,
) -> None:
    scripted(
        text_reply(
            json.dumps({"verdict": verdict.value, "score": raw, "dimension_scores": [{"dimension": "d", "score": 3}]})
        )
    )
    outcome = await _judge(endpoint).judge(artifacts, rubric)

    assert outcome.score == score and outcome.verdict == verdict and outcome.raw_score == raw
    assert f"score {raw:g} clamped" in outcome.reason
    assert outcome.dimension_scores[0].score == 1.0


async def test_the_score_decides_the_verdict(
    endpoint: str, scripted: Any, artifacts: RunArtifacts, rubric: Rubric
) -> None:
    scripted(text_reply(json.dumps({"verdict": "PASS", "score": 0.59})))
    lenient = await _judge(endpoint).judge(artifacts, rubric)
    assert lenient.verdict == JudgeVerdict.FAIL and lenient.verdict_overridden and lenient.stated_verdict == "PASS"
    assert "model stated PASS" in lenient.reason

    scripted(text_reply(json.dumps({"verdict": "FAIL", "score": 0.7})))
    strict = await _judge(endpoint, threshold=0.8).judge(artifacts, rubric)
    assert strict.verdict == JudgeVerdict.FAIL and not strict.verdict_overridden and strict.threshold == 0.8

    scripted(text_reply(json.dumps({"score": 0.6})))
    at_threshold = await _judge(endpoint).judge(artifacts, rubric)
    assert at_threshold.verdict == JudgeVerdict.PASS and not at_threshold.verdict_overridden


async def test_http_500_after_retries_is_an_error(
    endpoint: str, scripted: Any, artifacts: RunArtifacts, rubric: Rubric
) -> None:
    script = scripted({"status": 500})
    outcome = await _judge(endpoint).judge(artifacts, rubric)

    assert outcome.verdict == JudgeVerdict.ERROR and outcome.score == 0.0 and not outcome.success
    assert outcome.reason.startswith("judge call failed:") and "500" in outcome.reason
    assert CANARY_KEY not in outcome.reason
    assert len(script.requests) == 3  # every attempt of the retry policy was spent first
    assert (outcome.prompt_tokens, outcome.cost_usd) == (0, 0.0)


async def test_http_400_is_an_error_after_one_try_without_response_format(
    endpoint: str, scripted: Any, artifacts: RunArtifacts, rubric: Rubric
) -> None:
    script = scripted({"status": 400})
    outcome = await _judge(endpoint).judge(artifacts, rubric)

    assert outcome.verdict == JudgeVerdict.ERROR and "judge call failed" in outcome.reason
    assert [("response_format" in r) for r in script.requests] == [True, False]


async def test_a_server_rejecting_response_format_still_gets_judged(
    endpoint: str, scripted: Any, artifacts: RunArtifacts, rubric: Rubric
) -> None:
    script = scripted({"status": 400}, text_reply(json.dumps(VALID)))
    outcome = await _judge(endpoint).judge(artifacts, rubric)
    assert outcome.verdict == JudgeVerdict.PASS and len(script.requests) == 2


async def test_rubric_markdown_takes_precedence(
    endpoint: str, scripted: Any, artifacts: RunArtifacts, rubric: Rubric
) -> None:
    override = "# Tightened rubric\n\n## Success criteria\n- The subject names the Quarterly Gala\n"
    script = scripted(text_reply(json.dumps(VALID)))
    judge = _judge(endpoint)

    explicit = await judge.judge(artifacts, rubric, rubric_markdown=override)
    prompt = _user_prompt(script.requests[-1])
    assert explicit.rubric_source == "rubric_markdown"
    assert "The subject names the Quarterly Gala" in prompt and rubric.title not in prompt

    # The executor stores a task override's markdown in the artifacts; the judge finds it there too.
    artifacts.metadata[META_RUBRIC_MARKDOWN] = override
    stored = await judge.judge(artifacts, rubric)
    prompt = _user_prompt(script.requests[-1])
    assert stored.rubric_source == "rubric_markdown" and rubric.success_criteria[0] not in prompt

    without = await judge.judge(artifacts.model_copy(update={"metadata": {}}), rubric)
    assert without.rubric_source == "rubric" and rubric.title in _user_prompt(script.requests[-1])


async def test_no_rubric_is_an_error_without_a_call(endpoint: str, scripted: Any, artifacts: RunArtifacts) -> None:
    script = scripted(text_reply(json.dumps(VALID)))
    outcome = await _judge(endpoint).judge(artifacts, None)
    assert outcome.verdict == JudgeVerdict.ERROR and "no rubric" in outcome.reason and script.requests == []


async def test_prompt_is_compact_and_says_when_no_diff_was_recorded(
    endpoint: str, scripted: Any, rubric: Rubric
) -> None:
    script = scripted(text_reply(json.dumps(VALID)))
    huge = "x" * 50_000
    artifacts = RunArtifacts(task_id="t", task="Do the thing.")
    artifacts.record_message("user", "Do the thing.")
    for index in range(100):
        call = {"id": f"c{index}", "type": "function", "function": {"name": "email__search", "arguments": huge}}
        artifacts.record_message("assistant", None, tool_calls=[call])
        artifacts.record_message("tool", huge, tool_call_id=f"c{index}")
    await _judge(endpoint).judge(artifacts, rubric)

    prompt = _user_prompt(script.requests[-1])
    assert len(prompt) < 40_000
    assert "items omitted" in prompt and NO_FULL_DIFF_TEXT in prompt
    assert prompt.count("Do the thing.") == 1  # the instruction is not repeated inside the transcript


def test_extract_json_object_prefers_the_scored_object() -> None:
    reply = 'Example format: {"dimension": "x"}. My answer: {"verdict": "FAIL", "score": 0.1}'
    assert extract_json_object(reply) == {"verdict": "FAIL", "score": 0.1}
    assert extract_json_object('{"a": "}{"}') == {"a": "}{"}
    assert extract_json_object("no braces") is None
