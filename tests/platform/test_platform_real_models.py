"""Judges and generators on real OpenAI-compatible endpoints, selected through the model registry: a scripted
third-party endpoint, and the simulated personas served on the shared simulated-model app."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.clients.platform import PlatformServerError
from eval_pipelines.platform.models import ModelConfigError, ModelKind, ModelRegistry, RegisteredModel
from eval_pipelines.schemas.platform import (
    ConversationJudgeRequest,
    ConversationMessage,
    JudgeCreateRequest,
    SynthDataRequest,
)
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.sim.platform import PLATFORM_PERSONAS, SIM_SAFETY_JUDGE
from tests.platform.conftest import BENIGN_ROW, HARMFUL_ROW, SPACE, PlatformFactory
from tests.support.scripted_llm import Script, create_scripted_app, text_reply

KEY_ENV = "PLATFORM_TEST_MODEL_KEY"
KEY = "sk-test-platform-model-key-0123456789"
GENERATOR_ID = "3f8b6c2e-1a4d-4e7f-9b0c-5d2e8a7f1c36"


def _registry(base_url: str) -> ModelRegistry:
    endpoint = {"base_url": base_url, "api_key_env": KEY_ENV}
    return ModelRegistry.defaults().with_models(
        {
            "veritas": RegisteredModel(model="judge-x", **endpoint),
            GENERATOR_ID: RegisteredModel(model="writer-x", **endpoint),
        }
    )


def _conversation(judge_id: str, row: dict[str, Any] = BENIGN_ROW) -> ConversationJudgeRequest:
    return ConversationJudgeRequest(
        conversation_prefix=[ConversationMessage(**m) for m in row["conv_prefix"]],
        response=ConversationMessage(**row["response"]),
        space_id=uuid.UUID(SPACE),
        judge_id=uuid.UUID(judge_id),
    )


def _judge(**extra: Any) -> JudgeCreateRequest:
    return JudgeCreateRequest(judge_name="real", space_id=uuid.UUID(SPACE), model_name="veritas", **extra)


@pytest.fixture
def key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


async def test_judge_runs_on_the_registered_endpoint_with_few_shots_in_the_prompt(
    serve: Any, start_platform: PlatformFactory, key_in_env: None
) -> None:
    verdict = {"score": 7, "category": "helpful", "rationale": "Did what was asked."}
    script = Script([text_reply(f"Verdict:\n```json\n{json.dumps(verdict)}\n```")])
    llm = serve(create_scripted_app(script))
    platform = start_platform(_registry(f"{llm.url}/v1"))
    async with platform.client() as client:
        judge = await client.create_judge(
            _judge(
                conv_few_shot=[{"response": "FEWSHOT-CONV-MARKER", "score": 2}],
                qa_few_shot=[{"question": "FEWSHOT-QA-MARKER?", "answer": "yes"}],
            )
        )
        result = await client.judge_conversation(_conversation(judge.id))
    assert (result.score, result.category, result.rationale) == (7, "helpful", "Did what was asked.")
    sent = script.requests[0]
    assert sent["model"] == "judge-x" and sent["temperature"] == 0.0
    system, user = sent["messages"][0]["content"], sent["messages"][-1]["content"]
    assert "FEWSHOT-CONV-MARKER" in system and "FEWSHOT-QA-MARKER?" in system
    assert BENIGN_ROW["response"]["content"] in user and BENIGN_ROW["conv_prefix"][0]["content"] in user


async def test_unreadable_verdict_is_asked_for_again(
    serve: Any, start_platform: PlatformFactory, key_in_env: None
) -> None:
    script = Script([text_reply("Looks fine to me."), text_reply('{"score": "4", "rationale": "meh"}')])
    llm = serve(create_scripted_app(script))
    platform = start_platform(_registry(f"{llm.url}/v1"))
    async with platform.client() as client:
        judge = await client.create_judge(_judge())
        result = await client.judge_conversation(_conversation(judge.id))
    assert result.score == 4 and result.category is None
    assert len(script.requests) == 2


async def test_model_failure_is_502_without_the_key(
    serve: Any, start_platform: PlatformFactory, key_in_env: None
) -> None:
    llm = serve(create_scripted_app(Script([{"status": 401}])))
    platform = start_platform(_registry(f"{llm.url}/v1"))
    async with platform.client() as client:
        judge = await client.create_judge(_judge())
        with pytest.raises(PlatformServerError) as caught:
            await client.judge_conversation(_conversation(judge.id))
    assert caught.value.status == 502
    assert "judge 'real'" in str(caught.value) and "401" in str(caught.value)
    assert KEY not in str(caught.value) and KEY not in json.dumps(caught.value.detail)


async def test_unset_key_variable_is_503_naming_the_variable(
    serve: Any, start_platform: PlatformFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    llm = serve(create_scripted_app(Script([text_reply("{}")])))
    platform = start_platform(_registry(f"{llm.url}/v1"))
    async with platform.client() as client:
        judge = await client.create_judge(_judge())
        with pytest.raises(PlatformServerError) as caught:
            await client.judge_conversation(_conversation(judge.id))
        assert caught.value.status == 503 and KEY_ENV in str(caught.value)
        with pytest.raises(PlatformServerError) as synth:
            await client.generate_synthetic(
                SynthDataRequest(model_id=uuid.UUID(GENERATOR_ID), multiplier=1, examples=[{"q": "a b"}], prompt="p")
            )
        assert synth.value.status == 503


async def test_generator_on_a_real_endpoint_retries_a_bad_reply(
    serve: Any, start_platform: PlatformFactory, key_in_env: None
) -> None:
    new_row = {"question": "What is 2 + 3?", "answer": "5"}
    script = Script([text_reply("Sure! Here you go."), text_reply(json.dumps(new_row))])
    llm = serve(create_scripted_app(script))
    platform = start_platform(_registry(f"{llm.url}/v1"))
    examples = [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "What is 2 + 2?", "answer": "4"}]
    async with platform.client() as client:
        rows = await client.generate_synthetic(
            SynthDataRequest(model_id=uuid.UUID(GENERATOR_ID), multiplier=2, examples=examples, prompt="Vary it.")
        )
    assert [r.data for r in rows] == [new_row] * 4
    assert len(script.requests) == 5  # one reply was not a row and was asked for again
    assert all(r["model"] == "writer-x" for r in script.requests)
    assert "Vary it." in script.requests[0]["messages"][-1]["content"]


async def test_generator_replies_without_the_examples_keys_are_dropped(
    serve: Any, start_platform: PlatformFactory, key_in_env: None
) -> None:
    llm = serve(create_scripted_app(Script([text_reply('{"other": "shape"}')])))
    platform = start_platform(_registry(f"{llm.url}/v1"))
    async with platform.client() as client:
        rows = await client.generate_synthetic(
            SynthDataRequest(model_id=uuid.UUID(GENERATOR_ID), multiplier=2, examples=[{"q": "a b"}], prompt="p")
        )
    assert rows == []


async def test_personas_served_on_the_shared_simulated_endpoint(serve: Any, start_platform: PlatformFactory) -> None:
    sim = serve(create_sim_app(ReferenceBook(), personas=PLATFORM_PERSONAS))
    registry = ModelRegistry.defaults().with_models(
        {"collinear_guard": RegisteredModel(model=SIM_SAFETY_JUDGE, base_url=f"{sim.url}/v1")}
    )
    platform = start_platform(registry)
    async with platform.client() as client:
        guard = await client.create_judge(
            JudgeCreateRequest(judge_name="g", space_id=uuid.UUID(SPACE), model_name="collinear_guard")
        )
        harmful = await client.judge_conversation(_conversation(guard.id, HARMFUL_ROW))
        benign = await client.judge_conversation(_conversation(guard.id, BENIGN_ROW))
    assert harmful.score > benign.score and harmful.rationale.startswith("[simulated]")


def test_registry_file_adds_and_overrides_models(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        f"""
models:
  veritas: {{base_url: http://localhost:8000/v1, model: qwen-judge, api_key_env: VLLM_KEY}}
  house-guard: {{provider: openai, model: gpt-4o-mini, api_key_env: OPENAI_API_KEY, kind: safety}}
  {GENERATOR_ID.upper()}: {{base_url: http://localhost:8000/v1, model: writer}}
"""
    )
    registry = ModelRegistry.from_file(path)
    veritas = registry.get("veritas")
    assert veritas is not None and veritas.model == "qwen-judge" and veritas.kind == ModelKind.QUALITY
    guard = registry.get("house-guard")
    assert guard is not None and guard.kind == ModelKind.SAFETY and guard.resolved_base_url().startswith("https://")
    assert registry.get(GENERATOR_ID) is not None and GENERATOR_ID in registry.names(ModelKind.GENERATOR)
    assert registry.get("collinear_guard") is not None  # defaults stay


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("mystery: {base_url: http://x/v1, model: m}", "set `kind`"),
        ("writer: {base_url: http://x/v1, model: m, kind: generator}", "must be a UUID"),
        ("veritas: {base_url: 'sim://local', model: sim-unknown}", "no simulated persona"),
        ("veritas: {model: m}", "base_url is required"),
    ],
)
def test_registry_file_errors_name_the_entry(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  {entry}\n")
    with pytest.raises(ModelConfigError, match=message):
        ModelRegistry.from_file(path)


def test_default_registry_is_simulated() -> None:
    registry = ModelRegistry.defaults()
    for name in ("veritas", "veritas_nano", "collinear_guard", "collinear_guard_nano"):
        entry = registry.get(name)
        assert entry is not None and entry.is_simulated and entry.model in PLATFORM_PERSONAS
