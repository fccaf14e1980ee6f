"""Assessment steps, Dagster-free: verified rollouts -> dataset rows -> platform judges -> `judgements` rows, and
seed examples -> synthetic data -> `synthetic_rows` rows.

The platform is reached only through `PlatformClient`, so the same steps run against the embedded local platform
and a hosted one. Rows are matched back to rollouts by position (the platform scores rows in upload order); the
`context` of each row also names its task and rollout, for anyone reading the dataset on the platform.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from eval_pipelines.clients.platform import (
    AssessRunResponse,
    ParsedSyntheticRow,
    PlatformClient,
    PlatformNotFoundError,
    PlatformTarget,
)
from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.platform import (
    SIM_SYNTH_MODEL_ID,
    AssessRunRequest,
    ConversationMessage,
    DatasetRow,
    JudgeCreateRequest,
    SynthDataRequest,
)
from eval_pipelines.warehouse.catalog import partition_scores
from eval_pipelines.warehouse.store import Warehouse, hive_partition
from eval_pipelines.warehouse.tables import JUDGEMENTS, SYNTHETIC_ROWS, TableSpec

logger = logging.getLogger(__name__)

QUALITY = "quality"
SAFETY = "safety"
DEFAULT_QUALITY_MODEL = "veritas"
DEFAULT_SAFETY_MODEL = "collinear_guard"
DEFAULT_SYNTH_PROMPT = (
    "Rewrite the example as a new, realistic request of the same kind, with the same structure and a different "
    "wording and details."
)

_S = pa.string()

# --- dataset rows from verified rollouts --------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutRef:
    """The rollout behind an uploaded row, and the label the row carries."""

    sweep_id: str
    rollout_id: str
    scenario_id: str
    task_id: str
    model_name: str
    ground_truth: int | None


@dataclass(frozen=True)
class AssessmentRow:
    """A dataset row and the rollout it came from."""

    ref: RolloutRef
    row: DatasetRow


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type", "text") == "text"]
        return "".join(p for p in parts if isinstance(p, str))
    return json.dumps(content, ensure_ascii=False, sort_keys=True, default=str)


#: How an errored tool result starts in a dataset row's conversation.
TOOL_ERROR_MARK = "[error]"


def transcript_message(message: Mapping[str, Any]) -> ConversationMessage:
    """A trace message as a platform message: role and text; tool calls are written out as text, and a tool result
    that was an error says so (a judge cannot see the trace's `is_error` flag otherwise)."""
    content = _text(message.get("content"))
    lines = [f"{TOOL_ERROR_MARK} {content}" if message.get("is_error") else content]
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        lines.append(f"[tool call] {function.get('name', '?')}({function.get('arguments', '')})")
    return ConversationMessage(role=str(message.get("role") or "unknown"), content="\n".join(x for x in lines if x))


def dataset_row(
    artifacts: RunArtifacts, *, ground_truth: int | None, task_id: str, rollout_id: str
) -> DatasetRow | None:
    """`conv_prefix` = the trace before the final assistant turn, `response` = that turn; None without one."""
    messages = artifacts.messages
    final = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"), None)
    if final is None:
        return None
    return DatasetRow(
        conv_prefix=[transcript_message(m) for m in messages[:final]],
        response=transcript_message(messages[final]),
        ground_truth=ground_truth,
        context=json.dumps({"task_id": task_id, "rollout_id": rollout_id}, sort_keys=True),
    )


_DATASET_ROLLOUT_COLUMNS = (
    "sweep_id",
    "rollout_id",
    "scenario_id",
    "task_id",
    "model_name",
    "status",
    "error_class",
    "artifacts_path",
)


def build_dataset_rows(warehouse: Warehouse, model_key: str, scenario_key: str, sweep_id: str) -> list[AssessmentRow]:
    """Rows for every finished rollout of the sweep in the partition that has a trace with an assistant turn.

    ground_truth: 1/0 from the latest verifier verdicts; 0 for a rollout the agent did not finish; null for a
    completed rollout not yet verified. Rollouts that ended in an error are left out: an endpoint outage or a
    broken verifier is nothing to judge.
    """
    where = {"model_key": model_key, "scenario_key": scenario_key, "sweep_id": sweep_id}
    rollouts = warehouse.partition_rows("rollouts", columns=_DATASET_ROLLOUT_COLUMNS, **where)
    # The scoring rule is the catalog's (`rollout_scores`), read here, never restated.
    scores = partition_scores(warehouse.root, **where)
    rows: list[AssessmentRow] = []
    skipped = 0
    for rollout in sorted(rollouts, key=lambda r: (r["task_id"], r["rollout_id"])):
        score = scores.get(rollout["rollout_id"])
        if rollout["status"] in ("pending", "running") or score is None or score.outcome == "error":
            continue
        path = rollout["artifacts_path"]
        if not path or not Path(path).is_file():
            skipped += 1
            continue
        artifacts = RunArtifacts.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
        label = None if score.reward is None else int(score.reward)
        row = dataset_row(artifacts, ground_truth=label, task_id=rollout["task_id"], rollout_id=rollout["rollout_id"])
        if row is None:
            skipped += 1
            continue
        ref = RolloutRef(
            sweep_id=rollout["sweep_id"],
            rollout_id=rollout["rollout_id"],
            scenario_id=rollout["scenario_id"],
            task_id=rollout["task_id"],
            model_name=rollout["model_name"],
            ground_truth=label,
        )
        rows.append(AssessmentRow(ref=ref, row=row))
    if skipped:
        logger.warning("%d rollout(s) of %s/%s have no trace with an assistant turn", skipped, model_key, scenario_key)
    return rows


def rows_digest(rows: Sequence[AssessmentRow]) -> str:
    """A content hash of dataset rows: the same rows upload once, however often the step runs."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(asdict(row.ref), sort_keys=True).encode())
        digest.update(row.row.model_dump_json().encode())
    return digest.hexdigest()


# --- judging on the platform --------------------------------------------------------------------------------


class AssessmentError(RuntimeError):
    """The platform's answer cannot be matched to the uploaded rows."""


@dataclass(frozen=True)
class JudgeSetup:
    """Which judges to create: backing models, name prefix and optional few-shot examples."""

    quality_model: str = DEFAULT_QUALITY_MODEL
    safety_model: str = DEFAULT_SAFETY_MODEL
    name_prefix: str = "eval-pipelines"
    conv_few_shot: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)

    def model_for(self, kind: str) -> str:
        return self.quality_model if kind == QUALITY else self.safety_model


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
    for kind in (QUALITY, SAFETY):
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

    def request() -> AssessRunRequest:
        return AssessRunRequest(
            dataset_id=uuid.UUID(dataset_id),
            space_id=uuid.UUID(space_id),
            judge_ids=[uuid.UUID(j.judge_id) for j in judges.values()],
            name=run_name,
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


def _table(spec: TableSpec, columns: Mapping[str, list[Any]]) -> pa.Table:
    table = pa.Table.from_pydict(dict(columns), schema=spec.schema)
    for schema_field, column in zip(spec.schema, table.columns, strict=True):
        # Arrow does not enforce nullability; Parquet readers reject nulls in a REQUIRED column.
        if not schema_field.nullable and column.null_count:
            raise ValueError(f"{spec.name}.{schema_field.name} is not nullable but got {column.null_count} null(s)")
    return table


def judgements_table(
    refs: Sequence[RolloutRef], outcome: AssessmentOutcome, *, judged_at: dt.datetime | None = None
) -> pa.Table:
    """`judgements` rows: one per rollout and judge; `refs` in upload order."""
    if len(refs) != len(outcome.verdicts):
        raise ValueError(f"{len(refs)} rows but {len(outcome.verdicts)} verdict sets")
    when = judged_at or dt.datetime.now(dt.UTC)
    columns: dict[str, list[Any]] = {name: [] for name in JUDGEMENTS.schema.names}
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
    return _table(JUDGEMENTS, columns)


def judgements_file_stem(setup: JudgeSetup, sweep_id: str) -> str:
    """One file per sweep and judge configuration: re-judging a sweep with the same models replaces its file,
    other models add one, and no sweep's file is touched by another sweep's judging."""
    raw = f"judges-{setup.quality_model}-{setup.safety_model}-{sweep_id}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw)


@dataclass(frozen=True)
class DatasetManifest:
    """What `assessment_dataset` uploaded, for `judgements`: the platform dataset and, in upload order, the
    rollouts behind its rows. Holds no secret (the platform's URL and token come from configuration)."""

    dataset_id: str
    space_id: str
    dataset_name: str
    rows: tuple[RolloutRef, ...]
    #: `rows_digest` of what was uploaded: a re-run with the same rows reuses the dataset instead of uploading.
    digest: str = ""

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {**asdict(self), "rows": [asdict(r) for r in self.rows]}
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(json.dumps(payload, indent=2), encoding="utf-8")
        os.replace(tmp, path)  # a reader sees the old manifest or the new one, never half of one
        return path

    @classmethod
    def load(cls, path: Path) -> DatasetManifest:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            dataset_id=data["dataset_id"],
            space_id=data["space_id"],
            dataset_name=data["dataset_name"],
            rows=tuple(RolloutRef(**r) for r in data["rows"]),
            digest=data.get("digest", ""),
        )


def manifest_path(root: Path, model_key: str, scenario_key: str, sweep_id: str) -> Path:
    """Where `assessment_dataset` leaves a sweep's manifest:
    `<root>/assessment/model=<m>/scenario=<s>/sweep=<id>/dataset.json`."""
    sweep = re.sub(r"[^A-Za-z0-9_.-]", "_", sweep_id)
    partition = root / "assessment" / hive_partition(model_key, scenario_key)
    return partition / f"sweep={sweep}" / "dataset.json"


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
    for kind in (QUALITY, SAFETY):
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


async def upload_partition(
    client: PlatformClient,
    warehouse: Warehouse,
    model_key: str,
    scenario_key: str,
    *,
    sweep_id: str,
    space_id: str,
    evaluation_type: str = "safety",
    previous: DatasetManifest | None = None,
) -> DatasetManifest | None:
    """The `assessment_dataset` step: rows from the sweep's verified rollouts in the partition, platform-uploaded,
    unless `previous` (the sweep's last manifest) uploaded the very same rows. None when there is no row."""
    rows = build_dataset_rows(warehouse, model_key, scenario_key, sweep_id)
    if not rows:
        return None
    digest = rows_digest(rows)
    if previous is not None and previous.digest == digest and previous.space_id == space_id:
        return previous
    name = f"{sweep_id}-{model_key}-{scenario_key}"
    upload = await client.upload_platform(
        [r.row for r in rows], dataset_name=name, space_id=space_id, evaluation_type=evaluation_type
    )
    if upload.data.rows != len(rows):
        raise AssessmentError(f"the platform stored {upload.data.rows} row(s), {len(rows)} were uploaded")
    return DatasetManifest(upload.data.dataset_id, space_id, name, tuple(r.ref for r in rows), digest)


@dataclass
class JudgeSummary:
    rows: int
    dataset_id: str | None
    judges: dict[str, KnownJudge]
    mean_scores: dict[str, float]
    table: pa.Table


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


# --- synthetic rows -----------------------------------------------------------------------------------------


def seed_examples(scenario: ScenarioFiles, limit: int = 3) -> list[dict[str, Any]]:
    """A scenario's seed examples for synthetic data: its first tasks as (instruction, reference answer) rows."""
    examples = []
    for task in list(scenario.tasks().values())[:limit]:
        examples.append(
            {
                "conv_prefix": [{"role": "user", "content": task.description}],
                "response": {"role": "assistant", "content": task.reference_answer or "Done."},
                "context": json.dumps({"task_id": task.task_id}, sort_keys=True),
            }
        )
    return examples


async def expand_synthetic(
    client: PlatformClient,
    examples: Sequence[Mapping[str, Any]],
    multiplier: int,
    prompt: str = DEFAULT_SYNTH_PROMPT,
    *,
    model_id: str = SIM_SYNTH_MODEL_ID,
) -> list[ParsedSyntheticRow]:
    return await client.generate_synthetic(
        SynthDataRequest(
            model_id=uuid.UUID(model_id), multiplier=multiplier, examples=[dict(e) for e in examples], prompt=prompt
        )
    )


def synthetic_rows_table(
    scenario_id: str,
    rows: Sequence[ParsedSyntheticRow],
    *,
    model_id: str,
    prompt: str,
    generated_at: dt.datetime | None = None,
) -> pa.Table:
    when = generated_at or dt.datetime.now(dt.UTC)
    columns: dict[str, list[Any]] = {
        "scenario_id": [scenario_id] * len(rows),
        "row_index": list(range(len(rows))),
        "model_id": [model_id] * len(rows),
        "prompt": [prompt] * len(rows),
        "original_json": [json.dumps(r.original, ensure_ascii=False, sort_keys=True) for r in rows],
        "generated_json": [json.dumps(r.data, ensure_ascii=False, sort_keys=True) for r in rows],
        "generated_at": [when] * len(rows),
    }
    return _table(SYNTHETIC_ROWS, columns)


# --- the pipeline's steps, synchronous (one per Dagster asset) -----------------------------------------------


@dataclass(frozen=True)
class AssessedPartition:
    """One model x scenario partition as the assessment steps see it: its warehouse rows, and the folder where
    the steps keep their manifests and known judges. `sweep_id` None means the partition's newest sweep."""

    data_dir: Path
    warehouse: Warehouse
    model_key: str
    scenario_key: str
    sweep_id: str | None = None

    def sweep(self) -> str | None:
        return self.sweep_id or self.warehouse.newest_sweep(model_key=self.model_key, scenario_key=self.scenario_key)

    def manifest_path(self, sweep_id: str) -> Path:
        return manifest_path(self.data_dir, self.model_key, self.scenario_key, sweep_id)


def assessment_dataset_step(target: PlatformTarget, partition: AssessedPartition) -> DatasetManifest | None:
    """Upload the sweep's verified rollouts of the partition as dataset rows, once per content, and keep the
    manifest for `judgements_step`."""
    sweep_id = partition.sweep()
    if sweep_id is None:
        return None
    path = partition.manifest_path(sweep_id)
    previous = DatasetManifest.load(path) if path.is_file() else None

    async def go() -> DatasetManifest | None:
        async with target.client() as client:
            return await upload_partition(
                client,
                partition.warehouse,
                partition.model_key,
                partition.scenario_key,
                sweep_id=sweep_id,
                space_id=target.space_id,
                previous=previous,
            )

    manifest = asyncio.run(go())
    if manifest is not None and manifest != previous:
        manifest.save(path)
    return manifest


def judgements_step(target: PlatformTarget, partition: AssessedPartition) -> JudgeSummary | None:
    """Judge the sweep's uploaded dataset (quality and safety) with the judges created before when they still
    exist, and write the sweep's `judgements` rows (its own file)."""
    sweep_id = partition.sweep()
    if sweep_id is None:
        return None
    path = partition.manifest_path(sweep_id)
    if not path.is_file():
        return None
    manifest = DatasetManifest.load(path)
    setup = JudgeSetup()
    known = judges_path(partition.data_dir)

    async def go() -> JudgeSummary:
        async with target.client() as client:
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


def synthetic_rows_step(
    target: PlatformTarget, warehouse: Warehouse, scenario: ScenarioFiles, multiplier: int = 4
) -> int:
    """Expand the scenario's seed examples with synthetic-data generation and write `synthetic_rows`."""
    examples = seed_examples(scenario)

    async def go() -> list[ParsedSyntheticRow]:
        async with target.client() as client:
            return await expand_synthetic(client, examples, multiplier)

    rows = asyncio.run(go())
    table = synthetic_rows_table(scenario.scenario_id, rows, model_id=SIM_SYNTH_MODEL_ID, prompt=DEFAULT_SYNTH_PROMPT)
    warehouse.write_scenario_table(
        "synthetic_rows", table, scenario_key=scenario.key, file_stem=f"synth-{SIM_SYNTH_MODEL_ID}"
    )
    return table.num_rows
