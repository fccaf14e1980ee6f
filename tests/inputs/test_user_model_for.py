"""Who plays a task's simulated user: a model's own `user_model`, else the sweep's, else `sim-user` for a sweep of
simulated models; a sweep with a real model must name one (exit 2 naming the field), and tasks without a simulated
user need none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.inputs.sweeps import DEFAULT_SIMULATED_USER, ConfigError, user_model_for
from eval_pipelines.schemas.sweep import SweepConfig

SIM = {"name": "oracle", "model": "sim-oracle", "base_url": "sim://local"}
REAL = {"name": "qwen", "model": "qwen", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "K"}
PLAYER = {"name": "user-llm", "model": "qwen-user", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "K"}


@pytest.fixture
def scenario(tmp_path: Path) -> ScenarioFiles:
    folder = tmp_path / "airline_like"
    (folder / "tasks").mkdir(parents=True)
    (folder / "template.json").write_text(json.dumps({"scenario_id": "airline_like:1.0.0", "name": "a"}))
    user = {"kind": "simulated", "system_prompt": "You are Raj.", "stop_tokens": ["###STOP###"]}
    for task_id, spec in (("talks", user), ("quiet", None)):
        task = {"task_id": task_id, "name": task_id, "description": "d", **({"user": spec} if spec else {})}
        (folder / "tasks" / f"{task_id}.json").write_text(json.dumps(task))
    return ScenarioCatalog(tmp_path).get("airline_like:1.0.0")


def _sweep(*models: dict[str, str], **extra: object) -> SweepConfig:
    return SweepConfig.model_validate({"name": "s", "scenarios": ["*"], "models": list(models), **extra})


def test_a_sweep_of_simulated_models_gets_the_simulated_user(scenario: ScenarioFiles) -> None:
    sweep = _sweep(SIM)
    assert user_model_for(sweep, sweep.models[0], scenario, ["talks"]) == DEFAULT_SIMULATED_USER
    assert user_model_for(sweep, sweep.models[0], scenario, ["quiet"]) is None  # no simulated user: none needed


def test_a_real_model_needs_a_named_user_model(scenario: ScenarioFiles) -> None:
    sweep = _sweep(SIM, REAL)
    with pytest.raises(ConfigError, match=r"sweeps/x.yaml: user_model: the tasks of airline_like:1.0.0"):
        user_model_for(sweep, sweep.models[1], scenario, ["talks"], "sweeps/x.yaml")
    named = _sweep(SIM, REAL, user_model=PLAYER)
    assert user_model_for(named, named.models[1], scenario, ["talks"]) == named.user_model
    own = _sweep(SIM, {**REAL, "user_model": "oracle"})
    assert user_model_for(own, own.models[1], scenario, ["talks"]) == own.models[0]
