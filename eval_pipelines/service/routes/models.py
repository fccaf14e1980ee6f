"""The model-configuration test: one completion against the configured endpoint."""

from __future__ import annotations

import logging

from fastapi import APIRouter

from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.taskgen import ModelConfigTestResult
from eval_pipelines.service.model_probe import probe_model
from eval_pipelines.service.state import ServiceDep

logger = logging.getLogger(__name__)

router = APIRouter()


# -- model configuration test ------------------------------------------------------------------------
@router.post(
    "/test-model-config",
    response_model=ModelConfigTestResult,
    tags=["models"],
    summary="Send a test completion",
)
async def test_model_config(service: ServiceDep, body: ModelConfig) -> ModelConfigTestResult:
    return await probe_model(body, service.runtime, service.settings.model_test_timeout_seconds)
