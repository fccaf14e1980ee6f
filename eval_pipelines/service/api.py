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
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request, Security
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import APIKeyHeader
from starlette.exceptions import HTTPException as StarletteHTTPException

from eval_pipelines.lib.body_limit import BodyLimit
from eval_pipelines.scenarios.catalog import ScenarioCatalog, ScenarioError, ScenarioFiles
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.limits import MAX_SERVICE_REQUEST_BYTES
from eval_pipelines.schemas.model_config import API_KEY_PLACEHOLDER, ModelConfig, Provider
from eval_pipelines.schemas.runs import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    MIN_LIST_LIMIT,
    ArtifactsResponse,
    CancelRunResponse,
    DeleteRunResponse,
    Rollout,
    RolloutList,
    RolloutStatus,
    Run,
    RunLaunchRequest,
    RunLaunchResponse,
    RunList,
    RunSource,
)
from eval_pipelines.schemas.scenarios import Rubric, SeedDataFile, Template
from eval_pipelines.schemas.service_wire import (
    ErrorDetail,
    HealthResponse,
    PublicTask,
    ResumeRunResponse,
    ScenarioNpcs,
    ScenarioTasks,
    SeedDataList,
)
from eval_pipelines.schemas.sweep import SIMULATED_BASE_URL
from eval_pipelines.schemas.taskgen import JobStatus, ModelConfigTestResult, TaskGenJob, TaskGenRequest, TaskGenResults
from eval_pipelines.service.auth import API_KEY_HEADER, Permission
from eval_pipelines.service.executor import InvalidRequest, NotFound, RunExecutor
from eval_pipelines.service.layout import service_paths
from eval_pipelines.service.model_probe import probe_model
from eval_pipelines.service.runtime import shared_runtime
from eval_pipelines.service.scheduler import ConfigMismatch, Overloaded, RunScheduler
from eval_pipelines.service.settings import ServiceSettings
from eval_pipelines.service.store import DuplicateRunName, RunStore
from eval_pipelines.service.taskgen_jobs import TaskGenJobs
from eval_pipelines.verifiers.bundle import BundleError, build_bundle

logger = logging.getLogger(__name__)

API_VERSION = "0.1.0"
#: FastAPI's 400 detail for a body it cannot even decode.
BODY_PARSE_ERROR = "There was an error parsing the body"
#: The largest page of `GET /rollouts` (each rollout carries its status events).
MAX_ROLLOUT_PAGE = 1000
#: The largest `offset` accepted by list runs; beyond it SQLite integers would overflow.
MAX_LIST_OFFSET = 1_000_000_000


class EvaluationService:
    """Everything one app instance owns: store, catalog, executor, scheduler, task-generation jobs."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        store_path, artifacts_dir = service_paths(settings.data_dir)
        self.catalog = ScenarioCatalog(settings.scenarios_dir)
        self.store = RunStore(store_path)
        self.runtime = shared_runtime(self.catalog)
        self.executor = RunExecutor(
            self.store,
            self.catalog,
            self.runtime,
            artifacts_dir,
            max_rollouts_per_run=settings.max_rollouts_per_run,
        )
        self.scheduler = RunScheduler(
            self.executor,
            max_active_runs=settings.max_active_runs,
            rollout_timeout_seconds=settings.rollout_timeout_seconds,
        )
        self.jobs = TaskGenJobs(self.store, settings.task_generator, runner=self.executor.runner)

    def begin_drain(self) -> None:
        """Shutdown has begun: new work gets 503 from now on."""
        self.scheduler.draining = True

    @property
    def draining(self) -> bool:
        return self.scheduler.draining

    def recover(self) -> None:
        rollouts = self.store.fail_interrupted()
        jobs = self.store.fail_interrupted_jobs()
        if rollouts or jobs:
            logger.warning(
                "recovered after a restart: %d interrupted rollouts and %d task-generation jobs marked failed",
                rollouts,
                jobs,
            )

    async def aclose(self) -> None:
        self.begin_drain()
        await self.jobs.aclose()
        await self.scheduler.aclose(self.settings.drain_seconds)

    def scenario(self, scenario_id: str) -> ScenarioFiles:
        return self.executor.scenario(scenario_id)


# -- errors ------------------------------------------------------------------------------------------------
def _error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail}, headers=headers)


def _retry_after(service: EvaluationService) -> dict[str, str]:
    return {"Retry-After": str(service.settings.retry_after_seconds)}


def _error_doc(description: str, retry_after: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {"model": ErrorDetail, "description": description}
    if retry_after:
        doc["headers"] = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}
    return doc


Responses = dict[int | str, dict[str, Any]]
AUTH_ERRORS: Responses = {
    401: _error_doc("missing or invalid API key"),
    403: _error_doc("the API key lacks the permission (read-only key on POST/DELETE)"),
}
NOT_FOUND: Responses = {404: _error_doc("not found")}
BAD_REQUEST: Responses = {400: _error_doc("invalid request")}
UNAVAILABLE: Responses = {503: _error_doc("draining for shutdown, or too many active runs", retry_after=True)}
CONFLICT: Responses = {409: _error_doc("conflict")}


def _install_error_handlers(app: FastAPI, service: EvaluationService) -> None:
    async def not_found(_: Request, exc: Exception) -> JSONResponse:
        return _error(404, str(exc.args[0]) if exc.args else "not found")

    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        return _error(400, str(exc))

    async def duplicate(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, DuplicateRunName)
        return _error(
            409,
            f"run_name {exc.run_name!r} already exists as run {exc.run_id}; "
            f"resume it with POST /runs/{exc.run_id}/resume, or choose another run_name",
        )

    async def mismatch(_: Request, exc: Exception) -> JSONResponse:
        return _error(409, str(exc))

    async def overloaded(_: Request, exc: Exception) -> JSONResponse:
        return _error(503, str(exc), _retry_after(service))

    async def broken_scenario(_: Request, exc: Exception) -> JSONResponse:
        logger.error("scenario files are invalid: %s", exc)
        return _error(500, f"the service's scenario files are invalid: {exc}")

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
            return _error(405, "Method Not Allowed", {"Allow": ", ".join(allowed)})
        if exc.status_code == 400 and exc.detail == BODY_PARSE_ERROR:
            # A body that is not JSON at all is a validation failure like any other: 422, loc/msg/type.
            error = {"loc": ["body"], "msg": "the request body is not valid JSON (UTF-8)", "type": "json_invalid"}
            return JSONResponse(status_code=422, content={"detail": [error]})
        return await http_exception_handler(request, exc)

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        reference = uuid.uuid4().hex[:12]
        logger.error("unhandled error (reference %s): %s", reference, type(exc).__name__, exc_info=exc)
        return _error(500, f"internal error; see the service log (reference {reference})")

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
API_KEY_SCHEME = APIKeyHeader(
    name=API_KEY_HEADER,
    auto_error=False,
    description="The account's API key. `read` keys may GET; POST and DELETE need a `write` key.",
)
ScenarioId = Annotated[str, Path(description="template id, e.g. `email_ops:1.0.0`")]
SeedFilename = Annotated[str, Path(description="a relative path inside the seed data directory")]


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
def redact_tool_messages(artifacts: RunArtifacts) -> RunArtifacts:
    """Drop tool responses and the tool calls of assistant turns from `messages` (spec 000 artifacts)."""
    kept: list[dict[str, Any]] = []
    for message in artifacts.messages:
        if message.get("role") in ("tool", "function"):
            continue
        if message.get("tool_calls") or message.get("function_call"):
            message = {k: v for k, v in message.items() if k not in ("tool_calls", "function_call")}
            if not message.get("content"):
                continue  # an assistant turn that only called tools has nothing left to show
        kept.append(message)
    return artifacts.model_copy(update={"messages": kept})


def _expand_values(expand: list[str]) -> set[str]:
    # Accept both `expand=rollouts&expand=x` and `expand=rollouts,x`.
    return {part.strip() for value in expand for part in value.split(",") if part.strip()}


def create_app(settings: ServiceSettings) -> FastAPI:
    service = EvaluationService(settings)
    registry = settings.api_keys

    def authenticate(request: Request, api_key: Annotated[str | None, Security(API_KEY_SCHEME)]) -> Permission:
        permission = registry.permission(api_key)
        if permission is None:
            raise HTTPException(
                status_code=401,
                detail=f"missing or invalid API key (send it in the {API_KEY_HEADER} header)",
                headers={"WWW-Authenticate": API_KEY_HEADER},
            )
        if not permission.allows(request.method):
            raise HTTPException(
                status_code=403, detail=f"this API key is read-only; {request.method} needs a key with write permission"
            )
        return permission

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

    router = APIRouter(dependencies=[Depends(authenticate)], responses=AUTH_ERRORS)

    # -- runs ------------------------------------------------------------------------------------------
    @router.post(
        "/runs",
        response_model=RunLaunchResponse,
        tags=["runs"],
        responses={**BAD_REQUEST, **NOT_FOUND, **CONFLICT, **UNAVAILABLE},
        summary="Launch a run",
    )
    async def launch_run(body: RunLaunchRequest) -> RunLaunchResponse:
        return service.scheduler.launch(body)

    @router.get("/runs", response_model=RunList, tags=["runs"], summary="List runs")
    def list_runs(
        scenario_id: str | None = None,
        source: Annotated[RunSource, Query(description="`all` means no filter")] = RunSource.RL_GYM,
        limit: Annotated[int, Query(ge=MIN_LIST_LIMIT, le=MAX_LIST_LIMIT)] = DEFAULT_LIST_LIMIT,
        offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
        expand: Annotated[list[str] | None, Query(description="`rollouts` fills `rollout_ids`")] = None,
        run_name: Annotated[str | None, Query(description="local extension: only the run with this name")] = None,
    ) -> RunList:
        total, runs = service.store.list_runs(
            scenario_id=scenario_id,
            source=None if source == RunSource.ALL else source.value,
            limit=limit,
            offset=offset,
            expand_rollouts="rollouts" in _expand_values(expand or []),
            run_name=run_name,
        )
        return RunList(total=total, runs=runs)

    @router.get("/runs/{run_id}", response_model=Run, tags=["runs"], responses=NOT_FOUND, summary="Get a run")
    def get_run(run_id: str) -> Run:
        run = service.store.get_run(run_id)
        if run is None:
            raise NotFound(f"run {run_id!r} not found")
        return run

    @router.post(
        "/runs/{run_id}/cancel", response_model=CancelRunResponse, tags=["runs"], responses=NOT_FOUND, summary="Cancel"
    )
    async def cancel_run(run_id: str) -> CancelRunResponse:
        return CancelRunResponse(run_id=run_id, cancelled_rollouts=service.scheduler.cancel(run_id))

    @router.delete(
        "/runs/{run_id}", response_model=DeleteRunResponse, tags=["runs"], responses=NOT_FOUND, summary="Delete"
    )
    async def delete_run(run_id: str) -> DeleteRunResponse:
        return DeleteRunResponse(run_id=run_id, deleted_rollouts=await service.scheduler.delete(run_id))

    @router.post(
        "/runs/{run_id}/resume",
        response_model=ResumeRunResponse,
        tags=["runs"],
        responses={**BAD_REQUEST, **NOT_FOUND, **CONFLICT, **UNAVAILABLE},
        summary="Resume a run (local extension)",
    )
    async def resume_run(
        run_id: str,
        body: ModelConfig,
        retry_failed: Annotated[
            bool, Query(description="also re-run failed rollouts (rollouts interrupted by a restart always are)")
        ] = True,
    ) -> ResumeRunResponse:
        return service.scheduler.resume(run_id, body, retry_failed=retry_failed)

    # -- rollouts --------------------------------------------------------------------------------------
    @router.get("/rollouts", response_model=RolloutList, tags=["rollouts"], summary="List rollouts")
    def list_rollouts(
        scenario_id: str | None = None,
        task_id: str | None = None,
        run_id: str | None = None,
        status: RolloutStatus | None = None,
        limit: Annotated[int | None, Query(ge=MIN_LIST_LIMIT, le=MAX_ROLLOUT_PAGE)] = None,
        offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    ) -> RolloutList:
        """`limit`/`offset` page the listing (a local extension); `total` counts every match."""
        filters = {
            "scenario_id": scenario_id,
            "task_id": task_id,
            "run_id": run_id,
            "status": status.value if status else None,
        }
        found = service.store.list_rollouts(**filters, limit=limit, offset=offset)
        total = service.store.count_rollouts(**filters) if limit is not None or offset else len(found)
        return RolloutList(total=total, rollouts=found)

    @router.get(
        "/rollouts/{rollout_id}", response_model=Rollout, tags=["rollouts"], responses=NOT_FOUND, summary="Get one"
    )
    def get_rollout(rollout_id: str) -> Rollout:
        rollout = service.store.get_rollout(rollout_id)
        if rollout is None:
            raise NotFound(f"rollout {rollout_id!r} not found")
        return rollout

    @router.get(
        "/rollouts/{rollout_id}/artifacts",
        response_model=ArtifactsResponse,
        tags=["rollouts"],
        responses={404: _error_doc("rollout not found, or still in progress (no artifacts yet)")},
        summary="Artifacts of a finished rollout",
    )
    def get_artifacts(rollout_id: str, redact_tool_calls: bool = False) -> ArtifactsResponse:
        artifacts = service.executor.load_artifacts(rollout_id)
        if redact_tool_calls:
            artifacts = redact_tool_messages(artifacts)
        return ArtifactsResponse(rollout_id=rollout_id, artifacts=artifacts)

    # -- scenarios -------------------------------------------------------------------------------------
    @router.get("/scenarios", response_model=list[Template], tags=["scenarios"], summary="List templates")
    def list_scenarios() -> list[Template]:
        service.catalog.refresh()  # scenarios written since startup (generated ones) show up
        templates = []
        for scenario in service.catalog.all():
            try:
                templates.append(scenario.with_counts())
            except ScenarioError as exc:  # one broken scenario folder must not hide all the others
                logger.error("scenario %s is left out of the listing: %s", scenario.scenario_id, exc)
        return templates

    @router.get(
        "/scenarios/{scenario_id}/tasks",
        response_model=ScenarioTasks,
        tags=["scenarios"],
        responses=NOT_FOUND,
        summary="Tasks of a template",
    )
    def list_tasks(scenario_id: ScenarioId) -> ScenarioTasks:
        scenario = service.scenario(scenario_id)
        return ScenarioTasks(
            scenario_id=scenario.scenario_id, tasks=[PublicTask.of(t) for t in scenario.tasks().values()]
        )

    @router.get(
        "/scenarios/{scenario_id}/tasks/{task_id}/rubric",
        response_model=Rubric,
        tags=["scenarios"],
        responses=NOT_FOUND,
        summary="Rubric of a task",
    )
    def get_rubric(scenario_id: ScenarioId, task_id: str) -> Rubric:
        scenario = service.scenario(scenario_id)
        task = scenario.tasks().get(task_id)
        if task is None:
            raise NotFound(f"task {task_id!r} not found in scenario {scenario.scenario_id!r}")
        if task.rubric is None:
            raise NotFound(f"task {task_id!r} has no rubric")
        return task.rubric

    @router.get(
        "/scenarios/{scenario_id}/npcs",
        response_model=ScenarioNpcs,
        tags=["scenarios"],
        responses=NOT_FOUND,
        summary="NPC profiles of a template",
    )
    def list_npcs(scenario_id: ScenarioId) -> ScenarioNpcs:
        scenario = service.scenario(scenario_id)
        return ScenarioNpcs(scenario_id=scenario.scenario_id, npc_profiles=scenario.npcs)

    @router.get(
        "/scenarios/{scenario_id}/seed_data",
        response_model=SeedDataList,
        tags=["scenarios"],
        responses=NOT_FOUND,
        summary="Seed data files of a template",
    )
    def list_seed_data(scenario_id: ScenarioId) -> SeedDataList:
        scenario = service.scenario(scenario_id)
        return SeedDataList(scenario_id=scenario.scenario_id, files=scenario.seed_files())

    @router.get(
        "/scenarios/{scenario_id}/seed_data/{filename:path}",
        response_model=SeedDataFile,
        tags=["scenarios"],
        responses={
            400: _error_doc("path traversal, an absolute path or an encoded `..`; or not a text file"),
            **NOT_FOUND,
        },
        summary="One seed data file",
    )
    def get_seed_file(
        scenario_id: ScenarioId,
        filename: SeedFilename,
    ) -> SeedDataFile:
        scenario = service.scenario(scenario_id)
        try:
            return scenario.seed_file(filename)
        except ValueError as exc:  # UnicodeDecodeError included: seed data is served as text
            raise InvalidRequest(f"invalid seed data filename {filename[:200]!r}: {exc}") from None
        except FileNotFoundError:
            raise NotFound(
                f"seed data file {filename[:200]!r} not found in scenario {scenario.scenario_id!r}"
            ) from None
        except OSError as exc:  # a name the filesystem cannot take (too long, too deep) is the caller's mistake
            raise InvalidRequest(f"invalid seed data filename {filename[:200]!r}: {exc.strerror}") from None

    @router.get(
        "/scenarios/{scenario_id}/verifiers/bundle",
        tags=["scenarios"],
        response_class=Response,
        responses={
            200: {
                "description": "ZIP of an importable package tree `verifier_bundle/scenarios/<id>/verifiers/*.py`"
                " (the zip root is the import root)",
                "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
            },
            404: _error_doc("scenario not found, or it has no verifiers"),
            500: _error_doc("the scenario's verifier files cannot be bundled"),
        },
        summary="Verifier bundle (ZIP)",
    )
    def get_verifier_bundle(scenario_id: ScenarioId) -> Response:
        scenario = service.scenario(scenario_id)
        directory = scenario.verifiers_dir
        modules = [p for p in directory.glob("*.py") if p.name != "__init__.py"] if directory.is_dir() else []
        if not (directory / "__init__.py").is_file() or not modules:
            raise NotFound(f"scenario {scenario.scenario_id!r} has no verifiers")
        try:
            data = build_bundle(scenario.scenario_id, directory)
        except BundleError as exc:  # e.g. a symlink in the package: the server's files are at fault
            logger.error("verifier bundle of %s cannot be built: %s", scenario.scenario_id, exc)
            return _error(500, f"the verifier bundle of {scenario.scenario_id!r} cannot be built: {exc}")
        filename = f"{scenario.key}-verifiers.zip"
        return Response(
            content=data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    # -- model configuration test ------------------------------------------------------------------------
    @router.post(
        "/test-model-config",
        response_model=ModelConfigTestResult,
        tags=["models"],
        summary="Send a test completion",
    )
    async def test_model_config(body: ModelConfig) -> ModelConfigTestResult:
        return await probe_model(body, service.runtime, settings.model_test_timeout_seconds)

    # -- task generation -----------------------------------------------------------------------------------
    @router.post(
        "/task-gen", response_model=TaskGenJob, tags=["task-gen"], responses=UNAVAILABLE, summary="Submit a job"
    )
    async def submit_task_gen(body: TaskGenRequest) -> TaskGenJob:
        if service.draining:
            raise Overloaded("the service is shutting down; retry against the restarted service")
        return service.jobs.submit(body)

    @router.get(
        "/task-gen/{job_id}", response_model=TaskGenJob, tags=["task-gen"], responses=NOT_FOUND, summary="Job status"
    )
    def get_task_gen_job(job_id: str) -> TaskGenJob:
        job = service.store.get_job(job_id)
        if job is None:
            raise NotFound(f"task generation job {job_id!r} not found")
        return job

    @router.get(
        "/task-gen/{job_id}/results",
        response_model=TaskGenResults,
        tags=["task-gen"],
        responses={
            202: {"model": TaskGenJob, "description": "the job is still pending or running"},
            500: _error_doc("the job failed; `detail` is its error"),
            **NOT_FOUND,
        },
        summary="Job results",
    )
    def get_task_gen_results(job_id: str) -> Any:
        job = service.store.get_job(job_id)
        if job is None:
            raise NotFound(f"task generation job {job_id!r} not found")
        if job.status == JobStatus.FAILED:
            return _error(500, job.error or "task generation failed")
        if job.status != JobStatus.COMPLETED:
            return JSONResponse(status_code=202, content=job.model_dump(mode="json"))
        results = service.store.job_results(job_id)
        if results is None:
            return _error(500, "the job completed but its results are missing")
        return results

    @app.get("/health", response_model=HealthResponse, tags=["health"], summary="Liveness (no key needed)")
    def health() -> HealthResponse:
        return HealthResponse(
            status="draining" if service.draining else "healthy",
            draining=service.draining,
            active_runs=service.scheduler.active_runs,
        )

    app.include_router(router)
    app.include_router(router, prefix="/v1")

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


__all__ = ["EvaluationService", "create_app", "redact_tool_messages", "service_of"]
