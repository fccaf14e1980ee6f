"""Reading a task-generation request: validation with field-named errors, presets, defaults, the complexity
mix and the `diversity` object.

`diversity` (spec 000 leaves its shape open) is::

    {"seed": 0, "vary": ["parameters", "phrasing", "entities"], "max_similar": 0.85}

- `seed` (int): every random choice derives from it, so the same request gives the same tasks.
- `vary` (subset of `parameters`, `phrasing`, `entities`): what may differ between tasks. `parameters` are
  generated values (titles, texts, times, enum and number choices, which items a task touches); `phrasing` is
  the wording of instructions; `entities` are the people and places named. A dimension left out is drawn from
  the same random stream for every task, so tasks differ only along the listed dimensions.
- `max_similar` (0..1): two tasks whose instructions share more than this fraction of their words (Jaccard
  similarity of word sets) are near-duplicates; the later one is re-drawn, and after repeated collisions
  skipped and counted in `filter_summary["too_similar"]`. Exact duplicates are never kept (the simulated
  models, like a reader, identify a task by its instruction).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, ValidationError

from eval_pipelines.schemas._base import StrictModel
from eval_pipelines.schemas.taskgen import (
    AgentSpec,
    Category,
    Complexity,
    NpcRole,
    ScenarioSpec,
    TaskGenRequest,
    Workflow,
    Workspace,
)
from eval_pipelines.taskgen.errors import TaskGenRequestError
from eval_pipelines.taskgen.presets import PRESETS, preset_names

DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
VaryDimension = Literal["parameters", "phrasing", "entities"]
ALL_DIMENSIONS: tuple[VaryDimension, ...] = ("parameters", "phrasing", "entities")
DEFAULT_MAX_SIMILAR = 0.85


class Diversity(StrictModel):
    seed: int = 0
    vary: list[VaryDimension] = Field(default_factory=lambda: list(ALL_DIMENSIONS))
    max_similar: float = Field(default=DEFAULT_MAX_SIMILAR, ge=0.0, le=1.0)


def _first_error(exc: ValidationError, prefix: str = "") -> TaskGenRequestError:
    first = exc.errors()[0]
    loc = ".".join(str(part) for part in first["loc"])
    name = ".".join(p for p in (prefix, loc) if p) or "<root>"
    return TaskGenRequestError(name, first["msg"])


def parse_request(data: TaskGenRequest | Mapping[str, Any]) -> TaskGenRequest:
    """Validate a raw request body; TaskGenRequestError names the first offending field (`num_tasks`)."""
    if isinstance(data, TaskGenRequest):
        return data
    try:
        return TaskGenRequest.model_validate(dict(data))
    except ValidationError as exc:
        raise _first_error(exc) from None


def apportion(total: int, shares: Mapping[str, float]) -> dict[str, int]:
    """Largest-remainder apportionment of `total` items over `shares` (ties go to the earlier key)."""
    if total < 0:
        raise ValueError("total must not be negative")
    if not all(math.isfinite(v) for v in shares.values()):
        raise ValueError("shares must be finite numbers")
    # Scaled by the largest share first: shares near the float limit (a request may send 1e308) would overflow
    # a plain sum or product to infinity.
    largest = max((max(0.0, v) for v in shares.values()), default=0.0)
    if largest <= 0:
        raise ValueError("shares must not all be zero")
    scaled = {key: max(0.0, value) / largest for key, value in shares.items()}
    weight = sum(scaled.values())
    quotas = {key: total * value / weight for key, value in scaled.items()}
    counts = {key: math.floor(q) for key, q in quotas.items()}
    order = sorted(quotas, key=lambda k: (-(quotas[k] - counts[k]), list(shares).index(k)))
    for key in order[: total - sum(counts.values())]:
        counts[key] += 1
    return counts


@dataclass(frozen=True)
class ResolvedRequest:
    """A request with its preset applied and every default filled in: what the generators work from."""

    request: TaskGenRequest
    agent: AgentSpec
    scenario: ScenarioSpec
    workflows: list[Workflow]
    npcs: list[NpcRole]
    categories: list[Category]
    workspace: Workspace
    complexity: Complexity
    diversity: Diversity
    #: difficulty -> number of tasks wanted (largest remainder over `complexity`).
    counts: dict[str, int] = field(default_factory=dict)
    #: what of the request was not used, for the job's notes (`ignored_notes`).
    notes: list[str] = field(default_factory=list)

    @property
    def num_tasks(self) -> int:
        return self.request.num_tasks

    def varies(self, dimension: VaryDimension) -> bool:
        return dimension in self.diversity.vary


def ignored_notes(request: TaskGenRequest) -> list[str]:
    """One note per sub-object holding keys SimLab's loose types allow but nothing here reads."""
    notes: list[str] = []
    listed: list[tuple[str, list[Any] | None]] = [
        ("categories", request.categories),
        ("workflows", request.workflows),
        ("npcs", request.npcs),
    ]
    for name, items in listed:
        for index, item in enumerate(items or []):
            if item.ignored_keys:
                notes.append(f"{name}[{index}]: {', '.join(item.ignored_keys)} ignored (not used by this generator)")
    if request.complexity is not None and request.complexity.ignored_keys:
        known = "/".join(DIFFICULTIES)
        notes.append(f"complexity: {', '.join(request.complexity.ignored_keys)} ignored (only {known} are used)")
    return notes


def resolve_request(data: TaskGenRequest | Mapping[str, Any]) -> ResolvedRequest:
    """Apply the preset (request fields win over it), then defaults. Field-named errors for bad values."""
    request = parse_request(data)
    preset = None
    if request.preset is not None:
        preset = PRESETS.get(request.preset)
        if preset is None:
            raise TaskGenRequestError("preset", f"unknown preset {request.preset!r}; available: {preset_names()}")
    try:
        diversity = Diversity.model_validate(request.diversity or {})
    except ValidationError as exc:
        raise _first_error(exc, "diversity") from None
    complexity = request.complexity or Complexity()
    shares = {d: float(getattr(complexity, d)) for d in DIFFICULTIES}
    if sum(shares.values()) <= 0:
        raise TaskGenRequestError("complexity", "the easy/medium/hard shares must not all be zero")
    agent = request.agent or (preset.agent if preset else AgentSpec())
    scenario = request.scenario or (preset.scenario if preset else ScenarioSpec())
    workflows = request.workflows if request.workflows is not None else (list(preset.workflows) if preset else [])
    npcs = request.npcs if request.npcs is not None else (list(preset.npcs) if preset else [])
    categories = request.categories if request.categories is not None else (list(preset.categories) if preset else [])
    return ResolvedRequest(
        request=request,
        agent=agent,
        scenario=scenario,
        workflows=list(workflows),
        npcs=list(npcs),
        categories=list(categories),
        workspace=request.workspace,
        complexity=complexity,
        diversity=diversity,
        counts=apportion(request.num_tasks, shares),
        notes=ignored_notes(request),
    )
