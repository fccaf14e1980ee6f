"""The per-reply tool-call cap: a reply asking for 500 calls runs at most the cap, and the rollout records it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from eval_pipelines.inputs.sweeps import model_config_for
from eval_pipelines.schemas.artifacts import META_TOOL_CALLS_OVER_CAP
from eval_pipelines.schemas.model_config import DEFAULT_MAX_TOOL_CALLS_PER_REPLY, ModelConfig
from eval_pipelines.schemas.runs import RolloutStatus
from eval_pipelines.schemas.sweep import SweepModel
from tests.engine.test_engine import _execute, _spec
from tests.support.scripted_llm import Script, create_scripted_app, text_reply

REQUESTED = 500


def _many_calls(count: int) -> dict[str, Any]:
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "email__list_emails", "arguments": "{}"}}
        for i in range(count)
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


async def test_a_reply_with_500_calls_runs_at_most_the_cap(serve: Any, tool_host: Any) -> None:
    script = Script([_many_calls(REQUESTED), text_reply("done")])
    model = serve(create_scripted_app(script))
    outcome = await _execute(_spec(model.url, tool_host.base_url("email")))
    cap = DEFAULT_MAX_TOOL_CALLS_PER_REPLY
    assert outcome.status == RolloutStatus.COMPLETED
    artifacts = outcome.artifacts
    assert artifacts.steps_taken == cap and len(artifacts.tool_calls) == cap
    assert artifacts.metadata[META_TOOL_CALLS_OVER_CAP] == REQUESTED - cap
    # The next request answers every call id, so the history stays valid; the calls past the cap say why.
    tool_messages = [m for m in script.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [f"call_{i}" for i in range(REQUESTED)]
    skipped = tool_messages[cap:]
    assert all(f"at most {cap} are run per reply" in m["content"] for m in skipped)
    assert not any("at most" in m["content"] for m in tool_messages[:cap])
    # The stored transcript shows it too.
    stored = [m for m in artifacts.messages if m["role"] == "tool" and m.get("is_error")]
    assert len(stored) == REQUESTED - cap


async def test_the_cap_is_the_model_config_s(serve: Any, tool_host: Any) -> None:
    script = Script([_many_calls(5), _many_calls(5), text_reply("done")])
    model = serve(create_scripted_app(script))
    spec = _spec(model.url, tool_host.base_url("email"))
    config = spec.model_config.model_copy(update={"max_tool_calls_per_reply": 2})
    outcome = await _execute(replace(spec, model_config=config))
    assert outcome.artifacts.steps_taken == 4
    assert outcome.artifacts.metadata[META_TOOL_CALLS_OVER_CAP] == 6


async def test_a_reply_within_the_cap_records_no_cap(serve: Any, tool_host: Any) -> None:
    model = serve(create_scripted_app(Script([_many_calls(3), text_reply("done")])))
    outcome = await _execute(_spec(model.url, tool_host.base_url("email")))
    assert outcome.artifacts.steps_taken == 3 and META_TOOL_CALLS_OVER_CAP not in outcome.artifacts.metadata


def test_the_sweep_option_reaches_the_model_config_and_its_echo() -> None:
    sweep_model = SweepModel(name="m", model="sim-oracle", base_url="sim://local", max_tool_calls_per_reply=7)
    config = model_config_for(sweep_model)
    assert config.max_tool_calls_per_reply == 7 and config.echo().max_tool_calls_per_reply == 7
    default = model_config_for(SweepModel(name="m", model="sim-oracle", base_url="sim://local"))
    assert default.tool_call_cap == DEFAULT_MAX_TOOL_CALLS_PER_REPLY
    # Unset, the local extension stays off the wire: a hosted service never sees a field it may not know.
    assert "max_tool_calls_per_reply" not in default.model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize("value", [0, 100_000])
def test_a_cap_out_of_range_is_refused_naming_the_field(value: int) -> None:
    with pytest.raises(ValidationError, match="max_tool_calls_per_reply"):
        SweepModel(name="m", model="sim-oracle", base_url="sim://local", max_tool_calls_per_reply=value)
    with pytest.raises(ValidationError, match="max_tool_calls_per_reply"):
        ModelConfig(model="m", api_key="k", max_tool_calls_per_reply=value)
