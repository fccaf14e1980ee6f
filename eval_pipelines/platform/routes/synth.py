"""Synthetic data: rows generated from examples, streamed one JSON item at a time."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from eval_pipelines.platform.auth import Principal
from eval_pipelines.platform.models import ModelKind, ModelUnavailable
from eval_pipelines.platform.responses import errors, issue, unprocessable
from eval_pipelines.platform.state import API, PlatformState, current_platform, current_principal
from eval_pipelines.platform.synth import generate_rows
from eval_pipelines.schemas.platform import (
    SynthDataRequest,
)

logger = logging.getLogger(__name__)

router = APIRouter()


@router.post(f"{API}/synth_data/generate", responses=errors(403, 503))
async def synth_generate(
    body: SynthDataRequest,
    principal: Principal = Depends(current_principal),
    platform: PlatformState = Depends(current_platform),
) -> StreamingResponse:
    # Any valid token may generate (nothing is stored in a space); a space named in the body must be granted.
    if body.space_id is not None:
        principal.require_space(body.space_id)
    model_id = str(body.model_id)
    entry = platform.settings.models.get(model_id)
    if entry is None or entry.kind != ModelKind.GENERATOR:
        raise unprocessable(
            issue(
                ("body", "model_id"),
                f"unknown generator model_id {model_id}; known: {platform.settings.models.names(ModelKind.GENERATOR)}",
            )
        )
    try:
        platform.models.check_available(model_id)
    except ModelUnavailable as exc:
        raise HTTPException(status_code=503, detail=f"generator {model_id} is not usable: {exc}") from None
    target = len(body.examples) * body.multiplier
    if target > platform.settings.max_synth_rows:
        raise unprocessable(
            issue(
                ("body", "multiplier"),
                f"len(examples) x multiplier = {target} exceeds this platform's limit of "
                f"{platform.settings.max_synth_rows}",
            )
        )
    job_id = await run_in_threadpool(
        lambda: platform.store.start_synth_job(
            model_id=model_id, multiplier=body.multiplier, examples=len(body.examples), prompt=body.prompt
        )
    )

    async def stream() -> AsyncIterator[bytes]:
        # Each row is its own chunk, written as soon as it is ready; the body is one JSON array in the end.
        status, written = "failed", 0
        try:
            yield b"["
            async for row in generate_rows(
                platform.models,
                model_id,
                examples=body.examples,
                multiplier=body.multiplier,
                prompt=body.prompt,
                concurrency=platform.settings.judge_concurrency,
            ):
                item: dict[str, Any] = {"original": row.original, "generated": row.generated}
                if entry.is_simulated:
                    item["simulated"] = True
                yield (b"," if written else b"") + json.dumps(item, ensure_ascii=False).encode("utf-8")
                written += 1
                await run_in_threadpool(platform.store.add_synth_row, job_id, row.position, row.original, row.generated)
            yield b"]"
            status = "completed" if written == target else "partial"
        finally:
            # Synchronous on purpose: after a client disconnect this runs in a cancelled task.
            platform.store.finish_synth_job(job_id, status)
            logger.info("synthetic job %s: %d of %d row(s), %s", job_id, written, target, status)

    return StreamingResponse(
        stream(),
        media_type="application/json",
        headers={"X-Synth-Job-Id": job_id, "X-Synth-Target-Rows": str(target)},
    )
