"""Each termination path of the reference agent loop, against a real email server and a scripted model."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

from eval_pipelines.agents.base import META_TERMINATION, BaseAgent
from eval_pipelines.agents.loader import load_agent_class
from eval_pipelines.agents.tool_calling import ToolCallingAgent
from eval_pipelines.environments.unified import UnifiedEnvironment
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.errors import LLMError
from eval_pipelines.llm.metering import UsageMeter, metering
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import MSG_MAX_STEPS
from eval_pipelines.schemas.tools import STATE_DIFF_MARKER
from eval_pipelines.toolservers.admin import ToolServerAdmin
from tests.support.scripted_llm import Script, create_scripted_app, text_reply, tool_call_reply

SEND = {"to": "dana@example.com", "subject": "Hi", "body": "Hello Dana"}


async def _workspace(tool_host: Any) -> str:
    async with ToolServerAdmin() as admin:
        return await admin.create_workspace(tool_host.base_url("email"), seed=[])


async def _run(
    serve: Any, tool_host: Any, replies: list[dict[str, Any]], max_steps: int = 5
) -> tuple[RunArtifacts, Script]:
    script = Script(replies)
    server = serve(create_scripted_app(script))
    config = ModelConfig(model="scripted", api_key="k", base_url=f"{server.url}/v1", max_steps=max_steps)
    environment = UnifiedEnvironment({"email": await _workspace(tool_host)})
    artifacts = RunArtifacts(task_id="t", task="send a mail")
    async with ChatClient.from_model_config(config) as client:
        agent = ToolCallingAgent(client, config, user_tag="rollout-1")
        await agent.setup(environment)
        try:
            await agent.run("send a mail", environment, artifacts)
        finally:
            await environment.aclose()
    return artifacts, script


async def test_final_answer_after_tool_call(serve: Any, tool_host: Any) -> None:
    with metering(UsageMeter()) as meter:  # the engine meters every rollout's model calls like this
        artifacts, script = await _run(
            serve, tool_host, [tool_call_reply("email__send_email", SEND), text_reply("Sent.")]
        )
    assert artifacts.final_observation == "Sent."
    assert artifacts.metadata[META_TERMINATION] == "final_response"
    assert artifacts.steps_taken == 1 and not artifacts.tool_results[0].is_error
    assert STATE_DIFF_MARKER in artifacts.tool_results[0].observation
    assert meter.usage.llm_calls == 2 and meter.usage.total_tokens == 30
    # The model saw `<server>__<tool>` names and the rollout id as `user`.
    names = {t["function"]["name"] for t in script.requests[0]["tools"]}
    assert "email__send_email" in names and script.requests[0]["user"] == "rollout-1"
    assert script.requests[1]["messages"][-1]["role"] == "tool"


async def test_max_steps_without_final_answer(serve: Any, tool_host: Any) -> None:
    artifacts, script = await _run(serve, tool_host, [tool_call_reply("email__list_emails", {})], max_steps=3)
    assert len(script.requests) == 3 and artifacts.steps_taken == 3
    assert artifacts.error == MSG_MAX_STEPS and artifacts.metadata[META_TERMINATION] == "max_steps"


async def test_unknown_tool_and_bad_json_are_error_results(serve: Any, tool_host: Any) -> None:
    bad = '{"to": "a@example.com" "subject": "x"}'
    artifacts, script = await _run(
        serve,
        tool_host,
        [
            tool_call_reply("email__teleport", {}),
            tool_call_reply("email__send_email", bad),
            tool_call_reply("email__send_email", "[1, 2]"),
            tool_call_reply("email__send_email", SEND),
            text_reply("ok"),
        ],
    )
    first, second, third, fourth = artifacts.tool_results
    assert first.is_error and "Unknown tool call requested by model: email__teleport" in first.observation
    # Invalid JSON: the tool is not called (nothing was sent), the model hears what was wrong, the text is kept.
    assert second.is_error and "not valid JSON (Expecting ',' delimiter at line 1 column 24)" in second.observation
    assert "the tool was not called" in second.observation and "required property" not in second.observation
    assert (artifacts.tool_calls[1].raw_arguments, artifacts.tool_calls[1].parameters) == (bad, {})
    assert artifacts.tool_calls[1].arguments_error == "not valid JSON (Expecting ',' delimiter at line 1 column 24)"
    assert third.is_error and "expected a JSON object, got list" in third.observation
    assert not fourth.is_error and artifacts.tool_calls[3].raw_arguments is None
    # Only the valid call changed state: exactly one mutating diff was recorded.
    assert STATE_DIFF_MARKER in fourth.observation and STATE_DIFF_MARKER not in second.observation
    assert script.requests[2]["messages"][-1]["content"] == second.observation
    assert artifacts.final_observation == "ok"


async def test_model_failure_raises_typed_error(serve: Any, tool_host: Any) -> None:
    with pytest.raises(LLMError):
        await _run(serve, tool_host, [{"status": 400}])


async def test_sync_wrappers_warn_and_work_from_a_worker_thread(tool_host: Any) -> None:
    environment = UnifiedEnvironment({"email": await _workspace(tool_host)})
    await environment.alist_tools()

    def sync_agent_body() -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tools = environment.list_tools()
            result = environment.call_tool("email", "send_email", SEND)
        assert any(issubclass(w.category, DeprecationWarning) for w in caught)
        return tools, result

    tools, result = await asyncio.to_thread(sync_agent_body)
    assert any(t["name"] == "send_email" for t in tools) and not result.is_error
    await environment.aclose()


def test_custom_agent_loading() -> None:
    assert issubclass(load_agent_class("eval_pipelines.agents.tool_calling:ToolCallingAgent"), BaseAgent)
    with pytest.raises(ValueError, match="form"):
        load_agent_class("no_colon_here")
    with pytest.raises(ValueError, match="cannot be imported"):
        load_agent_class("not_a_module_xyz:Agent")
    with pytest.raises(TypeError, match="BaseAgent"):
        load_agent_class("eval_pipelines.schemas.artifacts:RunArtifacts")


async def test_summarisation_sends_the_shortened_history(serve: Any, tool_host: Any) -> None:
    replies = [tool_call_reply("email__list_emails", {"limit": i + 1}, f"call_{i}") for i in range(4)]
    script = Script([*replies, text_reply("done")])
    server = serve(create_scripted_app(script))
    config = ModelConfig(
        model="scripted",
        api_key="k",
        base_url=f"{server.url}/v1",
        max_steps=6,
        summarize_every_n_turns=2,
        context_stride=1,
    )
    environment = UnifiedEnvironment({"email": await _workspace(tool_host)})
    artifacts = RunArtifacts(task_id="t", task="list")
    async with ChatClient.from_model_config(config) as client:
        await ToolCallingAgent(client, config).run("list my mail", environment, artifacts)
    await environment.aclose()

    def shape(request: dict[str, Any]) -> list[str]:
        return [m["role"] + ("+calls" if m.get("tool_calls") else "") for m in request["messages"]]

    # Turn 2 (third request): the first exchange is summarised, the last one (context_stride=1) kept verbatim.
    third = script.requests[2]
    assert shape(third) == ["system", "user", "user", "assistant+calls", "tool"]
    summary = third["messages"][2]["content"]
    assert summary.startswith("Summary of the first 1 tool calls") and '"limit": 1' in summary
    assert third["messages"][3]["tool_calls"][0]["id"] == "call_1"
    # Turn 4: the summary accumulates all three older calls; the full record keeps everything.
    fifth = script.requests[4]
    assert fifth["messages"][2]["content"].startswith("Summary of the first 3 tool calls")
    assert shape(fifth)[3:] == ["assistant+calls", "tool"]
    assert artifacts.steps_taken == 4 and len([m for m in artifacts.messages if m["role"] == "tool"]) == 4
    # Turns without a summary step send the history unchanged.
    assert shape(script.requests[1]) == ["system", "user", "assistant+calls", "tool"]


def test_tool_specs_are_built_once_per_distinct_tool() -> None:
    from eval_pipelines.agents.tool_calling import _tool_spec

    schema = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}
    first = _tool_spec("email__send", "Send an email", schema)
    assert first.function.name == "email__send" and first.function.parameters == schema
    assert _tool_spec("email__send", "Send an email", dict(schema)) is first
    changed = {**schema, "required": []}
    assert _tool_spec("email__send", "Send an email", changed).function.parameters == changed
    assert _tool_spec("email__send", "Send a message", schema).function.description == "Send a message"
