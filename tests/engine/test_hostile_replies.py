"""Hostile model output never becomes the harness's crash counted as the model's failure.

The reference agent is fuzzed in-process (a fake endpoint that encodes every request as the real client does and
parses the history as strictly as llama.cpp); the engine runs the same hostile arguments and replies against the
real email server and a scripted endpoint, and only a failure that is really the agent's may end `failed`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pydantic_core
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval_pipelines.agents.base import BaseAgent
from eval_pipelines.agents.text_tool_calls import flag_text_tool_call
from eval_pipelines.agents.tool_calling import ToolCallingAgent
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutSpec
from eval_pipelines.llm.types import ChatCompletion, ChatRequest
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import ErrorClass, RolloutStatus, TerminationReason
from eval_pipelines.schemas.tools import ToolCallResult
from eval_pipelines.toolservers.admin import ToolServerAdmin
from tests.engine.test_engine import _spec
from tests.support.scripted_llm import Script, create_scripted_app, text_reply, tool_call_reply

SEND = "email__send_email"
VALID = '{"to": "dana@example.com", "subject": "Hi", "body": "Hello"}'
#: Argument texts that are valid JSON, or nearly, and that nothing downstream of the parser can carry as they are.
HOSTILE_ARGUMENTS = {
    "lone surrogate escape": '{"to": "\\ud800", "subject": "x", "body": "y"}',
    "lone surrogate character": '{"to": "\ud800", "subject": "x", "body": "y"}',
    "surrogate key": '{"\\udc00": 1}',
    "NUL": '{"to": "a\\u0000b@example.com", "subject": "x\\u0000", "body": "y"}',
    "1e400": '{"to": "a@example.com", "subject": "x", "body": 1e400}',
    "NaN": '{"to": "a@example.com", "subject": NaN, "body": "y"}',
    "10**400": '{"to": "a@example.com", "subject": "x", "body": ' + str(10**400) + "}",
    "5000 digits": '{"body": ' + "9" * 5000 + "}",
    "100,000 levels": '{"body": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "100 levels": '{"body": ' + "[" * 100 + "]" * 100 + "}",
    "1 MB string": '{"to": "a@example.com", "subject": "x", "body": "' + "a" * (1 << 20) + '"}',
    "array": "[1, 2]",
    "string": '"send it"',
    "null": "null",
    "invalid": '{"to": "a@example.com" "subject": "x"}',
}


class StrictEndpoint:
    """Stands in for an OpenAI-compatible server: encodes each request as the real client does (a lone surrogate
    raises there) and refuses a history whose tool-call arguments are not a JSON object, as llama.cpp does."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    async def complete(self, request: ChatRequest) -> ChatCompletion:
        body = pydantic_core.to_json(request.to_wire())
        sent = json.loads(body)
        self.requests.append(sent)
        for message in sent["messages"]:
            for call in message.get("tool_calls") or []:
                arguments = json.loads(call["function"]["arguments"], parse_constant=_refuse)
                assert isinstance(arguments, dict), call
        message = self.replies.pop(0) if self.replies else text_reply("done")
        return ChatCompletion.model_validate({"choices": [{"index": 0, "message": message}]})


def _refuse(name: str) -> Any:
    raise AssertionError(f"{name} in a history sent to the endpoint")


class EchoEnvironment:
    """Tools that echo their arguments, sent as JSON as the HTTP environment sends them."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def alist_tools(self) -> list[dict[str, Any]]:
        return [{"tool_server": "email", "name": "send_email", "parameters": {"type": "object"}}]

    async def acall_tool(self, tool_server: str, tool_name: str, parameters: dict[str, Any]) -> ToolCallResult:
        self.calls.append(json.loads(pydantic_core.to_json(parameters)))
        return ToolCallResult(observation={"sent": True})


def _reply(calls: list[tuple[Any, Any, Any]], content: Any = None) -> dict[str, Any]:
    wire = []
    for call_id, name, arguments in calls:
        function: dict[str, Any] = {"name": name}
        if arguments is not None:
            function["arguments"] = arguments
        wire.append({"type": "function", "function": function, **({"id": call_id} if call_id is not None else {})})
    return {"role": "assistant", "content": content, "tool_calls": wire}


async def _run_agent(replies: list[dict[str, Any]], cap: int = 32) -> tuple[RunArtifacts, StrictEndpoint, Any]:
    endpoint = StrictEndpoint(replies)
    environment = EchoEnvironment()
    config = ModelConfig(
        model="m", api_key="k", base_url="http://x", max_steps=len(replies) + 1, max_tool_calls_per_reply=cap
    )
    agent = ToolCallingAgent(endpoint, config)  # type: ignore[arg-type]
    artifacts = RunArtifacts(task_id="t", task="send a mail")
    await agent.run("send a mail", environment, artifacts)  # type: ignore[arg-type]
    # What the service stores and the warehouse reads: it must encode and read back.
    assert RunArtifacts.model_validate_json(artifacts.model_dump_json()).messages
    return artifacts, endpoint, environment


# Text with any code point, lone surrogates included (hypothesis leaves them out unless asked).
_any_text = st.text(st.characters(exclude_categories=()), max_size=20)
_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), _any_text
)
_json_value = st.recursive(
    _json_leaf,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(_any_text, children, max_size=3)),
    max_leaves=10,
)
_arguments = st.one_of(
    st.none(),
    st.sampled_from(sorted(HOSTILE_ARGUMENTS.values(), key=len)[:-2]),  # the two largest run in the engine tests
    _json_value.map(json.dumps),  # ASCII: every surrogate escaped, as a byte-level tokenizer emits it
    _json_value.map(lambda value: json.dumps(value, ensure_ascii=False)),
    _any_text,
)
_names = st.one_of(st.just(SEND), st.just(""), _any_text, st.just("x" * 100_000))
_ids = st.one_of(st.none(), st.just(""), _any_text)
_calls = st.lists(st.tuples(_ids, _names, _arguments), min_size=1, max_size=6)
_replies = st.lists(st.builds(_reply, _calls, st.one_of(st.none(), _any_text)), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(replies=_replies, final=_any_text, cap=st.integers(min_value=1, max_value=4))
def test_fuzzed_replies_never_crash_the_reference_agent(replies: list[dict[str, Any]], final: str, cap: int) -> None:
    artifacts, endpoint, environment = asyncio.run(_run_agent([*replies, text_reply(final)], cap))
    assert artifacts.metadata["termination_reason"] == "final_response"
    # Every call was answered, each by its own id, and at most `cap` per reply were run.
    for sent, reply in zip(endpoint.requests[1:], replies, strict=False):
        answered = [m["tool_call_id"] for m in sent["messages"] if m["role"] == "tool"]
        assert len(answered) >= len(reply["tool_calls"])
    assert len(environment.calls) <= cap * len(replies)
    assert all(isinstance(call, dict) for call in environment.calls)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(replies=_replies)
def test_fuzzed_replies_through_the_engine_end_completed(replies: list[dict[str, Any]], tool_host: Any) -> None:
    """The same fuzzed replies on the real email server: every rollout completes (its verdict is the model's)."""
    endpoint = StrictEndpoint([*replies, text_reply("done")])

    def reference(spec: RolloutSpec, clients: ChatClientPool, stop: asyncio.Event) -> Any:
        return ToolCallingAgent(endpoint, spec.model_config)  # type: ignore[arg-type]

    unused_model_url = "http://127.0.0.1:9"
    outcome = asyncio.run(_execute(_spec(unused_model_url, tool_host.base_url("email")), reference))
    assert outcome.status == RolloutStatus.COMPLETED, outcome.result.message
    assert RunArtifacts.model_validate_json(outcome.artifacts.model_dump_json()).messages


@pytest.mark.parametrize("label", sorted(HOSTILE_ARGUMENTS))
async def test_hostile_arguments_become_an_observation_or_a_clean_call(label: str) -> None:
    raw = HOSTILE_ARGUMENTS[label]
    artifacts, endpoint, environment = await _run_agent([_reply([("call_1", SEND, raw)])])
    (call,), (result,) = artifacts.tool_calls, artifacts.tool_results
    told = endpoint.requests[1]["messages"][-1]
    assert told["role"] == "tool" and told["tool_call_id"] == "call_1"
    if result.is_error:
        # Refused: the model hears why, the tool was not called, the raw text is kept (encodable) as evidence.
        assert "the tool was not called" in told["content"] and call.arguments_error
        assert not environment.calls and call.raw_arguments is not None
        assert call.raw_arguments.encode("utf-8")
        # ...and the history sent back holds arguments any endpoint parses.
        assert endpoint.requests[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    else:
        assert environment.calls == [call.parameters]
    if label in ("lone surrogate escape", "lone surrogate character", "surrogate key"):
        assert result.is_error and "lone UTF-16 surrogate" in told["content"]
    if label in ("1e400", "NaN", "5000 digits", "100,000 levels", "100 levels", "array", "string", "invalid"):
        assert result.is_error


async def test_surrogates_in_the_reply_text_are_replaced_not_fatal() -> None:
    replies = [_reply([("id\ud800", "email__send\udfff", VALID)], content="thinking \ud83d"), text_reply("done \udc00")]
    artifacts, endpoint, _ = await _run_agent(replies)
    assert artifacts.final_observation == "done \ufffd"
    assert endpoint.requests[1]["messages"][2]["content"] == "thinking \ufffd"
    assert endpoint.requests[1]["messages"][3]["tool_call_id"] == "id\ufffd"


async def test_the_reference_agent_s_own_fault_is_an_internal_error(serve: Any, tool_host: Any) -> None:
    class BrokenEndpoint:
        async def complete(self, request: ChatRequest) -> ChatCompletion:
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    def reference(spec: RolloutSpec, clients: ChatClientPool, stop: asyncio.Event) -> Any:
        return ToolCallingAgent(BrokenEndpoint(), spec.model_config)  # type: ignore[arg-type]

    class OwnAgent(ToolCallingAgent):
        """A custom agent built on the reference one: its crash is its own."""

    def custom(spec: RolloutSpec, clients: ChatClientPool, stop: asyncio.Event) -> Any:
        return OwnAgent(BrokenEndpoint(), spec.model_config)  # type: ignore[arg-type]

    model = serve(create_scripted_app(Script([text_reply("unused")])))
    spec = _spec(model.url, tool_host.base_url("email"))
    harness = await _execute(spec, reference)
    assert harness.status == RolloutStatus.FAILED and harness.error_class == ErrorClass.INTERNAL
    assert "not the model's failure" in (harness.artifacts.error or "")
    own = await _execute(spec, custom)
    assert own.status == RolloutStatus.FAILED and own.error_class is None
    assert own.termination_reason == TerminationReason.AGENT_ERROR


class SurrogateCopyingAgent(BaseAgent):
    """A custom agent that records a model's text as it came, lone surrogates and all."""

    @staticmethod
    def name() -> str:
        return "surrogate_copying"

    async def run(self, instruction: str, environment: Any, context: RunArtifacts) -> None:
        context.record_message("assistant", "half \ud83d", tool_calls=[{"id": "c\udfff"}])
        context.set_final_observation("done \udc00")


async def test_a_custom_agent_s_surrogates_are_replaced_before_storing(
    serve: Any, tool_host: Any, tmp_path: Path
) -> None:
    model = serve(create_scripted_app(Script([text_reply("unused")])))
    spec = replace(
        _spec(model.url, tool_host.base_url("email")),
        agent_path="tests.engine.test_hostile_replies:SurrogateCopyingAgent",
    )
    outcome = await _execute(spec)
    assert outcome.status == RolloutStatus.COMPLETED and outcome.error_class is None, outcome.result.message
    assert outcome.artifacts.final_observation == "done \ufffd"
    _assert_not_the_model_s_failure_by_the_harness(outcome, tmp_path)


async def _execute(spec: RolloutSpec, agent_factory: Any = None) -> Any:
    engine = (
        RolloutEngine(ChatClientPool(), ToolServerAdmin())
        if agent_factory is None
        else RolloutEngine(ChatClientPool(), ToolServerAdmin(), agent_factory=agent_factory)
    )
    try:
        return await engine.execute(spec)
    finally:
        await engine.clients.aclose()
        await engine.admin.aclose()


def _assert_not_the_model_s_failure_by_the_harness(outcome: Any, tmp_path: Path) -> None:
    assert outcome.status == RolloutStatus.COMPLETED or outcome.error_class == ErrorClass.INTERNAL, (
        outcome.status,
        outcome.result.message,
    )
    # The service stores the record; the collector reads it back.
    stored = outcome.artifacts.dump(tmp_path / "rollout.json.zst")
    assert RunArtifacts.load(stored).messages


@pytest.mark.parametrize("label", ["lone surrogate escape", "100,000 levels", "1 MB string", "10**400", "NUL"])
async def test_hostile_arguments_through_the_engine(label: str, serve: Any, tool_host: Any, tmp_path: Path) -> None:
    script = Script([tool_call_reply(SEND, HOSTILE_ARGUMENTS[label]), text_reply("done")])
    model = serve(create_scripted_app(script))
    outcome = await _execute(_spec(model.url, tool_host.base_url("email")))
    _assert_not_the_model_s_failure_by_the_harness(outcome, tmp_path)
    assert outcome.status == RolloutStatus.COMPLETED and len(script.requests) == 2


def _raw_app(body: str) -> FastAPI:
    """An endpoint whose first answer is `body` verbatim (JSON a well-behaved server would never write), then a
    final answer."""
    app = FastAPI()
    served: list[int] = []

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Any:
        served.append(1)
        if len(served) == 1:
            return Response(body, media_type="application/json")
        return {"choices": [{"index": 0, "message": text_reply("done")}]}

    return app


def _completion(message: str) -> str:
    return '{"choices": [{"index": 0, "message": ' + message + "}]}"


HOSTILE_REPLIES = {
    "content with a lone surrogate": _completion('{"role": "assistant", "content": "half \\ud83d"}'),
    "call without an id": _completion(
        '{"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": '
        '{"name": "email__list_emails", "arguments": "{}"}}]}'
    ),
    "name with a lone surrogate": _completion(
        '{"role": "assistant", "content": null, "tool_calls": [{"id": "c\\udfff", "type": "function", '
        '"function": {"name": "email__\\ud800", "arguments": "{\\"q\\": \\"\\\\ud800\\"}"}}]}'
    ),
    "huge name": _completion(
        '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": '
        '{"name": "' + "n" * 200_000 + '", "arguments": "{}"}}]}'
    ),
    "call without a name": _completion(
        '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": '
        '{"arguments": "{}"}}]}'
    ),
}


@pytest.mark.parametrize("label", sorted(HOSTILE_REPLIES))
async def test_hostile_replies_through_the_engine(label: str, serve: Any, tool_host: Any, tmp_path: Path) -> None:
    model = serve(_raw_app(HOSTILE_REPLIES[label]))
    outcome = await _execute(_spec(model.url, tool_host.base_url("email")))
    if label == "call without a name":
        # Not a chat completion at all: the endpoint's error, retried, never the model's failure.
        assert outcome.error_class == ErrorClass.MODEL_ENDPOINT
        return
    _assert_not_the_model_s_failure_by_the_harness(outcome, tmp_path)
    if label == "huge name":
        observation = outcome.artifacts.tool_results[0].observation
        assert "Unknown tool call" in observation and len(observation) < 1_000


def _strict_app(script: Script) -> FastAPI:
    """A scripted endpoint with llama.cpp's check: HTTP 500 when a tool call in the history has arguments that are
    not a JSON object. Replays `script.replies` in order; the last one repeats."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Any:
        body = await request.json()
        script.requests.append(body)
        for message in body["messages"]:
            for call in message.get("tool_calls") or []:
                try:
                    parsed = json.loads(call["function"]["arguments"])
                except ValueError:
                    parsed = None
                if not isinstance(parsed, dict):
                    return JSONResponse({"error": {"message": "Failed to parse tool call arguments"}}, 500)
        reply = script.replies[min(len(script.requests), len(script.replies)) - 1]
        return {"choices": [{"index": 0, "message": reply}]}

    return app


async def test_a_strict_endpoint_never_sees_the_model_s_invalid_arguments(serve: Any, tool_host: Any) -> None:
    bad = '{"to": "dana@example.com", "subject": "Hi" "body": "x"}'
    script = Script([tool_call_reply(SEND, bad), tool_call_reply(SEND, VALID, "call_2"), text_reply("Sent.")])
    model = serve(_strict_app(script))
    spec = _spec(model.url, tool_host.base_url("email"))
    outcome = await _execute(replace(spec, model_config=spec.model_config.model_copy(update={"max_steps": 5})))
    assert outcome.error_class != ErrorClass.MODEL_ENDPOINT, outcome.result.message
    assert outcome.status == RolloutStatus.COMPLETED and outcome.artifacts.final_observation == "Sent."
    refused, sent = outcome.artifacts.tool_calls
    assert refused.raw_arguments == bad and refused.arguments_error
    assert sent.parameters == json.loads(VALID)


@pytest.mark.parametrize(
    "answer",
    [
        "[" * 100_000,
        "[" * 500 + "]" * 500,
        "```json\n" + "[" * 100_000 + "\n```",
        "<tool_call>" + "{" * 100_000,
        "9" * 5000,
    ],
    ids=["100,000 open", "500 levels", "fenced", "tagged", "5000 digits"],
)
def test_a_hostile_final_answer_is_not_flagged_and_does_not_raise(answer: str) -> None:
    artifacts = RunArtifacts(task_id="t", task="x", final_observation=answer)
    assert flag_text_tool_call(artifacts) is False
