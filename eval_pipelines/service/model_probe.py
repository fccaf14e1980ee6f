"""`POST /test-model-config`: one real, short test completion against the configured endpoint."""

from __future__ import annotations

import asyncio
import time

import httpx

from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.errors import LLMError, scrub_secrets, truncate
from eval_pipelines.llm.types import ChatMessage, ChatRequest
from eval_pipelines.runtime.local import LocalRuntime
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.sweep import SIMULATED_BASE_URL
from eval_pipelines.schemas.taskgen import ModelConfigTestResult, ModelTestErrorType

PROBE_PROMPT = "Reply with the single word OK."


def _failure(message: str, error_type: ModelTestErrorType, secrets: list[str]) -> ModelConfigTestResult:
    clean = truncate(scrub_secrets(message, secrets))
    return ModelConfigTestResult(success=False, message=clean, error_type=error_type)


async def probe_model(config: ModelConfig, runtime: LocalRuntime, timeout_seconds: float) -> ModelConfigTestResult:
    """Send the test completion; a failure is a result (`success: false` + `error_type`), never an exception.

    One attempt only: the caller wants to know whether the configuration works now, not after back-off.
    """
    secrets = [config.reveal_api_key()]
    try:
        if config.base_url == SIMULATED_BASE_URL:
            await asyncio.to_thread(runtime.start)
        client = ChatClient.from_model_config(
            runtime.resolve(config),
            timeout_seconds=timeout_seconds,
            retry=RetryPolicy(max_attempts=1),
            max_concurrency=1,
        )
    except (ValueError, httpx.InvalidURL) as exc:
        return _failure(f"invalid model configuration: {exc}", ModelTestErrorType.BAD_REQUEST, secrets)
    started = time.monotonic()
    request = ChatRequest(model=config.model, messages=[ChatMessage.user(PROBE_PROMPT)], temperature=config.temperature)
    try:
        async with client, asyncio.timeout(timeout_seconds + 0.5):
            completion = await client.complete(request)
    except LLMError as exc:
        return _failure(exc.message, exc.error_type, secrets)
    except TimeoutError:
        return _failure(f"no answer within {timeout_seconds:g}s", ModelTestErrorType.TIMEOUT, secrets)
    except Exception as exc:  # whatever else goes wrong is reported, with the key scrubbed
        return _failure(f"test completion failed: {type(exc).__name__}: {exc}", ModelTestErrorType.UNKNOWN, secrets)
    elapsed = time.monotonic() - started
    answered = completion.model or config.model
    return ModelConfigTestResult(
        success=True,
        message=truncate(scrub_secrets(f"model {answered!r} answered the test completion in {elapsed:.2f}s", secrets)),
        error_type=None,
    )
