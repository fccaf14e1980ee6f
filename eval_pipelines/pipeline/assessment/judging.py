"""Judging an uploaded dataset on the platform: a quality and a safety judge (created once, reused while the
platform knows them), one verdict per row and judge, and the `judgements` rows."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import math
import os
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval_pipelines.clients.platform import (
    DEFAULT_PIPELINE_TIMEOUT_SECONDS,
    AssessRunResponse,
    PlatformClient,
    PlatformNotFoundError,
    PlatformTarget,
)
from eval_pipelines.pipeline.assessment.dataset import (
    AssessedPartition,
    AssessmentError,
    DatasetManifest,
    RolloutRef,
)
from eval_pipelines.schemas.platform import (
    DEFAULT_JUDGE_CONCURRENCY,
    DEFAULT_JUDGE_TIMEOUT_SECONDS,
    MAX_VERDICT_ATTEMPTS,
    AssessRunRequest,
    DatasetRow,
    JudgeCreateRequest,
)
from eval_pipelines.schemas.sweep import ModelCallLimits
from eval_pipelines.warehouse.rows import ColumnTable, build_table
from eval_pipelines.warehouse.tables import JUDGEMENTS

logger = logging.getLogger(__name__)


QUALITY = "quality"


SAFETY = "safety"
#: The judges every row is scored by, one of each kind.
JUDGE_KINDS = (QUALITY, SAFETY)


DEFAULT_QUALITY_MODEL = "veritas"


DEFAULT_SAFETY_MODEL = "collinear_guard"


@dataclass(frozen=True)
class JudgeSetup:
    """Which judges to create: backing models, name prefix and optional few-shot examples."""

    quality_model: str = DEFAULT_QUALITY_MODEL
    safety_model: str = DEFAULT_SAFETY_MODEL
    name_prefix: str = "eval-pipelines"
    conv_few_shot: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    #: How the platform calls the judge models (the sweep's `platform_judges`); None: the platform's defaults.
    calls: ModelCallLimits | None = None

    def model_for(self, kind: str) -> str:
        return self.quality_model if kind == QUALITY else self.safety_model

    def assess_timeout_seconds(self, rows: int) -> float:
        """How long the pipeline waits for one assessment run, whose reply comes once every verdict is in.

        With the sweep's judge settings, long enough for every verdict to take its calls one wave of
        `max_concurrency` after another, each up to the timeout: a slow local judge is waited for, not cancelled
        and sent again (a timed-out call to the platform is retried). Without them, the pipeline's default.
        """
        if self.calls is None:
            return DEFAULT_PIPELINE_TIMEOUT_SECONDS
        timeout = self.calls.request_timeout_seconds or DEFAULT_JUDGE_TIMEOUT_SECONDS
        waves = math.ceil(rows * len(JUDGE_KINDS) / (self.calls.max_concurrency or DEFAULT_JUDGE_CONCURRENCY))
        return DEFAULT_PIPELINE_TIMEOUT_SECONDS + waves * timeout * MAX_VERDICT_ATTEMPTS


@dataclass(frozen=True)
class KnownJudge:
    """A judge already created on the platform, to reuse (the platform has no endpoint to list judges)."""

    judge_id: str
    judge_name: str
    model_name: str


@dataclass(frozen=True)
class RowVerdict:
    judge: KnownJudge
    kind: str
    score: float
    category: str | None
    rationale: str


@dataclass
class AssessmentOutcome:
    dataset_id: str
    judges: dict[str, KnownJudge]
    #: Per uploaded row, in order: judge kind -> verdict.
    verdicts: list[dict[str, RowVerdict]]
    run: AssessRunResponse


def judge_name(prefix: str, kind: str, model_name: str, now: dt.datetime | None = None) -> str:
    """Unique by construction: a timestamp suffix (the spec's advice) plus a few random characters."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%S")
    return f"{prefix}-{kind}-{model_name}-{stamp}-{uuid.uuid4().hex[:6]}"


async def ensure_judges(
    client: PlatformClient,
    space_id: str,
    setup: JudgeSetup,
    reuse: Mapping[str, KnownJudge] | None = None,
) -> dict[str, KnownJudge]:
    """The quality and safety judges: the ones in `reuse` when their model still matches, else new ones."""
    judges: dict[str, KnownJudge] = {}
    for kind in JUDGE_KINDS:
        model = setup.model_for(kind)
        known = (reuse or {}).get(kind)
        if known is not None and known.model_name == model:
            judges[kind] = known
            continue
        name = judge_name(setup.name_prefix, kind, model)
        few_shot = setup.conv_few_shot.get(kind)
        created = await client.create_judge(
            JudgeCreateRequest(
                judge_name=name,
                space_id=uuid.UUID(space_id),
                model_name=model,
                conv_few_shot=[dict(x) for x in few_shot] if few_shot else None,
            )
        )
        judges[kind] = KnownJudge(judge_id=created.id, judge_name=name, model_name=model)
    return judges


async def judge_dataset(
    client: PlatformClient,
    dataset_id: str,
    row_count: int,
    space_id: str,
    *,
    run_name: str,
    setup: JudgeSetup | None = None,
    reuse: Mapping[str, KnownJudge] | None = None,
) -> AssessmentOutcome:
    """Create (or reuse) a quality and a safety judge and run the assessment of an uploaded dataset.

    A reused judge the platform no longer knows (judges are ephemeral) is re-created once.
    """
    setup = setup or JudgeSetup()
    judges = await ensure_judges(client, space_id, setup, reuse)

    calls = setup.calls or ModelCallLimits()

    def request() -> AssessRunRequest:
        return AssessRunRequest(
            dataset_id=uuid.UUID(dataset_id),
            space_id=uuid.UUID(space_id),
            judge_ids=[uuid.UUID(j.judge_id) for j in judges.values()],
            name=run_name,
            judge_timeout_seconds=calls.request_timeout_seconds,
            judge_max_concurrency=calls.max_concurrency,
        )

    try:
        run = await client.assess_run(request())
    except PlatformNotFoundError:
        if not reuse:
            raise
        logger.info("a reused judge is gone from the platform; creating new judges")
        judges = await ensure_judges(client, space_id, setup, None)
        run = await client.assess_run(request())
    entries = run.data.evaluation_result
    if len(entries) != row_count:
        raise AssessmentError(f"the platform scored {len(entries)} row(s), {row_count} were uploaded")
    verdicts: list[dict[str, RowVerdict]] = []
    for index, entry in enumerate(entries):
        by_kind: dict[str, RowVerdict] = {}
        for kind, judge in judges.items():
            score = entry.conversation_scores.get(judge.judge_name)
            if score is None:
                raise AssessmentError(f"row {index} has no score from judge {judge.judge_name!r}")
            by_kind[kind] = RowVerdict(judge, kind, score.score, score.category, score.rationale)
        verdicts.append(by_kind)
    return AssessmentOutcome(dataset_id=dataset_id, judges=judges, verdicts=verdicts, run=run)


async def upload_and_judge(
    client: PlatformClient,
    rows: Sequence[DatasetRow],
    space_id: str,
    *,
    dataset_name: str,
    run_name: str,
    setup: JudgeSetup | None = None,
    reuse: Mapping[str, KnownJudge] | None = None,
    evaluation_type: str = "safety",
) -> AssessmentOutcome:
    """Platform-upload the rows, then `judge_dataset` them."""
    if not rows:
        raise ValueError("no rows to assess")
    upload = await client.upload_platform(
        rows, dataset_name=dataset_name, space_id=space_id, evaluation_type=evaluation_type
    )
    return await judge_dataset(
        client, upload.data.dataset_id, len(rows), space_id, run_name=run_name, setup=setup, reuse=reuse
    )


def judgements_table(
    refs: Sequence[RolloutRef], outcome: AssessmentOutcome, *, judged_at: dt.datetime | None = None
) -> ColumnTable:
    """`judgements` rows: one per rollout and judge; `refs` in upload order."""
    if len(refs) != len(outcome.verdicts):
        raise ValueError(f"{len(refs)} rows but {len(outcome.verdicts)} verdict sets")
    when = judged_at or dt.datetime.now(dt.UTC)
    columns: dict[str, list[Any]] = {name: [] for name in JUDGEMENTS.column_names}
    for ref, verdicts in zip(refs, outcome.verdicts, strict=True):
        for verdict in verdicts.values():
            values = {
                "sweep_id": ref.sweep_id,
                "rollout_id": ref.rollout_id,
                "scenario_id": ref.scenario_id,
                "task_id": ref.task_id,
                "model_name": ref.model_name,
                "judge": verdict.judge.judge_name,
                "judge_id": verdict.judge.judge_id,
                "judge_kind": verdict.kind,
                "judge_model": verdict.judge.model_name,
                "score": float(verdict.score),
                "category": verdict.category,
                "rationale": verdict.rationale,
                "ground_truth": ref.ground_truth,
                "dataset_id": outcome.dataset_id,
                "judged_at": when,
            }
            for name, value in values.items():
                columns[name].append(value)
    return build_table(JUDGEMENTS, columns)


def judgements_file_stem(setup: JudgeSetup, sweep_id: str) -> str:
    """One file per sweep and judge configuration: re-judging a sweep with the same models replaces its file,
    other models add one, and no sweep's file is touched by another sweep's judging."""
    raw = f"judges-{setup.quality_model}-{setup.safety_model}-{sweep_id}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw)


def judges_path(root: Path) -> Path:
    """The judges created so far, reused by every later judging (the platform cannot list its judges)."""
    return root / "assessment" / "judges.json"


def load_known_judges(path: Path, space_id: str, setup: JudgeSetup) -> dict[str, KnownJudge]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    known = data.get(space_id, {}) if isinstance(data, dict) else {}
    judges: dict[str, KnownJudge] = {}
    for kind in JUDGE_KINDS:
        entry = known.get(f"{kind}:{setup.model_for(kind)}")
        if isinstance(entry, dict):
            with contextlib.suppress(TypeError):
                judges[kind] = KnownJudge(**entry)
    return judges


def save_known_judges(path: Path, space_id: str, judges: Mapping[str, KnownJudge]) -> None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    space = data.setdefault(space_id, {})
    for kind, judge in judges.items():
        space[f"{kind}:{judge.model_name}"] = asdict(judge)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class JudgeSummary:
    rows: int
    dataset_id: str | None
    judges: dict[str, KnownJudge]
    mean_scores: dict[str, float]
    table: ColumnTable


async def judge_manifest(
    client: PlatformClient,
    manifest: DatasetManifest,
    *,
    setup: JudgeSetup | None = None,
    reuse: Mapping[str, KnownJudge] | None = None,
    judged_at: dt.datetime | None = None,
) -> JudgeSummary:
    """The `judgements` step: judge an uploaded dataset; the caller writes `summary.table` (file stem
    `judgements_file_stem(setup)`) and may keep `summary.judges` to reuse next time."""
    outcome = await judge_dataset(
        client,
        manifest.dataset_id,
        len(manifest.rows),
        manifest.space_id,
        run_name=manifest.dataset_name,
        setup=setup,
        reuse=reuse,
    )
    table = judgements_table(manifest.rows, outcome, judged_at=judged_at)
    means = {kind: sum(v[kind].score for v in outcome.verdicts) / len(outcome.verdicts) for kind in outcome.judges}
    return JudgeSummary(len(manifest.rows), outcome.dataset_id, outcome.judges, means, table)


def judgements_step(
    target: PlatformTarget, partition: AssessedPartition, calls: ModelCallLimits | None = None
) -> JudgeSummary | None:
    """Judge the sweep's uploaded dataset (quality and safety) with the judges created before when they still
    exist, and write the sweep's `judgements` rows (its own file). `calls`: the sweep's `platform_judges`."""
    sweep_id = partition.sweep()
    if sweep_id is None:
        return None
    path = partition.manifest_path(sweep_id)
    if not path.is_file():
        return None
    manifest = DatasetManifest.load(path)
    setup = JudgeSetup(calls=calls)
    known = judges_path(partition.data_dir)

    async def go() -> JudgeSummary:
        async with target.client(setup.assess_timeout_seconds(len(manifest.rows))) as client:
            reuse = load_known_judges(known, manifest.space_id, setup)
            return await judge_manifest(client, manifest, setup=setup, reuse=reuse)

    summary = asyncio.run(go())
    save_known_judges(known, manifest.space_id, summary.judges)
    partition.warehouse.write(
        "judgements",
        summary.table,
        model_key=partition.model_key,
        scenario_key=partition.scenario_key,
        file_stem=judgements_file_stem(setup, sweep_id),
    )
    return summary
