"""Rollouts: list (paged, a local extension), get, and the artifacts of a finished one."""

from __future__ import annotations

import logging
from datetime import UTC
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import AwareDatetime

from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.runs import (
    MIN_LIST_LIMIT,
    ArtifactsResponse,
    Rollout,
    RolloutList,
    RolloutStatus,
)
from eval_pipelines.service.executor import NotFound
from eval_pipelines.service.responses import (
    NOT_FOUND,
    error_doc,
)
from eval_pipelines.service.state import ServiceDep

logger = logging.getLogger(__name__)

router = APIRouter()

#: The largest page of `GET /rollouts` (each rollout carries its status events).
MAX_ROLLOUT_PAGE = 1000
#: The largest `offset` a listing accepts; beyond it SQLite integers would overflow.
MAX_LIST_OFFSET = 1_000_000_000


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


# -- rollouts --------------------------------------------------------------------------------------
@router.get("/rollouts", response_model=RolloutList, tags=["rollouts"], summary="List rollouts")
def list_rollouts(
    service: ServiceDep,
    scenario_id: str | None = None,
    task_id: str | None = None,
    run_id: str | None = None,
    status: RolloutStatus | None = None,
    limit: Annotated[int | None, Query(ge=MIN_LIST_LIMIT, le=MAX_ROLLOUT_PAGE)] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_LIST_OFFSET)] = 0,
    completed_after: Annotated[
        AwareDatetime | None, Query(description="only rollouts completed at or after this time (ISO 8601, with offset)")
    ] = None,
    status_events: Annotated[
        bool, Query(description="false leaves every rollout's status_events empty (a lighter listing)")
    ] = True,
) -> RolloutList:
    """`limit`/`offset` page the listing, `completed_after` keeps the rollouts finished since a time and
    `status_events=false` leaves out each rollout's status history (local extensions: a client following a run
    asks for what is new, not for the whole run again, and needs no history); `total` counts every match."""
    filters = {
        "scenario_id": scenario_id,
        "task_id": task_id,
        "run_id": run_id,
        "status": status.value if status else None,
        # The stored timestamps' own form (UTC, `isoformat`), so the store compares like with like.
        "completed_after": completed_after.astimezone(UTC).isoformat() if completed_after else None,
    }
    found = service.store.list_rollouts(**filters, limit=limit, offset=offset, with_events=status_events)
    total = service.store.count_rollouts(**filters) if limit is not None or offset else len(found)
    return RolloutList(total=total, rollouts=found)


@router.get("/rollouts/{rollout_id}", response_model=Rollout, tags=["rollouts"], responses=NOT_FOUND, summary="Get one")
def get_rollout(service: ServiceDep, rollout_id: str) -> Rollout:
    rollout = service.store.get_rollout(rollout_id)
    if rollout is None:
        raise NotFound(f"rollout {rollout_id!r} not found")
    return rollout


@router.get(
    "/rollouts/{rollout_id}/artifacts",
    response_model=ArtifactsResponse,
    tags=["rollouts"],
    responses={404: error_doc("rollout not found, or still in progress (no artifacts yet)")},
    summary="Artifacts of a finished rollout",
)
def get_artifacts(service: ServiceDep, rollout_id: str, redact_tool_calls: bool = False) -> ArtifactsResponse:
    artifacts = service.executor.load_artifacts(rollout_id)
    if redact_tool_calls:
        artifacts = redact_tool_messages(artifacts)
    return ArtifactsResponse(rollout_id=rollout_id, artifacts=artifacts)
