"""Assessment runs: every row of a dataset scored by every judge asked for, with an optional aggregate."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from starlette.concurrency import run_in_threadpool

from eval_pipelines.platform.auth import Principal
from eval_pipelines.platform.judges import Verdict
from eval_pipelines.platform.responses import errors
from eval_pipelines.platform.state import API, PlatformState, current_platform, current_principal
from eval_pipelines.platform.store import JudgeRecord
from eval_pipelines.schemas.platform import (
    AssessRunRequest,
    StoredDatasetRow,
)
from eval_pipelines.schemas.sweep import ModelCallLimits

logger = logging.getLogger(__name__)

router = APIRouter()

ASSESS_MESSAGE = "Conversation evaluated"


def wire_score(score: float) -> float | int:
    # The product's scores are integers on the wire; keep a fractional score (a custom judge) as it is.
    return int(score) if float(score).is_integer() else score


def _aggregate(entries: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    scores: dict[str, list[float]] = {}
    for entry in entries:
        for judge_name, result in entry["conversation_scores"].items():
            scores.setdefault(judge_name, []).append(float(result["score"]))
    return {
        name: {
            "rows": len(values),
            "mean_score": round(sum(values) / len(values), 4),
            "min_score": min(values),
            "max_score": max(values),
        }
        for name, values in scores.items()
    }


@router.post(f"{API}/dataset/assess/run", responses=errors(403, 404, 502, 503))
async def assess_run(
    body: AssessRunRequest,
    principal: Principal = Depends(current_principal),
    platform: PlatformState = Depends(current_platform),
) -> dict[str, Any]:
    space = principal.require_space(body.space_id)
    dataset = await run_in_threadpool(platform.store.get_dataset, space, str(body.dataset_id))
    if dataset is None:
        raise HTTPException(status_code=404, detail=f"dataset {body.dataset_id} not found in space {space}")
    judges = [await platform.find_judge(space, judge_id) for judge_id in dict.fromkeys(body.judge_ids)]
    rows = await run_in_threadpool(platform.store.dataset_rows, dataset.dataset_id)
    # The run's own judge settings (the sweep's, sent as local extensions), else the platform's. The wait for a
    # slot happens here, before any attempt's timeout starts: a slow one-slot server is queued, not timed out.
    calls = ModelCallLimits(
        request_timeout_seconds=body.judge_timeout_seconds, max_concurrency=body.judge_max_concurrency
    )
    semaphore = asyncio.Semaphore(calls.max_concurrency or platform.settings.judge_concurrency)

    async def score(index: int, row: StoredDatasetRow, judge: JudgeRecord) -> Verdict:
        async with semaphore:
            return await platform.verdict(judge, row.conv_prefix, row.response, where=f" on row {index}", calls=calls)

    outcomes = await asyncio.gather(
        *(score(i, row, judge) for i, row in enumerate(rows) for judge in judges), return_exceptions=True
    )
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    verdicts = [o for o in outcomes if isinstance(o, Verdict)]
    entries: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        row_verdicts = verdicts[index * len(judges) : (index + 1) * len(judges)]
        entries.append(
            {
                "conversation_scores": {
                    judge.judge_name: {
                        "score": wire_score(v.score),
                        "rationale": v.rationale,
                        "category": v.category,
                    }
                    for judge, v in zip(judges, row_verdicts, strict=True)
                },
                "conversation_total_turns": len(row.conv_prefix) + 1,
            }
        )
    data: dict[str, Any] = {"evaluation_result": entries}
    if body.roll_data:
        data["aggregate"] = _aggregate(entries)
    evaluation_id = await run_in_threadpool(
        lambda: platform.store.record_evaluation(
            space_id=space,
            dataset_id=dataset.dataset_id,
            name=body.name,
            judge_ids=[j.judge_id for j in judges],
            roll_data=body.roll_data,
            result=data,
        )
    )
    logger.info("evaluation %s (%r): %d row(s) x %d judge(s)", evaluation_id, body.name, len(rows), len(judges))
    return {"message": ASSESS_MESSAGE, "data": {**data, "evaluation_id": evaluation_id, "rows": len(rows)}}
