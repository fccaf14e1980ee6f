"""A spec-minimal ModelConfig (`{model, api_key}`) is valid; where it can be sent is decided by its model name."""

from __future__ import annotations

import pytest

from eval_pipelines.schemas.model_config import PROVIDER_BASE_URLS, ModelConfig, Provider, provider_of_model_name


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("gpt-4o-mini", Provider.OPENAI),
        ("o3-mini", Provider.OPENAI),
        ("claude-sonnet-4-5", Provider.ANTHROPIC),
        ("gemini-2.5-flash", Provider.GEMINI),
        ("openrouter/meta-llama/llama-3.1-8b-instruct", Provider.OPENROUTER),
        ("together/Qwen/Qwen2.5-7B-Instruct-Turbo", Provider.TOGETHER),
        ("Qwen/Qwen2.5-7B-Instruct", None),
        ("custom/anything", None),
        ("llama3.1", None),
    ],
)
def test_a_model_name_names_its_provider_or_none(model: str, provider: Provider | None) -> None:
    assert provider_of_model_name(model) == provider


def test_a_spec_minimal_config_validates_with_the_spec_defaults() -> None:
    config = ModelConfig.model_validate({"model": "gpt-4o-mini", "api_key": "sk-test"})
    assert config.provider == Provider.CUSTOM and config.base_url is None
    assert config.resolved_base_url() == PROVIDER_BASE_URLS[Provider.OPENAI]


def test_an_explicit_base_url_wins_over_the_model_name() -> None:
    config = ModelConfig.model_validate({"model": "gpt-4o", "api_key": "k", "base_url": "http://localhost:8000/v1/"})
    assert config.resolved_base_url() == "http://localhost:8000/v1"


def test_a_custom_model_name_without_base_url_says_what_is_missing() -> None:
    config = ModelConfig.model_validate({"model": "Qwen/Qwen2.5-7B-Instruct", "api_key": "k"})
    with pytest.raises(ValueError, match=r"base_url is required.*Qwen/Qwen2\.5-7B-Instruct"):
        config.resolved_base_url()
