"""Error bodies of the platform (`{"detail": ...}`) and their OpenAPI documentation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import HTTPException

from eval_pipelines.platform.datasets import DatasetFileError

_ERROR_DESCRIPTIONS = {
    400: "Unparseable body or file, non-integer ground_truth (`invalid input for query argument`), ineligible rows",
    401: "Missing or invalid bearer token",
    403: "The token is not granted this space",
    404: "Dataset or judge not found in the space",
    409: "A judge with this name exists in the space",
    413: "File too large",
    502: "The judge or generator model failed",
    503: "The model is not usable (e.g. its key variable is unset)",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries of the error statuses a route can answer (all share the `{detail}` body)."""
    return {code: {"description": _ERROR_DESCRIPTIONS[code]} for code in sorted({400, 401, *codes})}


def issue(loc: Sequence[str], msg: str, type_: str = "value_error") -> dict[str, Any]:
    return {"loc": [str(p) for p in loc], "msg": msg, "type": type_}


def unprocessable(*issues: dict[str, Any]) -> HTTPException:
    return HTTPException(status_code=422, detail=list(issues))


def file_error(exc: DatasetFileError) -> HTTPException:
    return HTTPException(status_code=exc.status, detail=exc.detail)
