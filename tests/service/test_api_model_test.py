"""POST /test-model-config: a real test completion, failures classified into error_type, no key in messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.clients.evaluation import EvaluationClient
from eval_pipelines.lib.serving import free_port
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.taskgen import ModelTestErrorType
from tests.service.eval_service_support import SIM_ORACLE, WRITE_KEY, RunningService, running_service
from tests.support.scripted_llm import Script

SECRET = "sk-model-key-must-not-leak-0123456789"


@pytest.fixture(scope="module")
def quick_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with running_service(tmp_path_factory.mktemp("model-test"), model_test_timeout_seconds=1.0) as running:
        yield running


def _config(**fields: Any) -> ModelConfig:
    return ModelConfig.model_validate({**SIM_ORACLE, "api_key": SECRET, **fields})


async def test_simulated_model_passes(quick_service: RunningService) -> None:
    async with EvaluationClient(quick_service.url, WRITE_KEY) as client:
        result = await client.test_model_config(_config())
    assert result.success and result.error_type is None and "sim-oracle" in result.message


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"status": 401}, ModelTestErrorType.AUTHENTICATION_ERROR),
        ({"status": 403}, ModelTestErrorType.AUTHENTICATION_ERROR),
        ({"status": 404}, ModelTestErrorType.INVALID_MODEL),
        ({"status": 429}, ModelTestErrorType.RATE_LIMIT),
        ({"status": 400}, ModelTestErrorType.BAD_REQUEST),
        ({"status": 500}, ModelTestErrorType.UNKNOWN),
        ({"sleep": 2.0}, ModelTestErrorType.TIMEOUT),
    ],
)
async def test_endpoint_failures_are_classified(
    quick_service: RunningService, scripted: tuple[Script, str], reply: dict[str, Any], expected: ModelTestErrorType
) -> None:
    script, url = scripted
    script.replies = [reply]
    async with EvaluationClient(quick_service.url, WRITE_KEY) as client:
        result = await client.test_model_config(_config(model="scripted", base_url=f"{url}/v1"))
    assert not result.success and result.error_type == expected, result
    assert result.message and SECRET not in result.message
    if "status" in reply:
        assert len(script.requests) == 1  # one attempt: a configuration test does not back off and retry


async def test_unreachable_and_unknown_model_and_bad_url(quick_service: RunningService, tmp_path: Path) -> None:
    async with EvaluationClient(quick_service.url, WRITE_KEY) as client:
        closed_port = free_port()
        unreachable = await client.test_model_config(_config(base_url=f"http://127.0.0.1:{closed_port}/v1"))
        assert unreachable.error_type == ModelTestErrorType.CONNECTION_ERROR and SECRET not in unreachable.message
        unknown = await client.test_model_config(_config(model="no-such-model"))
        assert unknown.error_type == ModelTestErrorType.INVALID_MODEL and "no-such-model" in unknown.message
        bad_url = await client.test_model_config(_config(base_url="ftp://example.invalid"))
        assert bad_url.error_type == ModelTestErrorType.BAD_REQUEST and SECRET not in bad_url.message


async def test_a_spec_minimal_config_is_tested_not_refused(quick_service: RunningService) -> None:
    """`{model, api_key}` is a valid ModelConfig: the test answers 200 with a result, and a model name that names
    no provider is a bad_request result saying base_url is needed."""
    async with EvaluationClient(quick_service.url, WRITE_KEY) as client:
        result = await client.test_model_config(ModelConfig.model_validate({"model": "llama3.1", "api_key": SECRET}))
    assert not result.success and result.error_type == ModelTestErrorType.BAD_REQUEST
    assert "base_url is required" in result.message and SECRET not in result.message
