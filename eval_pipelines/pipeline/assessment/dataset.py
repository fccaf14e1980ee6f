"""Verified rollouts become assessment dataset rows: the conversation before the final answer, that answer,
and `ground_truth` from the warehouse's scoring rule; uploaded once per content, with a manifest kept per sweep."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eval_pipelines.clients.platform import (
    PlatformClient,
    PlatformTarget,
)
from eval_pipelines.schemas.artifacts import RunArtifacts, UnreadableArtifacts
from eval_pipelines.schemas.platform import (
    ConversationMessage,
    DatasetRow,
)
from eval_pipelines.warehouse.catalog import partition_scores
from eval_pipelines.warehouse.store import Warehouse, hive_partition

logger = logging.getLogger(__name__)


class AssessmentError(RuntimeError):
    """The platform's answer cannot be matched to the uploaded rows."""


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
        try:
            artifacts = RunArtifacts.load(path)
        except (OSError, UnreadableArtifacts) as exc:
            logger.warning("rollout %s is left out of the dataset: %s", rollout["rollout_id"], exc)
            skipped += 1
            continue
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


def judge_inputs_digest(rows: Sequence[AssessmentRow]) -> str:
    """A content hash of what the judges read: which rollouts, their conversations and responses, but not the
    `ground_truth` label, which the verifiers set. A verifier change relabels rows (they are uploaded again) but
    gives the judges nothing new to judge, so they are not asked again."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps([row.ref.sweep_id, row.ref.rollout_id]).encode())
        digest.update(row.row.model_dump_json(exclude={"ground_truth"}).encode())
    return digest.hexdigest()


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
    #: `judge_inputs_digest` of what was uploaded: the judgements are stale only when this changes.
    judge_inputs: str = ""

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
            judge_inputs=data.get("judge_inputs", ""),
        )


def manifest_path(root: Path, model_key: str, scenario_key: str, sweep_id: str) -> Path:
    """Where `assessment_dataset` leaves a sweep's manifest:
    `<root>/assessment/model=<m>/scenario=<s>/sweep=<id>/dataset.json`."""
    sweep = re.sub(r"[^A-Za-z0-9_.-]", "_", sweep_id)
    partition = root / "assessment" / hive_partition(model_key, scenario_key)
    return partition / f"sweep={sweep}" / "dataset.json"


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
    return DatasetManifest(
        upload.data.dataset_id, space_id, name, tuple(r.ref for r in rows), digest, judge_inputs_digest(rows)
    )


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
