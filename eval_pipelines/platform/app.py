"""The local assessment platform (spec 002) as a FastAPI app: datasets, judges, assessment runs, conversation
judging and synthetic data, with a durable store and Bearer-token auth on every endpoint.

Status codes where the spec is silent: 401 missing/invalid token, 403 token not granted the space, 404 dataset
or judge not in the space, 409 duplicate judge name, 413 file too large, 422 validation (detail: a list of
{loc, msg, type}, loc as strings), 502 the judge/generator model failed, 503 a model is not usable (e.g. its key
variable is unset). Request validation errors never echo the input, so a secret sent in a bad body stays out
of the response.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from eval_pipelines.lib.body_limit import BodyLimit
from eval_pipelines.platform.auth import authenticator
from eval_pipelines.platform.config import PlatformSettings
from eval_pipelines.platform.models import ModelRouter
from eval_pipelines.platform.responses import issue
from eval_pipelines.platform.routes import ROUTERS
from eval_pipelines.platform.state import API, PlatformState
from eval_pipelines.platform.store import PlatformStore
from eval_pipelines.schemas.limits import MAX_PLATFORM_REQUEST_BYTES

logger = logging.getLogger(__name__)


def create_platform_app(settings: PlatformSettings) -> FastAPI:
    platform = PlatformState(
        settings=settings,
        store=PlatformStore(settings.store_path),
        models=ModelRouter(
            settings.models,
            timeout_seconds=settings.model_timeout_seconds,
            retry=settings.model_retry,
            max_concurrency=settings.judge_concurrency,
        ),
        authenticate=authenticator(settings.tokens),
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await platform.models.aclose()
        platform.store.close()

    app = FastAPI(title="eval_pipelines assessment platform (local)", lifespan=lifespan)
    app.state.platform = platform
    # Form fields and multipart framing ride with an upload's file: give them a margin over the file's limit.
    upload_limit = max(settings.max_upload_bytes, MAX_PLATFORM_REQUEST_BYTES) + (1 << 20)
    app.add_middleware(
        BodyLimit, max_bytes=MAX_PLATFORM_REQUEST_BYTES, larger=[(f"{API}/dataset/upload", upload_limit)]
    )

    @app.exception_handler(RequestValidationError)
    async def validation_failed(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Only loc/msg/type: FastAPI's default also echoes `input`, which could be a secret (rag_api_key).
        detail = [issue(e.get("loc", ()), str(e.get("msg", "")), str(e.get("type", ""))) for e in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": detail})

    @app.get("/health", include_in_schema=False)
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    for router in ROUTERS:
        app.include_router(router)
    return app
