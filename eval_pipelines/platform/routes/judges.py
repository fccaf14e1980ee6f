"""Judges: create one in a space (with its few-shot and retrieval settings), and judge one conversation."""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from starlette.concurrency import run_in_threadpool

from eval_pipelines.platform.auth import Principal
from eval_pipelines.platform.models import ModelKind
from eval_pipelines.platform.responses import errors, issue, unprocessable
from eval_pipelines.platform.routes.assessments import wire_score
from eval_pipelines.platform.state import API, PlatformState, current_platform, current_principal
from eval_pipelines.platform.store import DuplicateJudgeName, JudgeRecord, RagSettings
from eval_pipelines.schemas._base import utc_now_iso
from eval_pipelines.schemas.platform import (
    FULL_SAFETY_GUARD_MODEL,
    ConversationJudgeRequest,
    JudgeCreateRequest,
    JudgeCreateResponse,
)

logger = logging.getLogger(__name__)

router = APIRouter()

MAX_FEW_SHOT_EXAMPLES = 50
MAX_RAG_TOP_K = 100
_HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:\d{1,5})?$")
_URL = re.compile(r"^https?://[^\s/@]+(/\S*)?$", re.IGNORECASE)


def _rag_settings(body: JudgeCreateRequest) -> RagSettings | None:
    """Validate the rag_* fields together: any of them turns retrieval on, which needs an index and a host."""
    given = {
        "rag_index": body.rag_index,
        "rag_namespace": body.rag_namespace,
        "rag_host": body.rag_host,
        "rag_top_k": body.rag_top_k,
        "rag_api_key": body.rag_api_key,
    }
    if all(value is None for value in given.values()):
        return None
    issues: list[dict[str, Any]] = []
    for name in ("rag_index", "rag_host"):
        value = given[name]
        if value is None or not str(value).strip():
            issues.append(issue(("body", name), f"{name} is required when any rag_* field is set", "missing"))
    host = (body.rag_host or "").strip()
    if host and not (_URL.match(host) or _HOSTNAME.match(host)):
        issues.append(
            issue(("body", "rag_host"), "rag_host must be an http(s) URL or a host name, without credentials")
        )
    if body.rag_top_k is not None and body.rag_top_k > MAX_RAG_TOP_K:
        issues.append(issue(("body", "rag_top_k"), f"rag_top_k must be at most {MAX_RAG_TOP_K}"))
    if body.rag_api_key is not None and not body.rag_api_key.get_secret_value().strip():
        issues.append(issue(("body", "rag_api_key"), "rag_api_key must not be empty"))
    if issues:
        raise unprocessable(*issues)
    return RagSettings(
        index=(body.rag_index or "").strip() or None,
        namespace=body.rag_namespace,
        host=host or None,
        top_k=body.rag_top_k,
        api_key_set=body.rag_api_key is not None,
    )


@router.post(f"{API}/judge/create/sdk", response_model=JudgeCreateResponse, responses=errors(403, 409))
async def create_judge(
    body: JudgeCreateRequest,
    principal: Principal = Depends(current_principal),
    platform: PlatformState = Depends(current_platform),
) -> JudgeCreateResponse:
    space = principal.require_space(body.space_id)
    entry = platform.settings.models.get(body.model_name)
    if entry is None or entry.kind not in (ModelKind.QUALITY, ModelKind.SAFETY):
        known = platform.settings.models.names(ModelKind.QUALITY) + platform.settings.models.names(ModelKind.SAFETY)
        raise unprocessable(
            issue(("body", "model_name"), f"unknown judge model {body.model_name!r}; known: {sorted(known)}")
        )
    if body.nano_model_type is not None:
        if body.model_name == FULL_SAFETY_GUARD_MODEL:
            raise unprocessable(
                issue(
                    ("body", "nano_model_type"),
                    f"nano_model_type is not supported by the full safety guard model "
                    f"{FULL_SAFETY_GUARD_MODEL!r}; use a nano guard model such as 'collinear_guard_nano'",
                )
            )
        if entry.kind != ModelKind.SAFETY:
            raise unprocessable(
                issue(("body", "nano_model_type"), "nano_model_type applies to safety guard models only")
            )
    issues = [
        issue(("body", name), f"at most {MAX_FEW_SHOT_EXAMPLES} few-shot examples")
        for name in ("qa_few_shot", "nli_few_shot", "conv_few_shot")
        if len(getattr(body, name) or []) > MAX_FEW_SHOT_EXAMPLES
    ]
    if issues:
        raise unprocessable(*issues)
    judge = JudgeRecord(
        judge_id=str(uuid.uuid4()),
        space_id=space,
        judge_name=body.judge_name,
        model_name=body.model_name,
        kind=str(entry.kind),
        nano_model_type=body.nano_model_type.value if body.nano_model_type else None,
        qa_few_shot=body.qa_few_shot,
        nli_few_shot=body.nli_few_shot,
        conv_few_shot=body.conv_few_shot,
        rag=_rag_settings(body),
        created_at=utc_now_iso(),
    )
    try:
        await run_in_threadpool(platform.store.create_judge, judge)
    except DuplicateJudgeName as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    logger.info("judge %s (%r) created on model %s", judge.judge_id, judge.judge_name, judge.model_name)
    return JudgeCreateResponse(id=judge.judge_id)


@router.post(f"{API}/judge/conversation", response_model=None, responses=errors(403, 404, 502, 503))
async def judge_conversation(
    body: ConversationJudgeRequest,
    principal: Principal = Depends(current_principal),
    platform: PlatformState = Depends(current_platform),
) -> dict[str, Any]:
    space = principal.require_space(body.space_id)
    judge = await platform.find_judge(space, body.judge_id)
    result = await platform.verdict(judge, body.conversation_prefix, body.response)
    return {"score": wire_score(result.score), "category": result.category, "rationale": result.rationale}
