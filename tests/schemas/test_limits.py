"""Every limit of the spec schemas rejects a bad value with an error that names the field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.platform import (
    AssessRunRequest,
    DatasetRow,
    JudgeCreateRequest,
    SynthDataRequest,
)
from eval_pipelines.schemas.runs import RunLaunchRequest
from eval_pipelines.schemas.sweep import SweepConfig, SweepModel
from eval_pipelines.schemas.taskgen import TaskGenRequest

MODEL: dict[str, Any] = {"model": "m", "api_key": "k", "base_url": "http://localhost:1/v1"}
LAUNCH: dict[str, Any] = {"scenario_id": "s", "task_ids": ["t1"], "model_config": MODEL}
SPACE = "7b0c2f7e-8f6e-4c8e-9a4c-0b5d2b7d9e11"


def _field_error(model: type[BaseModel], data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return " ".join(".".join(str(p) for p in e["loc"]) + ": " + e["msg"] for e in info.value.errors())


@pytest.mark.parametrize(
    ("model", "data", "field"),
    [
        (ModelConfig, {**MODEL, "temperature": -0.1}, "temperature"),
        (ModelConfig, {**MODEL, "temperature": 2.01}, "temperature"),
        (ModelConfig, {**MODEL, "max_steps": 0}, "max_steps"),
        (ModelConfig, {**MODEL, "context_stride": 0}, "context_stride"),
        (ModelConfig, {**MODEL, "summarize_every_n_turns": -1}, "summarize_every_n_turns"),
        (ModelConfig, {**MODEL, "provider": "nope"}, "provider"),
        (ModelConfig, {"model": "m", "base_url": "http://x"}, "api_key"),
        (ModelConfig, {**MODEL, "model": ""}, "model"),
        (RunLaunchRequest, {**LAUNCH, "task_ids": []}, "task_ids"),
        (RunLaunchRequest, {**LAUNCH, "rollout_count": 0}, "rollout_count"),
        (RunLaunchRequest, {**LAUNCH, "max_parallel": 0}, "max_parallel"),
        (RunLaunchRequest, {**LAUNCH, "scenario_id": ""}, "scenario_id"),
        (RunLaunchRequest, {**LAUNCH, "model_config": {**MODEL, "temperature": 3}}, "model_config.temperature"),
        (TaskGenRequest, {"toolset": [{"name": "x"}], "num_tasks": 0}, "num_tasks"),
        (TaskGenRequest, {"toolset": [{"name": "x"}], "num_tasks": 201}, "num_tasks"),
        (TaskGenRequest, {"toolset": []}, "toolset"),
        (
            DatasetRow,
            {"conv_prefix": [], "response": {"role": "assistant", "content": "x"}, "ground_truth": "1"},
            "ground_truth",
        ),
        (JudgeCreateRequest, {"judge_name": "j", "space_id": "not-a-uuid", "model_name": "veritas"}, "space_id"),
        (
            JudgeCreateRequest,
            {"judge_name": "j", "space_id": SPACE, "model_name": "v", "nano_model_type": "x"},
            "nano_model_type",
        ),
        (AssessRunRequest, {"dataset_id": SPACE, "space_id": SPACE, "judge_ids": [], "name": "n"}, "judge_ids"),
        (SynthDataRequest, {"model_id": SPACE, "multiplier": 0, "examples": [{}], "prompt": "p"}, "multiplier"),
        (SweepModel, {"name": "bad|name", "model": "m", "base_url": "sim://local"}, "name"),
        (SweepModel, {"name": "real", "model": "m", "provider": "openai"}, "api_key_env"),
        (SweepConfig, {"name": "s", "scenarios": [], "models": []}, "scenarios"),
    ],
)
def test_limit_rejects_with_field_name(model: type[BaseModel], data: dict[str, Any], field: str) -> None:
    assert field in _field_error(model, data)


def test_task_override_keys_must_be_task_ids() -> None:
    message = _field_error(RunLaunchRequest, {**LAUNCH, "task_overrides": {"other": {"name": "x"}}})
    assert "task_overrides" in message and "other" in message


def test_defaults_match_the_spec() -> None:
    config = ModelConfig.model_validate(MODEL)
    assert (config.provider.value, config.temperature, config.max_steps) == ("custom", 0.7, 30)
    assert (config.log_prob, config.summarize_every_n_turns, config.context_stride) == (False, 0, 3)
    launch = RunLaunchRequest.model_validate(LAUNCH)
    assert launch.rollout_count == 1 and launch.source.value == "rl-gym"
    generation = TaskGenRequest.model_validate({"toolset": [{"name": "x"}]})
    assert generation.num_tasks == 10
    assert (generation.workspace.email_domain, generation.workspace.agent_email) == ("example.com", "agent@example.com")


def test_api_key_never_leaves_the_model() -> None:
    canary = "sk-canary-5f3a9"
    config = ModelConfig.model_validate({**MODEL, "api_key": canary})
    assert canary not in repr(config) and canary not in str(config)
    assert canary not in config.model_dump_json() and canary not in str(config.model_dump())
    assert canary not in config.echo().model_dump_json()
    assert config.reveal_api_key() == canary


def test_hosted_variants_are_accepted() -> None:
    from eval_pipelines.schemas.runs import Rollout
    from eval_pipelines.schemas.tools import StepResponse, ToolDefinition

    for key in ("parameters", "inputSchema", "input_schema"):
        tool = ToolDefinition.model_validate({"name": "t", key: {"type": "object", "properties": {"a": {}}}})
        assert "a" in tool.parameters["properties"]
    wrapped = StepResponse.model_validate(
        {"observation": {"is_error": True, "content": [{"type": "text", "text": "boom"}]}, "reward": None}
    )
    assert (wrapped.observation, wrapped.is_error) == ("boom", True)
    rollout = Rollout.model_validate(
        {
            "rollout_id": "r",
            "scenario_id": "s",
            "task_id": "t",
            "run_id": "u",
            "status": "completed",
            "model_config_data": {"model": "m", "context_stride": 5},
        }
    )
    assert rollout.model_config_ is not None and rollout.model_config_.context_stride == 5
