"""Wire types (liberal reading, conservative writing), secret scrubbing and cost estimates."""

from __future__ import annotations

import pytest

from eval_pipelines.llm import (
    ChatCompletion,
    ChatMessage,
    ChatRequest,
    ToolSpec,
    estimate_cost_usd,
    price_for,
    scrub_secrets,
    split_wire_tool_name,
    wire_tool_name,
)
from eval_pipelines.llm.client import normalise_base_url
from eval_pipelines.schemas.sweep import is_simulated_model


def test_completion_reading_is_liberal() -> None:
    completion = ChatCompletion.model_validate(
        {
            "id": "x",
            "model": "m",
            "provider": "someone",  # unknown top-level field
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}],
                        "reasoning_content": "thinking...",
                        "tool_calls": [
                            {"id": "", "function": {"name": "email__send_email", "arguments": {"to": "a@b.co"}}},
                            {"id": "c2", "type": "function", "function": {"name": "x__y", "arguments": "{not json"}},
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": None, "total_tokens": 5},
        }
    )
    message = completion.message
    assert message.content == "Hello"
    first, second = completion.tool_calls
    assert first.id.startswith("call_") and first.parsed_arguments() == {"to": "a@b.co"}
    assert second.parsed_arguments() == {}
    assert completion.usage is not None and completion.usage.completion_tokens == 0
    # Extras read from one provider are not sent back to another.
    assert message.to_wire() == {
        "role": "assistant",
        "content": "Hello",
        "tool_calls": [first.to_wire(), second.to_wire()],
    }


def test_request_writing_is_conservative() -> None:
    request = ChatRequest(
        model="m",
        messages=[ChatMessage.user("hi"), ChatMessage.assistant(None), ChatMessage.tool("c1", "ok")],
        tool_choice="auto",
        response_format={"type": "json_object"},  # a provider extra: passed through
    )
    wire = request.to_wire()
    assert wire == {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None},
            {"role": "tool", "content": "ok", "tool_call_id": "c1"},
        ],
        "response_format": {"type": "json_object"},
    }
    with_tools = request.model_copy(update={"tools": [ToolSpec.for_tool("email", "send")]}).to_wire()
    assert with_tools["tool_choice"] == "auto"
    assert with_tools["tools"][0]["function"]["name"] == "email__send"


def test_wire_tool_names_round_trip() -> None:
    assert wire_tool_name("email", "send_email") == "email__send_email"
    assert split_wire_tool_name("email__send_email") == ("email", "send_email")
    assert split_wire_tool_name("send_email") is None


def test_scrub_secrets() -> None:
    key = "my-very-secret-key-123"
    text = f"bad key {key}; header was Bearer {key}; also sk-abcdefghijklmnopqrstuvwxyz"
    scrubbed = scrub_secrets(text, [key, None, ""])
    assert key not in scrubbed and "sk-abcdefghijklmnop" not in scrubbed
    assert scrubbed.count("[REDACTED]") == 3


def test_base_url_normalisation() -> None:
    assert normalise_base_url("http://h:1/v1/") == "http://h:1/v1"
    assert normalise_base_url("https://h/v1/chat/completions") == "https://h/v1"
    with pytest.raises(ValueError):
        normalise_base_url("h:1/v1")


def test_cost_estimates() -> None:
    assert estimate_cost_usd("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert estimate_cost_usd("gpt-4o-2024-08-06", 1_000_000, 0) == pytest.approx(2.5)  # longest prefix wins
    assert estimate_cost_usd("openai/gpt-4.1-mini", 0, 1_000_000) == pytest.approx(1.6)
    assert estimate_cost_usd("anthropic/claude-3.5-sonnet", 1000, 1000) == pytest.approx(0.018)
    assert estimate_cost_usd("my-local-llama", 10_000, 10_000) is None  # unknown, not free
    for model in ("sim-oracle", "sim-noisy", "sim-noop"):
        assert is_simulated_model(model) and price_for(model) is None
        assert estimate_cost_usd(model, 10_000, 10_000) == 0.0
    with pytest.raises(ValueError):
        estimate_cost_usd("gpt-4o", -1, 0)
