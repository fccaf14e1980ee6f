"""The local evaluation service (spec 000) as a FastAPI app.

Every endpoint is served at its bare path and under `/v1` (the hosted clients use both); task generation
is `/v1/task-gen` as the spec has it, and also bare `/task-gen`. Every request needs the `API-Key` header
(except `/health` and the OpenAPI document); POST and DELETE need a key with `write` permission.

Local extensions, beyond spec 000:
- `POST /runs/{run_id}/resume` (body: ModelConfig): re-queue unfinished rollouts and execute them again;
  needed after a restart because keys live only in memory. A duplicate `run_name` on `POST /runs` is a 409
  whose detail names the existing run; resume that run instead.
- `GET /runs?run_name=...` filters by run name.
- `GET /health`.
- `/ws/<token>/<task_id>/<server>/tools` and `/step`: the `tool_server_url`s of a task listing, each a seeded
  workspace of its caller's own; no key (the token is the credential), and outside this document.
- `POST /telemetry/cli-events` (no `/v1`, any known key): SimLab's CLI telemetry; `simlab feedback` is kept in
  the data directory's `service/feedback.jsonl`, every other event is accepted and dropped.
- A family id (`email_ops`) names the newest version of a scenario wherever a scenario id is taken, and
  `GET /auth/verify` answers 200 for a known key and 401 otherwise: both as the hosted product does (its
  SimLab CLI relies on them).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError
from eval_pipelines.lib.body_limit import BodyLimit
from eval_pipelines.schemas.limits import MAX_SERVICE_REQUEST_BYTES
from eval_pipelines.schemas.model_config import API_KEY_PLACEHOLDER, Provider
from eval_pipelines.schemas.runs import (
    RunSource,
)
from eval_pipelines.schemas.service_wire import (
    HealthResponse,
)
from eval_pipelines.schemas.sweep import SIMULATED_BASE_URL
from eval_pipelines.service.executor import InvalidRequest, NotFound
from eval_pipelines.service.responses import AUTH_ERRORS, error_response, retry_after
from eval_pipelines.service.routes import ROUTERS, telemetry, workspaces
from eval_pipelines.service.scheduler import ConfigMismatch, Overloaded
from eval_pipelines.service.settings import ServiceSettings
from eval_pipelines.service.state import EvaluationService, authenticate
from eval_pipelines.service.store import DuplicateRunName

logger = logging.getLogger(__name__)

API_VERSION = "0.1.0"
#: FastAPI's 400 detail for a body it cannot even decode.
BODY_PARSE_ERROR = "There was an error parsing the body"


def _install_error_handlers(app: FastAPI, service: EvaluationService) -> None:
    async def not_found(_: Request, exc: Exception) -> JSONResponse:
        return error_response(404, str(exc.args[0]) if exc.args else "not found")

    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        return error_response(400, str(exc))

    async def duplicate(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, DuplicateRunName)
        return error_response(
            409,
            f"run_name {exc.run_name!r} already exists as run {exc.run_id}; "
            f"resume it with POST /runs/{exc.run_id}/resume, or choose another run_name",
        )

    async def mismatch(_: Request, exc: Exception) -> JSONResponse:
        return error_response(409, str(exc))

    async def overloaded(_: Request, exc: Exception) -> JSONResponse:
        return error_response(503, str(exc), retry_after(service))

    async def broken_scenario(_: Request, exc: Exception) -> JSONResponse:
        logger.error("scenario files are invalid: %s", exc)
        return error_response(500, f"the service's scenario files are invalid: {exc}")

    async def validation(_: Request, exc: Exception) -> JSONResponse:
        # FastAPI's default echoes each failing `input`; for a ModelConfig that can be the whole object with
        # its api_key. loc/msg/type say everything the caller needs.
        assert isinstance(exc, RequestValidationError)
        errors = [
            {"loc": list(error.get("loc", ())), "msg": str(error.get("msg", "")), "type": str(error.get("type", ""))}
            for error in exc.errors()
        ]
        return JSONResponse(status_code=422, content={"detail": errors})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 405:
            # Starlette names only the matched route's method; the resource answers to every route's.
            allowed = _allowed_methods(app, request.url.path)
            return error_response(405, "Method Not Allowed", {"Allow": ", ".join(allowed)})
        if exc.status_code == 400 and exc.detail == BODY_PARSE_ERROR:
            # A body that is not JSON at all is a validation failure like any other: 422, loc/msg/type.
            error = {"loc": ["body"], "msg": "the request body is not valid JSON (UTF-8)", "type": "json_invalid"}
            return JSONResponse(status_code=422, content={"detail": [error]})
        return await http_exception_handler(request, exc)

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        reference = uuid.uuid4().hex[:12]
        logger.error("unhandled error (reference %s): %s", reference, type(exc).__name__, exc_info=exc)
        return error_response(500, f"internal error; see the service log (reference {reference})")

    app.add_exception_handler(NotFound, not_found)
    app.add_exception_handler(InvalidRequest, invalid)
    app.add_exception_handler(DuplicateRunName, duplicate)
    app.add_exception_handler(ConfigMismatch, mismatch)
    app.add_exception_handler(Overloaded, overloaded)
    app.add_exception_handler(ScenarioError, broken_scenario)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)


# Module level: with postponed annotations, FastAPI resolves parameter annotations in the module's globals.


def _document_cross_field_rules(
    document: dict[str, Any], launch_example: dict[str, Any] | None, max_rollouts: int
) -> dict[str, Any]:
    """Spell out in the OpenAPI document the rules the request models check in code, so a generated client
    or a fuzzer (schemathesis) knows them: a `custom` provider needs a base_url, tool definitions need a
    name, task ids are unique, `all` is a list filter and not a run source."""
    schemas = document.get("components", {}).get("schemas", {})
    model_config = schemas.get("ModelConfig")
    if model_config is not None:
        hosted = [p.value for p in Provider if p != Provider.CUSTOM]
        model_config["anyOf"] = [
            {"required": ["provider"], "properties": {"provider": {"enum": hosted}}},
            {"required": ["base_url"], "properties": {"base_url": {"type": "string", "minLength": 1}}},
        ]
    taskgen = schemas.get("TaskGenRequest", {}).get("properties", {}).get("toolset")
    if taskgen is not None:
        taskgen["items"] = {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 1}},
            "additionalProperties": True,
        }
    launch = schemas.get("RunLaunchRequest")
    if launch is not None:
        properties = launch.get("properties", {})
        if "task_ids" in properties:
            properties["task_ids"]["uniqueItems"] = True
            properties["task_ids"]["maxItems"] = max_rollouts
        if "rollout_count" in properties:
            properties["rollout_count"]["maximum"] = max_rollouts
            properties["rollout_count"]["description"] = f"len(task_ids) x rollout_count is at most {max_rollouts}"
        if "source" in properties:
            properties["source"] = {
                "allOf": [{"$ref": "#/components/schemas/RunSource"}, {"not": {"const": RunSource.ALL.value}}],
                "default": RunSource.RL_GYM.value,
            }
        if "task_overrides" in properties:
            properties["task_overrides"]["description"] = "keys must be among task_ids"
        if launch_example is not None:
            launch["examples"] = [launch_example]
    return document


def _launch_example(catalog: ScenarioCatalog) -> dict[str, Any] | None:
    """A launch that works on this service: its first scenario's first task, on a simulated model."""
    for scenario in catalog.all():
        try:
            task_id = next(iter(scenario.tasks()))
        except (ScenarioError, StopIteration):
            continue
        return {
            "scenario_id": scenario.scenario_id,
            "task_ids": [task_id],
            "rollout_count": 1,
            "model_config": {"model": "sim-oracle", "base_url": SIMULATED_BASE_URL, "api_key": API_KEY_PLACEHOLDER},
        }
    return None


def _allowed_methods(app: FastAPI, path: str) -> list[str]:
    methods: set[str] = set()
    for route in app.routes:
        if isinstance(route, APIRoute) and route.path_regex.match(path):
            methods |= route.methods or set()
    return sorted(methods)


# -- helpers -----------------------------------------------------------------------------------------------
def create_app(settings: ServiceSettings) -> FastAPI:
    service = EvaluationService(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        service.recover()
        yield
        await service.aclose()

    app = FastAPI(
        title="eval_pipelines evaluation service",
        version=API_VERSION,
        description=__doc__,
        lifespan=lifespan,
        # `/seed_data/` must reach the file route (and get 400), not be redirected.
        redirect_slashes=False,
    )
    app.state.service = service
    app.add_middleware(BodyLimit, max_bytes=MAX_SERVICE_REQUEST_BYTES)
    _install_error_handlers(app, service)

    @app.get("/health", response_model=HealthResponse, tags=["health"], summary="Liveness (no key needed)")
    def health() -> HealthResponse:
        return HealthResponse(
            status="draining" if service.draining else "healthy",
            draining=service.draining,
            active_runs=service.scheduler.active_runs,
        )

    for router in ROUTERS:
        for prefix in ("", "/v1"):
            app.include_router(router, prefix=prefix, dependencies=[Depends(authenticate)], responses=AUTH_ERRORS)
    # Tool servers, not spec-000 resources: the URL's token is the credential (SimLab sends them no key).
    app.include_router(workspaces.router)
    # SimLab's telemetry, at the hosted path only; any known key (the route checks it).
    app.include_router(telemetry.router)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            app.openapi_schema = _document_cross_field_rules(
                document, _launch_example(service.catalog), settings.max_rollouts_per_run
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def service_of(app: FastAPI) -> EvaluationService:
    """The app's service object (for the server runner and tests that drain it)."""
    service = app.state.service
    assert isinstance(service, EvaluationService)
    return service


__all__ = ["EvaluationService", "create_app", "service_of"]
