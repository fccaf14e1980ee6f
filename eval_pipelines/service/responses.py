"""Error bodies of the evaluation service (`{"detail": ...}`) and their OpenAPI documentation."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from eval_pipelines.schemas.service_wire import (
    ErrorDetail,
)
from eval_pipelines.service.state import EvaluationService


# -- errors ------------------------------------------------------------------------------------------------
def error_response(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail}, headers=headers)


def retry_after(service: EvaluationService) -> dict[str, str]:
    return {"Retry-After": str(service.settings.retry_after_seconds)}


def error_doc(description: str, retry_after: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {"model": ErrorDetail, "description": description}
    if retry_after:
        doc["headers"] = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}
    return doc


Responses = dict[int | str, dict[str, Any]]
AUTH_ERRORS: Responses = {
    401: error_doc("missing or invalid API key"),
    403: error_doc("the API key lacks the permission (read-only key on POST/DELETE)"),
}
NOT_FOUND: Responses = {404: error_doc("not found")}
BAD_REQUEST: Responses = {400: error_doc("invalid request")}
UNAVAILABLE: Responses = {503: error_doc("draining for shutdown, or too many active runs", retry_after=True)}
CONFLICT: Responses = {409: error_doc("conflict")}
