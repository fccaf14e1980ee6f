"""Dataset uploads: rows (`/dataset/upload`) and the platform upload with its eligibility check."""

from __future__ import annotations

import logging
from uuid import UUID

from fastapi import APIRouter, Depends, File, Form, HTTPException, Response, UploadFile
from starlette.concurrency import run_in_threadpool

from eval_pipelines.platform.auth import Principal
from eval_pipelines.platform.datasets import (
    EVALUATION_TYPE_REQUIREMENTS,
    DatasetFileError,
    eligible_evaluation_types,
    first_ineligible_row,
    parse_json_rows,
    parse_rows_file,
    validate_rows,
)
from eval_pipelines.platform.responses import errors, file_error, issue, unprocessable
from eval_pipelines.platform.state import API, PlatformState, current_platform, current_principal
from eval_pipelines.schemas.platform import (
    EligibleEvaluationTypes,
    PlatformUploadData,
    PlatformUploadResponse,
    StoredDatasetRow,
)

logger = logging.getLogger(__name__)

router = APIRouter()

UPLOAD_MESSAGE = "Dataset uploaded successfully"


@router.post(f"{API}/dataset/upload", response_model=list[StoredDatasetRow], responses=errors(403, 413))
async def upload_dataset(
    file: UploadFile = File(..., description="JSON array of rows, or CSV"),
    dataset_name: str = Form(..., min_length=1),
    space_id: UUID = Form(...),
    principal: Principal = Depends(current_principal),
    platform: PlatformState = Depends(current_platform),
    *,
    response: Response,
) -> list[StoredDatasetRow]:
    space = principal.require_space(space_id)
    content = await platform.read_upload(file)
    try:
        # Off the event loop: a large file takes a while to parse and validate.
        rows = await run_in_threadpool(
            lambda: validate_rows(parse_rows_file(content, file.filename, file.content_type))
        )
    except DatasetFileError as exc:
        raise file_error(exc) from None
    dataset, stored = await run_in_threadpool(
        lambda: platform.store.add_rows(space_id=space, dataset_name=dataset_name, rows=rows, origin="upload")
    )
    logger.info("dataset %s (%r): %d row(s) appended", dataset.dataset_id, dataset.name, len(stored))
    # The body is the stored rows (as deployed); the collinear SDK reads the dataset id from the file name.
    response.headers["Content-Disposition"] = f'attachment; filename="{dataset.dataset_id}.json"'
    return stored


@router.post(f"{API}/dataset/upload/platform", response_model=PlatformUploadResponse, responses=errors(403, 413))
async def upload_platform(
    file: UploadFile = File(..., description="JSON array of rows (application/json)"),
    dataset_name: str = Form(..., min_length=1),
    space_id: UUID = Form(...),
    evaluation_type: str | None = Form(None),
    skip_context_check: bool = Form(False),
    principal: Principal = Depends(current_principal),
    platform: PlatformState = Depends(current_platform),
) -> PlatformUploadResponse:
    space = principal.require_space(space_id)
    kind = (evaluation_type or "").strip() or None
    if kind is not None and kind not in EVALUATION_TYPE_REQUIREMENTS:
        raise unprocessable(
            issue(
                ("body", "evaluation_type"),
                f"unknown evaluation_type {kind!r}; known: {sorted(EVALUATION_TYPE_REQUIREMENTS)}",
            )
        )
    content = await platform.read_upload(file)
    try:
        rows = await run_in_threadpool(lambda: validate_rows(parse_json_rows(content)))
    except DatasetFileError as exc:
        raise file_error(exc) from None
    if not rows:
        raise HTTPException(status_code=400, detail="the file holds no rows")
    if kind is not None and not skip_context_check:
        bad = first_ineligible_row(rows, kind)
        if bad is not None:
            raise HTTPException(
                status_code=400,
                detail=f"row {bad} is not eligible for evaluation_type {kind!r}: every row needs "
                f"{EVALUATION_TYPE_REQUIREMENTS[kind]} (set skip_context_check to upload anyway)",
            )
    dataset, stored = await run_in_threadpool(
        lambda: platform.store.add_rows(
            space_id=space, dataset_name=dataset_name, rows=rows, origin="platform", evaluation_type=kind
        )
    )
    logger.info("platform dataset %s (%r): %d row(s)", dataset.dataset_id, dataset.name, len(stored))
    return PlatformUploadResponse(
        message=UPLOAD_MESSAGE,
        data=PlatformUploadData(
            dataset_id=dataset.dataset_id,
            eligible_evaluation_types=EligibleEvaluationTypes(evaluation_types=eligible_evaluation_types(rows)),
            rows=len(stored),
        ),
    )
