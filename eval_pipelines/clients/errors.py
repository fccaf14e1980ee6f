"""Typed errors of the service clients: every failure carries the HTTP status and the server's `detail`.

Messages name the method and path (never the query string or headers) and are scrubbed of the caller's key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import httpx

from eval_pipelines.lib.retry import retry_after_seconds
from eval_pipelines.llm.errors import scrub_secrets, server_message, truncate
from eval_pipelines.schemas.taskgen import TaskGenJob

MAX_DETAIL_CHARS = 1000
_EXISTING_RUN = re.compile(r"\bas run (\S+?)[;,.]?(?:\s|$)")


class ServiceError(Exception):
    """The service answered with an error status (or, for subclasses without a status, not at all)."""

    def __init__(
        self,
        status: int | None,
        detail: Any,
        *,
        method: str = "",
        path: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.detail = detail
        self.method = method
        self.path = path
        self.retry_after = retry_after
        super().__init__(self.message)

    @property
    def message(self) -> str:
        where = f"{self.method} {self.path}".strip()
        status = f"HTTP {self.status}" if self.status is not None else "no response"
        text = self.detail if isinstance(self.detail, str) else json.dumps(self.detail, default=str)
        return f"{where}: {status}: {text}" if where else f"{status}: {text}"

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, detail={self.detail!r})"


class BadRequest(ServiceError):
    """400: the request is invalid (unknown task ids, path traversal, ...)."""


class Unauthorized(ServiceError):
    """401: the API key is missing or unknown."""


class Forbidden(ServiceError):
    """403: the key is valid but lacks the permission (e.g. a read-only key on POST/DELETE)."""


class NotFound(ServiceError):
    """404: no such run, rollout, scenario, task, file or job; or artifacts not available yet."""


class MethodNotAllowed(ServiceError):
    """405: the server does not offer this operation (e.g. a hosted service without a local extension)."""


class Conflict(ServiceError):
    """409: e.g. a duplicate `run_name`; `existing_run_id` names the run when the detail does."""

    @property
    def existing_run_id(self) -> str | None:
        if not isinstance(self.detail, str):
            return None
        match = _EXISTING_RUN.search(self.detail)
        return match.group(1) if match else None


class ValidationFailed(ServiceError):
    """422: the body or a parameter failed validation; `detail` is the list of `{loc, msg, type}`."""


class RateLimited(ServiceError):
    """429, after the retries ran out."""


class ServiceUnavailable(ServiceError):
    """503 (draining or overloaded), after the retries ran out."""


class ServerError(ServiceError):
    """Any other 5xx."""


class UnexpectedResponse(ServiceError):
    """A 2xx whose body is not what the endpoint returns (wrong service at that URL, or a broken proxy)."""


class ServiceConnectionError(ServiceError):
    """The service could not be reached (connection refused, DNS, timeouts), after the retries ran out."""

    def __init__(self, detail: str, *, method: str = "", path: str = "") -> None:
        super().__init__(None, detail, method=method, path=path)


class JobStillRunning(ServiceError):
    """202 from task-generation results: the job is pending or running; `job` is its current state."""

    def __init__(self, job: TaskGenJob, *, method: str = "", path: str = "") -> None:
        self.job = job
        super().__init__(202, f"task generation job {job.job_id} is {job.status.value}", method=method, path=path)


class JobFailed(ServiceError):
    """500 from task-generation results: the job failed; `error` is its error."""

    @property
    def error(self) -> str:
        return self.detail if isinstance(self.detail, str) else json.dumps(self.detail, default=str)


class WaitTimeout(ServiceError, TimeoutError):
    """A polling helper's overall deadline passed; `last` is the last state seen."""

    def __init__(self, detail: str, last: Any = None) -> None:
        self.last = last
        super().__init__(None, detail)


_BY_STATUS: dict[int, type[ServiceError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    422: ValidationFailed,
    429: RateLimited,
    503: ServiceUnavailable,
}


def response_detail(response: httpx.Response, secrets: Iterable[str | None] = ()) -> Any:
    """The FastAPI `detail` (a string, or the validation error list), else the server's message."""
    secrets = tuple(secrets)
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        if isinstance(detail, str):
            return truncate(scrub_secrets(detail, secrets), MAX_DETAIL_CHARS)
        return json.loads(scrub_secrets(json.dumps(detail, default=str), secrets))
    text = server_message(response.content) or response.reason_phrase or "<empty body>"
    return truncate(scrub_secrets(text, secrets), MAX_DETAIL_CHARS)


def error_for_response(
    response: httpx.Response, *, method: str, path: str, secrets: Iterable[str | None] = ()
) -> ServiceError:
    status = response.status_code
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ServiceError)
    return cls(
        status,
        response_detail(response, secrets),
        method=method,
        path=path,
        retry_after=retry_after_seconds(response),
    )
