"""Fixtures of the evaluation-service and client tests (imported by both folders' conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from eval_pipelines.clients.evaluation import EvaluationClient
from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.lib.serving import BackgroundServer
from tests.service.eval_service_support import WRITE_KEY, GatedGenerator, RunningService, running_service
from tests.support.scripted_llm import Script, create_scripted_app


@pytest.fixture(scope="module")
def generator() -> GatedGenerator:
    return GatedGenerator()


@pytest.fixture(scope="module")
def eval_service(tmp_path_factory: pytest.TempPathFactory, generator: GatedGenerator) -> Iterator[RunningService]:
    """The evaluation service over real HTTP, shared by a test module: real scenarios, simulated models."""
    with running_service(tmp_path_factory.mktemp("eval-service"), task_generator=generator) as running:
        yield running


@pytest.fixture
async def client(eval_service: RunningService) -> AsyncIterator[EvaluationClient]:
    # Few, short retries: a test that hits a 503 should fail fast, not wait out the default backoff.
    policy = RetryPolicy(max_attempts=2, base_delay=0.05, max_delay=0.5)
    async with EvaluationClient(eval_service.url, WRITE_KEY, timeout_seconds=30, retry=policy) as c:
        yield c


@pytest.fixture
def scripted() -> Iterator[tuple[Script, str]]:
    """A scriptable OpenAI-compatible endpoint (stand-in for a third-party model server)."""
    script = Script(replies=[{"role": "assistant", "content": "done"}])
    with BackgroundServer(create_scripted_app(script)) as server:
        yield script, server.url


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"
