"""Client of the evaluation service (spec 000): the local service or the hosted one, same code.

`EvaluationClient` is async (httpx); `EvaluationClientSync` is a thin blocking facade over it. Every call has a
timeout; 429, 502-504 and connection errors are retried with exponential backoff and jitter, honouring
`Retry-After`; other 4xx never are. Errors are `clients.errors` exceptions carrying the status and `detail`.

Retried POSTs: a 503 or 429 means the request was not processed, so re-sending is safe. A connection that
broke mid-request may have launched the run: give launches a `run_name` and a repeat becomes a 409 naming the
run, never a duplicate.

Reading is liberal (the hosted product's variants): a template list wrapped in an object, rollouts carrying
`model_config_data`, and wrapped tool observations in artifacts are all accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, SecretStr, TypeAdapter, ValidationError

from eval_pipelines.clients.errors import (
    JobFailed,
    JobStillRunning,
    ServiceConnectionError,
    ServiceError,
    UnexpectedResponse,
    WaitTimeout,
    error_for_response,
)
from eval_pipelines.lib.redact import redact_url
from eval_pipelines.lib.retry import RetryPolicy, SleepFn, send_with_retries
from eval_pipelines.llm.errors import scrub_secrets, truncate
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import (
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
from eval_pipelines.schemas.service_wire import ResumeRunResponse, ScenarioNpcs, ScenarioTasks, SeedDataList
from eval_pipelines.schemas.taskgen import (
    JobStatus,
    ModelConfigTestResult,
    TaskGenJob,
    TaskGenRequest,
    TaskGenResults,
)

logger = logging.getLogger(__name__)

API_KEY_HEADER = "API-Key"
DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_POLL_INTERVAL = 2.0
#: The page size used when the client walks every run (the spec's maximum).
PAGE_SIZE = 200

ModelT = TypeVar("ModelT", bound=BaseModel)
T = TypeVar("T")
P = ParamSpec("P")
_TEMPLATES = TypeAdapter(list[Template])


def model_config_payload(config: ModelConfig) -> dict[str, Any]:
    """The ModelConfig as the wire needs it: the one place the key is revealed, for the outbound request."""
    data = config.model_dump(mode="json", exclude_none=True)
    data["api_key"] = config.reveal_api_key()
    return data


def launch_payload(request: RunLaunchRequest) -> dict[str, Any]:
    data = request.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["model_config"] = model_config_payload(request.model_config_)
    if request.user_model_config is not None:
        data["user_model_config"] = model_config_payload(request.user_model_config)
    if not request.task_overrides:
        data.pop("task_overrides", None)
    if request.source == RunSource.RL_GYM:
        data.pop("source", None)  # the spec's launch body has no `source`; the default needs no field
    return data


def _segment(value: str) -> str:
    """One path segment, percent-encoded (`:` kept: scenario ids look like `family:version`)."""
    if value in (".", ".."):
        return value.replace(".", "%2E")
    return quote(value, safe=":")


def _file_path(filename: str) -> str:
    # Dot segments are encoded so httpx does not normalise `a/../b` into another resource: the server decides.
    return "/".join(_segment(part) if part else "" for part in filename.split("/"))


class EvaluationClient:
    """`async with EvaluationClient(url, key) as client: run = await client.get_run(run_id)`."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
        sleep: SleepFn | None = None,
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        root = base_url.strip().rstrip("/")
        if not root.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {redact_url(root)!r}")
        # The service serves its paths bare and under /v1; task generation is always /v1/task-gen.
        self.base_url = root[: -len("/v1")] if root.endswith("/v1") else root
        self.timeout_seconds = timeout_seconds
        self.retry = retry or RetryPolicy()
        self._api_key = SecretStr(api_key)
        self._sleep: SleepFn = sleep or asyncio.sleep
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=httpx.Timeout(timeout_seconds))

    def __repr__(self) -> str:
        return f"EvaluationClient(base_url={redact_url(self.base_url)!r}, api_key='**********')"

    __str__ = __repr__

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> EvaluationClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- transport -----------------------------------------------------------------------------------------
    def _secrets(self) -> tuple[str, ...]:
        return (self._api_key.get_secret_value(),)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> httpx.Response:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = await send_with_retries(
                self._http,
                method,
                self.base_url + path,
                policy=self.retry,
                sleep=self._sleep,
                attempt_timeout=self.timeout_seconds,
                json=json,
                params=query,
                headers={API_KEY_HEADER: self._api_key.get_secret_value(), "Accept": "application/json"},
                timeout=self.timeout_seconds,
            )
        except httpx.TransportError as exc:
            reason = truncate(scrub_secrets(f"{type(exc).__name__}: {exc}", self._secrets()))
            raise ServiceConnectionError(
                f"could not reach {redact_url(self.base_url)} ({reason})", method=method, path=path
            ) from None
        if response.status_code in ok:
            return response
        raise error_for_response(response, method=method, path=path, secrets=self._secrets())

    def _parse(self, model: type[ModelT], response: httpx.Response, method: str, path: str) -> ModelT:
        with contextlib.suppress(ValueError):  # pydantic's ValidationError is one
            # From the bytes in one compiled pass (a listing of 500 rollouts was a Python dict tree first); an answer
            # that does not parse this way takes the path below, which also words what is wrong with it.
            return model.model_validate_json(response.content)
        try:
            return model.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            detail = f"the response is not a {model.__name__}: {truncate(str(exc), 300)}"
            raise UnexpectedResponse(response.status_code, detail, method=method, path=path) from None

    async def _get(self, model: type[ModelT], path: str, params: dict[str, Any] | None = None) -> ModelT:
        return self._parse(model, await self._send("GET", path, params=params), "GET", path)

    async def _post(self, model: type[ModelT], path: str, body: Any, params: dict[str, Any] | None = None) -> ModelT:
        return self._parse(model, await self._send("POST", path, json=body, params=params), "POST", path)

    # -- runs ----------------------------------------------------------------------------------------------
    async def launch_run(self, request: RunLaunchRequest) -> RunLaunchResponse:
        """POST /runs. A duplicate run_name raises Conflict (`existing_run_id` names the run)."""
        return await self._post(RunLaunchResponse, "/runs", launch_payload(request))

    async def list_runs(
        self,
        *,
        scenario_id: str | None = None,
        source: RunSource | str = RunSource.RL_GYM,
        limit: int = 50,
        offset: int = 0,
        expand_rollouts: bool = False,
        run_name: str | None = None,
    ) -> RunList:
        params = {
            "scenario_id": scenario_id,
            "source": getattr(source, "value", source),
            "limit": limit,
            "offset": offset,
            "expand": "rollouts" if expand_rollouts else None,
            "run_name": run_name,
        }
        return await self._get(RunList, "/runs", params)

    async def get_run(self, run_id: str) -> Run:
        return await self._get(Run, f"/runs/{_segment(run_id)}")

    async def cancel_run(self, run_id: str) -> CancelRunResponse:
        return await self._post(CancelRunResponse, f"/runs/{_segment(run_id)}/cancel", None)

    async def delete_run(self, run_id: str) -> DeleteRunResponse:
        path = f"/runs/{_segment(run_id)}"
        return self._parse(DeleteRunResponse, await self._send("DELETE", path), "DELETE", path)

    async def resume_run(
        self, run_id: str, model_config: ModelConfig, *, retry_failed: bool = True
    ) -> ResumeRunResponse:
        """POST /runs/{run_id}/resume (local-service extension): re-queue what did not complete and execute it."""
        return await self._post(
            ResumeRunResponse,
            f"/runs/{_segment(run_id)}/resume",
            model_config_payload(model_config),
            {"retry_failed": str(retry_failed).lower()},
        )

    async def find_run_by_name(self, run_name: str) -> Run | None:
        """The run with this name, any source. Uses the `run_name` filter and checks the name itself, so a
        server without that filter (it returns every run) still gives the right answer, page by page."""
        offset = 0
        while True:
            page = await self.list_runs(source=RunSource.ALL, run_name=run_name, limit=PAGE_SIZE, offset=offset)
            for run in page.runs:
                if run.run_name == run_name:
                    return run
            offset += len(page.runs)
            if not page.runs or offset >= page.total:
                return None

    async def wait_for_run(
        self,
        run_id: str,
        *,
        deadline_seconds: float,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        on_update: Callable[[Run], None] | None = None,
    ) -> Run:
        """Poll until no rollout is pending or running; WaitTimeout (with the last Run) after the deadline."""
        deadline = time.monotonic() + deadline_seconds
        while True:
            run = await self.get_run(run_id)
            if on_update is not None:
                on_update(run)
            if run.is_finished:
                return run
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(
                    f"run {run_id} did not finish within {deadline_seconds:g}s "
                    f"({run.pending} pending, {run.running} running)",
                    last=run,
                )
            await self._sleep(min(poll_interval, remaining))

    # -- rollouts ------------------------------------------------------------------------------------------
    async def list_rollouts(
        self,
        *,
        scenario_id: str | None = None,
        task_id: str | None = None,
        run_id: str | None = None,
        status: RolloutStatus | str | None = None,
        limit: int | None = None,
        offset: int = 0,
        completed_after: str | None = None,
        status_events: bool = True,
    ) -> RolloutList:
        """`limit`/`offset` page the listing, `completed_after` (ISO 8601 with offset) keeps the rollouts
        completed since then and `status_events=False` asks for the rollouts without their status history: local
        extensions, which a server without them ignores (it answers every rollout, with its history)."""
        params = {
            "scenario_id": scenario_id,
            "task_id": task_id,
            "run_id": run_id,
            "status": getattr(status, "value", status),
            "limit": limit,
            "offset": offset or None,
            "completed_after": completed_after,
            "status_events": None if status_events else "false",
        }
        return await self._get(RolloutList, "/rollouts", params)

    async def get_rollout(self, rollout_id: str) -> Rollout:
        return await self._get(Rollout, f"/rollouts/{_segment(rollout_id)}")

    async def get_artifacts(self, rollout_id: str, *, redact_tool_calls: bool = False) -> ArtifactsResponse:
        """NotFound while the rollout is still in progress."""
        params = {"redact_tool_calls": "true"} if redact_tool_calls else None
        return await self._get(ArtifactsResponse, f"/rollouts/{_segment(rollout_id)}/artifacts", params)

    # -- scenarios -----------------------------------------------------------------------------------------
    async def list_scenarios(self) -> list[Template]:
        path = "/scenarios"
        response = await self._send("GET", path)
        try:
            body = response.json()
            if isinstance(body, dict):  # a hosted variant wraps the bare array
                body = body.get("scenarios", body.get("templates", body.get("data")))
            return _TEMPLATES.validate_python(body)
        except (ValueError, ValidationError) as exc:
            detail = f"not a template list: {truncate(str(exc), 300)}"
            raise UnexpectedResponse(200, detail, method="GET", path=path) from None

    async def list_tasks(self, scenario_id: str) -> ScenarioTasks:
        return await self._get(ScenarioTasks, f"/scenarios/{_segment(scenario_id)}/tasks")

    async def get_rubric(self, scenario_id: str, task_id: str) -> Rubric:
        return await self._get(Rubric, f"/scenarios/{_segment(scenario_id)}/tasks/{_segment(task_id)}/rubric")

    async def list_npcs(self, scenario_id: str) -> ScenarioNpcs:
        return await self._get(ScenarioNpcs, f"/scenarios/{_segment(scenario_id)}/npcs")

    async def list_seed_data(self, scenario_id: str) -> SeedDataList:
        return await self._get(SeedDataList, f"/scenarios/{_segment(scenario_id)}/seed_data")

    async def get_seed_file(self, scenario_id: str, filename: str) -> SeedDataFile:
        """BadRequest for traversal or an absolute path, NotFound when the file does not exist."""
        return await self._get(SeedDataFile, f"/scenarios/{_segment(scenario_id)}/seed_data/{_file_path(filename)}")

    async def download_verifier_bundle(self, scenario_id: str) -> bytes:
        """The ZIP (an importable package tree); NotFound when the scenario has no verifiers."""
        path = f"/scenarios/{_segment(scenario_id)}/verifiers/bundle"
        response = await self._send("GET", path)
        if not response.content.startswith(b"PK"):
            raise UnexpectedResponse(response.status_code, "the verifier bundle is not a ZIP", method="GET", path=path)
        return response.content

    # -- model configuration test --------------------------------------------------------------------------
    async def test_model_config(self, config: ModelConfig) -> ModelConfigTestResult:
        """A failed test is a result (`success: false`, `error_type`), not an exception."""
        return await self._post(ModelConfigTestResult, "/test-model-config", model_config_payload(config))

    # -- task generation -----------------------------------------------------------------------------------
    async def submit_task_gen(self, request: TaskGenRequest) -> TaskGenJob:
        return await self._post(TaskGenJob, "/v1/task-gen", request.model_dump(mode="json", exclude_none=True))

    async def get_task_gen_job(self, job_id: str) -> TaskGenJob:
        return await self._get(TaskGenJob, f"/v1/task-gen/{_segment(job_id)}")

    async def get_task_gen_results(self, job_id: str) -> TaskGenResults:
        """Results of a completed job. JobStillRunning (202, with the job) while pending or running; JobFailed
        (500, `error`) when it failed; NotFound for an unknown job."""
        path = f"/v1/task-gen/{_segment(job_id)}/results"
        try:
            response = await self._send("GET", path, ok=(200, 202))
        except ServiceError as exc:
            if exc.status == 500:
                raise JobFailed(500, exc.detail, method="GET", path=path) from None
            raise
        if response.status_code == 202:
            raise JobStillRunning(self._parse(TaskGenJob, response, "GET", path), method="GET", path=path)
        return self._parse(TaskGenResults, response, "GET", path)

    async def wait_for_task_gen(
        self, job_id: str, *, deadline_seconds: float, poll_interval: float = DEFAULT_POLL_INTERVAL
    ) -> TaskGenResults:
        """Poll until the job completes (its results) or fails (JobFailed); WaitTimeout after the deadline."""
        deadline = time.monotonic() + deadline_seconds
        while True:
            job = await self.get_task_gen_job(job_id)
            if job.status in (JobStatus.COMPLETED, JobStatus.FAILED):
                return await self.get_task_gen_results(job_id)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(f"task generation job {job_id} is still {job.status.value}", last=job)
            await self._sleep(min(poll_interval, remaining))

    async def health(self) -> dict[str, Any]:
        response = await self._send("GET", "/health")
        body = response.json()
        return body if isinstance(body, dict) else {"status": body}


class _LoopThread:
    """An event loop on a daemon thread: the sync facade's calls run there, one client, one loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="evaluation-client", daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


def _shutdown(portal: _LoopThread, client: EvaluationClient) -> None:
    if portal.loop.is_closed():
        return
    try:
        asyncio.run_coroutine_threadsafe(client.aclose(), portal.loop).result(timeout=5.0)
    except Exception:  # closing is best effort: the loop may be gone at interpreter exit
        logger.debug("evaluation client did not close cleanly", exc_info=True)
    portal.loop.call_soon_threadsafe(portal.loop.stop)
    portal.thread.join(timeout=5.0)
    if not portal.thread.is_alive():
        portal.loop.close()


def _blocking(
    method: Callable[Concatenate[EvaluationClient, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[EvaluationClientSync, P], T]:
    """The blocking twin of an `EvaluationClient` method: the same parameters and answer, run on the facade's
    loop thread."""

    @functools.wraps(method)
    def call(self: EvaluationClientSync, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(method(self.client, *args, **kwargs))

    return call


class EvaluationClientSync:
    """Blocking facade over EvaluationClient, safe to call from several threads (and from code that runs
    inside another event loop). `close()` it, or use it as a context manager."""

    def __init__(self, client: EvaluationClient) -> None:
        self.client = client
        self._portal = _LoopThread()
        self._finalizer = weakref.finalize(self, _shutdown, self._portal, self.client)

    def __repr__(self) -> str:
        return f"EvaluationClientSync({self.client!r})"

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> EvaluationClientSync:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if not self._finalizer.alive:
            coroutine.close()
            raise RuntimeError("the client is closed")
        return self._portal.run(coroutine)

    launch_run = _blocking(EvaluationClient.launch_run)
    list_runs = _blocking(EvaluationClient.list_runs)
    get_run = _blocking(EvaluationClient.get_run)
    cancel_run = _blocking(EvaluationClient.cancel_run)
    delete_run = _blocking(EvaluationClient.delete_run)
    resume_run = _blocking(EvaluationClient.resume_run)
    find_run_by_name = _blocking(EvaluationClient.find_run_by_name)
    wait_for_run = _blocking(EvaluationClient.wait_for_run)
    list_rollouts = _blocking(EvaluationClient.list_rollouts)
    get_rollout = _blocking(EvaluationClient.get_rollout)
    get_artifacts = _blocking(EvaluationClient.get_artifacts)
    list_scenarios = _blocking(EvaluationClient.list_scenarios)
    list_tasks = _blocking(EvaluationClient.list_tasks)
    get_rubric = _blocking(EvaluationClient.get_rubric)
    list_npcs = _blocking(EvaluationClient.list_npcs)
    list_seed_data = _blocking(EvaluationClient.list_seed_data)
    get_seed_file = _blocking(EvaluationClient.get_seed_file)
    download_verifier_bundle = _blocking(EvaluationClient.download_verifier_bundle)
    test_model_config = _blocking(EvaluationClient.test_model_config)
    submit_task_gen = _blocking(EvaluationClient.submit_task_gen)
    get_task_gen_job = _blocking(EvaluationClient.get_task_gen_job)
    get_task_gen_results = _blocking(EvaluationClient.get_task_gen_results)
    wait_for_task_gen = _blocking(EvaluationClient.wait_for_task_gen)
    health = _blocking(EvaluationClient.health)
