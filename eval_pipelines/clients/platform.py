"""Async client of the assessment platform (spec 002): the local one (`eval-pipelines serve platform`) and the
hosted one speak the same wire, so the same calls work against both.

    async with PlatformClient(url, token) as platform:
        upload = await platform.upload_platform(rows, dataset_name="nightly", space_id=space)

Every call sends `Authorization: Bearer <token>`, retries 429/502/503/504 and transport errors (honouring
Retry-After), bounds each attempt by `timeout`, and maps failures to `PlatformError` subclasses carrying the
status and the server's `detail`. The token (and a judge's RAG key) never appear in repr, errors or logs.
Reading is liberal: the documented and the deployed variants of a response are both accepted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar
from uuid import UUID

import httpx
from pydantic import BaseModel, ValidationError

from eval_pipelines.lib.redact import redact_url
from eval_pipelines.lib.retry import RetryPolicy, send_with_retries
from eval_pipelines.llm.errors import scrub_secrets, truncate
from eval_pipelines.schemas.platform import (
    AssessRunRequest,
    AssessRunResponse,
    ConversationJudgement,
    ConversationJudgeRequest,
    DatasetRow,
    DatasetUploadResult,
    JudgeCreateRequest,
    JudgeCreateResponse,
    PlatformUploadResponse,
    SynthDataRequest,
    SyntheticRow,
)

PLATFORM_URL_ENV = "PLATFORM_URL"
PLATFORM_TOKEN_ENV = "PLATFORM_TOKEN"
PLATFORM_SPACE_ENV = "PLATFORM_SPACE_ID"
DEFAULT_TIMEOUT_SECONDS = 120.0
API = "/api/v1"

M = TypeVar("M", bound=BaseModel)


class ParsedSyntheticRow(SyntheticRow):
    """A synthetic row with `generated` (JSON text on the wire) parsed."""

    data: dict[str, Any]


# --- errors -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValidationIssue:
    loc: tuple[str, ...]
    msg: str
    type: str


class PlatformError(Exception):
    """A platform call failed. `status` is the HTTP status when there was one; `detail` the server's detail."""

    def __init__(self, message: str, *, status: int | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.detail = detail

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, message={self.message!r})"


class PlatformBadRequestError(PlatformError):
    """400 (e.g. `invalid input for query argument`, a malformed CSV) and other unclassified 4xx."""


class PlatformAuthError(PlatformError):
    """401: the token is missing or invalid."""


class PlatformForbiddenError(PlatformError):
    """403: the token is valid but not for this space."""


class PlatformNotFoundError(PlatformError):
    pass


class PlatformConflictError(PlatformError):
    """409: e.g. a judge with this name exists in the space."""


class PlatformValidationError(PlatformError):
    """422: `issues` lists each {loc, msg, type} of the server's detail."""

    def __init__(
        self, message: str, *, status: int | None = None, detail: Any = None, issues: Sequence[ValidationIssue] = ()
    ) -> None:
        super().__init__(message, status=status, detail=detail)
        self.issues = list(issues)


class PlatformServerError(PlatformError):
    """5xx after the retries (502: the platform's judge or generator model failed)."""


class PlatformResponseError(PlatformError):
    """The server answered 2xx with a body that is not the expected resource (garbage or truncated)."""


class PlatformConnectionError(PlatformError):
    pass


class PlatformTimeoutError(PlatformError):
    pass


_ERRORS_BY_STATUS: dict[int, type[PlatformError]] = {
    401: PlatformAuthError,
    403: PlatformForbiddenError,
    404: PlatformNotFoundError,
    409: PlatformConflictError,
}


def _issues(detail: Any) -> list[ValidationIssue]:
    if not isinstance(detail, list):
        return []
    issues = []
    for item in detail:
        if isinstance(item, Mapping):
            loc = item.get("loc") or ()
            issues.append(
                ValidationIssue(
                    loc=tuple(str(p) for p in (loc if isinstance(loc, list | tuple) else [loc])),
                    msg=str(item.get("msg", "")),
                    type=str(item.get("type", "")),
                )
            )
    return issues


def _detail_text(detail: Any) -> str:
    issues = _issues(detail)
    if issues:
        return "; ".join(f"{'.'.join(i.loc) or '<body>'}: {i.msg}" for i in issues)
    if isinstance(detail, str):
        return detail
    return json.dumps(detail) if detail is not None else ""


@dataclass
class _FilePart:
    content: bytes
    filename: str
    content_type: str


@dataclass
class _Call:
    method: str
    path: str
    json_body: Any = None
    form: dict[str, str] = field(default_factory=dict)
    file: _FilePart | None = None


def _rows_payload(rows: Sequence[DatasetRow | Mapping[str, Any]]) -> bytes:
    items = [r.model_dump(mode="json", exclude_none=True) if isinstance(r, DatasetRow) else dict(r) for r in rows]
    return json.dumps(items, ensure_ascii=False).encode("utf-8")


def _file_part(
    data: Sequence[DatasetRow | Mapping[str, Any]] | bytes | Path, filename: str | None, content_type: str | None
) -> _FilePart:
    if isinstance(data, Path):
        guessed = "text/csv" if data.suffix.lower() == ".csv" else "application/json"
        return _FilePart(data.read_bytes(), filename or data.name, content_type or guessed)
    if isinstance(data, bytes | bytearray):
        name = filename or "dataset.json"
        guessed = "text/csv" if name.lower().endswith(".csv") else "application/json"
        return _FilePart(bytes(data), name, content_type or guessed)
    return _FilePart(_rows_payload(data), filename or "dataset.json", content_type or "application/json")


#: Calls of the pipeline's assessment steps: a judging run over a large dataset answers slowly.
DEFAULT_PIPELINE_TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class PlatformTarget:
    """Where the assessment steps send their calls: a hosted platform or the embedded one. The token is masked in
    repr."""

    url: str
    token: str = field(repr=False)
    space_id: str
    embedded: bool

    def client(self, timeout: float = DEFAULT_PIPELINE_TIMEOUT_SECONDS) -> PlatformClient:
        return PlatformClient(self.url, self.token, timeout=timeout)


class PlatformClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not token:
            raise ValueError("a platform token is required")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        url = base_url.strip().rstrip("/")
        if url.endswith(API):
            url = url[: -len(API)]
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {redact_url(url)!r}")
        self.base_url = url
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._token = token
        self._extra_secrets: set[str] = set()
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=httpx.Timeout(timeout))

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, timeout: float = DEFAULT_TIMEOUT_SECONDS
    ) -> PlatformClient:
        """A client for `PLATFORM_URL` with the token in `PLATFORM_TOKEN`."""
        env = os.environ if environ is None else environ
        url, token = env.get(PLATFORM_URL_ENV), env.get(PLATFORM_TOKEN_ENV)
        if not url or not token:
            missing = [n for n, v in ((PLATFORM_URL_ENV, url), (PLATFORM_TOKEN_ENV, token)) if not v]
            raise ValueError(f"set {' and '.join(missing)} to reach the assessment platform")
        return cls(url, token, timeout=timeout)

    def __repr__(self) -> str:
        return f"PlatformClient(base_url={redact_url(self.base_url)!r}, token='**********', timeout={self.timeout})"

    __str__ = __repr__

    def _secrets(self) -> tuple[str, ...]:
        return (self._token, *self._extra_secrets)

    def _clean(self, text: str) -> str:
        return scrub_secrets(text, self._secrets())

    # -- transport --------------------------------------------------------------------------------------
    async def _send(self, call: _Call) -> httpx.Response:
        url = self.base_url + call.path
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        kwargs: dict[str, Any] = {"headers": headers, "timeout": self.timeout}
        if call.file is not None:
            kwargs["data"] = call.form
            kwargs["files"] = {"file": (call.file.filename, call.file.content, call.file.content_type)}
        elif call.json_body is not None:
            kwargs["json"] = call.json_body
        try:
            response = await send_with_retries(
                self._http, call.method, url, policy=self.retry, attempt_timeout=self.timeout, **kwargs
            )
        except httpx.TimeoutException as exc:
            # `from None`: the httpx exception holds the request, and with it the Authorization header.
            raise PlatformTimeoutError(
                self._clean(
                    f"{call.method} {call.path} got no response within {self.timeout:g}s ({type(exc).__name__})"
                )
            ) from None
        except httpx.TransportError as exc:
            raise PlatformConnectionError(
                self._clean(
                    f"{call.method} {call.path} could not reach {redact_url(url)} ({type(exc).__name__}: {exc})"
                )
            ) from None
        if response.status_code >= 400:
            raise self._error(call, response)
        return response

    def _error(self, call: _Call, response: httpx.Response) -> PlatformError:
        status = response.status_code
        try:
            body: Any = response.json()
        except ValueError:
            body = None
        detail = body.get("detail", body) if isinstance(body, Mapping) else body
        if detail is None:
            detail = truncate(self._clean(response.text)) or None
        text = truncate(self._clean(_detail_text(detail))) or "<empty body>"
        message = f"{call.method} {call.path} failed with HTTP {status}: {text}"
        if status == 422:
            return PlatformValidationError(message, status=status, detail=detail, issues=_issues(detail))
        if status >= 500:
            return PlatformServerError(message, status=status, detail=detail)
        return _ERRORS_BY_STATUS.get(status, PlatformBadRequestError)(message, status=status, detail=detail)

    def _json(self, call: _Call, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            excerpt = truncate(self._clean(response.text)) or "<empty body>"
            raise PlatformResponseError(
                f"{call.method} {call.path} returned a body that is not JSON (truncated or garbage): {excerpt}",
                status=response.status_code,
            ) from None

    def _model(self, call: _Call, response: httpx.Response, model: type[M], data: Any = None) -> M:
        payload = self._json(call, response) if data is None else data
        try:
            return model.model_validate(payload)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "<root>"
            raise PlatformResponseError(
                f"{call.method} {call.path} returned an unexpected body ({loc}: {first['msg']})",
                status=response.status_code,
            ) from None

    # -- endpoints --------------------------------------------------------------------------------------
    async def upload_dataset(
        self,
        data: Sequence[DatasetRow | Mapping[str, Any]] | bytes | Path,
        *,
        dataset_name: str,
        space_id: UUID | str,
        filename: str | None = None,
        content_type: str | None = None,
    ) -> DatasetUploadResult:
        """POST /dataset/upload: rows, raw bytes (JSON array or CSV) or a file path."""
        call = _Call(
            "POST",
            f"{API}/dataset/upload",
            form={"dataset_name": dataset_name, "space_id": str(space_id)},
            file=_file_part(data, filename, content_type),
        )
        response = await self._send(call)
        body = self._json(call, response)
        if isinstance(body, list):
            return self._model(call, response, DatasetUploadResult, {"rows": body})
        return self._model(call, response, DatasetUploadResult, body)

    async def upload_platform(
        self,
        data: Sequence[DatasetRow | Mapping[str, Any]] | bytes | Path,
        *,
        dataset_name: str,
        space_id: UUID | str,
        evaluation_type: str | None = "safety",
        skip_context_check: bool = False,
        filename: str | None = None,
    ) -> PlatformUploadResponse:
        """POST /dataset/upload/platform: a JSON array of rows; returns the new `dataset_id`."""
        form = {
            "dataset_name": dataset_name,
            "space_id": str(space_id),
            "skip_context_check": "true" if skip_context_check else "false",
        }
        if evaluation_type is not None:
            form["evaluation_type"] = evaluation_type
        call = _Call(
            "POST",
            f"{API}/dataset/upload/platform",
            form=form,
            file=_file_part(data, filename, "application/json"),
        )
        return self._model(call, await self._send(call), PlatformUploadResponse)

    async def create_judge(self, request: JudgeCreateRequest) -> JudgeCreateResponse:
        body = request.model_dump(mode="json", exclude_none=True)
        if request.rag_api_key is not None:
            # The schema masks the key on every dump; it is revealed only into this one request body.
            secret = request.rag_api_key.get_secret_value()
            self._extra_secrets.add(secret)
            body["rag_api_key"] = secret
        call = _Call("POST", f"{API}/judge/create/sdk", json_body=body)
        return self._model(call, await self._send(call), JudgeCreateResponse)

    async def judge_conversation(self, request: ConversationJudgeRequest) -> ConversationJudgement:
        call = _Call("POST", f"{API}/judge/conversation", json_body=request.model_dump(mode="json"))
        return self._model(call, await self._send(call), ConversationJudgement)

    async def assess_run(self, request: AssessRunRequest) -> AssessRunResponse:
        call = _Call("POST", f"{API}/dataset/assess/run", json_body=request.model_dump(mode="json"))
        return self._model(call, await self._send(call), AssessRunResponse)

    async def generate_synthetic(self, request: SynthDataRequest) -> list[ParsedSyntheticRow]:
        """POST /synth_data/generate. The body may arrive in chunks; it is buffered, then each `generated` parsed."""
        call = _Call("POST", f"{API}/synth_data/generate", json_body=request.model_dump(mode="json"))
        response = await self._send(call)
        body = self._json(call, response)
        if isinstance(body, Mapping):
            body = body.get("data", body.get("rows"))
        if not isinstance(body, list):
            raise PlatformResponseError(f"{call.method} {call.path} did not return an array of rows", status=200)
        rows: list[ParsedSyntheticRow] = []
        for index, item in enumerate(body):
            if isinstance(item, Mapping) and isinstance(item.get("generated"), dict | list):
                item = {**item, "generated": json.dumps(item["generated"])}  # a variant sends the object itself
            row = self._model(call, response, SyntheticRow, item)
            try:
                parsed = json.loads(row.generated)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                raise PlatformResponseError(
                    f"{call.method} {call.path}: row {index} `generated` is not JSON text of an object", status=200
                )
            rows.append(ParsedSyntheticRow(original=row.original, generated=row.generated, data=parsed))
        return rows

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> PlatformClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


__all__ = [
    "PLATFORM_SPACE_ENV",
    "PLATFORM_TOKEN_ENV",
    "PLATFORM_URL_ENV",
    "ParsedSyntheticRow",
    "PlatformAuthError",
    "PlatformBadRequestError",
    "PlatformClient",
    "PlatformConflictError",
    "PlatformConnectionError",
    "PlatformError",
    "PlatformForbiddenError",
    "PlatformNotFoundError",
    "PlatformResponseError",
    "PlatformServerError",
    "PlatformTimeoutError",
    "PlatformValidationError",
    "ValidationIssue",
]
