"""Durable store of the local assessment platform (SQLite, WAL): spaces, datasets and their rows, judges,
evaluation runs and synthetic-data jobs.

Same conventions as the run store: one connection per thread, `begin immediate` transactions, idempotent DDL.
No secret is ever written: judges keep their RAG settings but only whether a RAG key was given, and tokens
never reach this layer.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipelines.lib.sqlite import SqliteDatabase
from eval_pipelines.schemas._base import utc_now_iso
from eval_pipelines.schemas.platform import ConversationMessage, DatasetRow, StoredDatasetRow

SCHEMA = """
create table if not exists spaces (
    space_id text primary key,
    created_at text not null
);
create table if not exists datasets (
    dataset_id text primary key,
    space_id text not null references spaces(space_id),
    name text not null,
    origin text not null check (origin in ('upload', 'platform')),
    evaluation_type text,
    created_at text not null
);
-- The general upload creates or appends by name; platform uploads always make a new dataset.
create unique index if not exists datasets_upload_name on datasets(space_id, name) where origin = 'upload';
create table if not exists dataset_rows (
    row_id text primary key,
    dataset_id text not null references datasets(dataset_id) on delete cascade,
    position integer not null,
    conv_prefix_json text not null,
    response_json text not null,
    ground_truth integer,
    context text,
    created_at text not null,
    unique (dataset_id, position)
);
create table if not exists judges (
    judge_id text primary key,
    space_id text not null references spaces(space_id),
    judge_name text not null,
    model_name text not null,
    kind text not null,
    nano_model_type text,
    qa_few_shot_json text,
    nli_few_shot_json text,
    conv_few_shot_json text,
    rag_index text,
    rag_namespace text,
    rag_host text,
    rag_top_k integer,
    rag_api_key_set integer not null default 0,
    created_at text not null,
    unique (space_id, judge_name)
);
create table if not exists evaluation_runs (
    evaluation_id text primary key,
    space_id text not null references spaces(space_id),
    dataset_id text not null references datasets(dataset_id),
    name text not null,
    judge_ids_json text not null,
    roll_data integer not null,
    created_at text not null,
    result_json text not null
);
create table if not exists synth_jobs (
    job_id text primary key,
    model_id text not null,
    multiplier integer not null,
    examples integer not null,
    prompt text not null,
    status text not null,
    target_rows integer not null,
    generated_rows integer not null default 0,
    created_at text not null,
    completed_at text
);
create table if not exists synth_rows (
    job_id text not null references synth_jobs(job_id) on delete cascade,
    position integer not null,
    original_json text not null,
    generated text not null,
    primary key (job_id, position)
);
"""


class DuplicateJudgeName(ValueError):
    def __init__(self, judge_name: str) -> None:
        super().__init__(f"a judge named {judge_name!r} already exists in this space")
        self.judge_name = judge_name


@dataclass(frozen=True)
class Dataset:
    dataset_id: str
    space_id: str
    name: str
    origin: str
    evaluation_type: str | None
    created_at: str


@dataclass(frozen=True)
class RagSettings:
    index: str | None
    namespace: str | None
    host: str | None
    top_k: int | None
    api_key_set: bool


@dataclass(frozen=True)
class JudgeRecord:
    judge_id: str
    space_id: str
    judge_name: str
    model_name: str
    kind: str
    nano_model_type: str | None
    qa_few_shot: list[dict[str, Any]] | None
    nli_few_shot: list[dict[str, Any]] | None
    conv_few_shot: list[dict[str, Any]] | None
    rag: RagSettings | None
    created_at: str

    def few_shots(self) -> dict[str, list[dict[str, Any]]]:
        shots = {
            "qa_few_shot": self.qa_few_shot,
            "nli_few_shot": self.nli_few_shot,
            "conv_few_shot": self.conv_few_shot,
        }
        return {name: list(items) for name, items in shots.items() if items}


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _loads_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class PlatformStore(SqliteDatabase):
    def __init__(self, path: Path) -> None:
        super().__init__(path, SCHEMA)

    @staticmethod
    def _ensure_space(db: sqlite3.Connection, space_id: str, now: str) -> None:
        db.execute("insert or ignore into spaces values (?, ?)", (space_id, now))

    # -- datasets ---------------------------------------------------------------------------------------
    def add_rows(
        self,
        *,
        space_id: str,
        dataset_name: str,
        rows: Sequence[DatasetRow],
        origin: str,
        evaluation_type: str | None = None,
    ) -> tuple[Dataset, list[StoredDatasetRow]]:
        """Append rows to the space's `upload` dataset of that name (creating it), or for `platform` uploads to
        a new dataset. Returns the dataset and the stored rows with their generated ids, in upload order."""
        now = utc_now_iso()
        with self._tx() as db:
            self._ensure_space(db, space_id, now)
            found = None
            if origin == "upload":
                found = db.execute(
                    "select * from datasets where space_id = ? and name = ? and origin = 'upload'",
                    (space_id, dataset_name),
                ).fetchone()
            if found is None:
                dataset = Dataset(str(uuid.uuid4()), space_id, dataset_name, origin, evaluation_type, now)
                db.execute(
                    "insert into datasets values (?, ?, ?, ?, ?, ?)",
                    (dataset.dataset_id, space_id, dataset_name, origin, evaluation_type, now),
                )
            else:
                dataset = self._dataset_from_row(found)
            start = int(
                db.execute(
                    "select coalesce(max(position), -1) + 1 from dataset_rows where dataset_id = ?",
                    (dataset.dataset_id,),
                ).fetchone()[0]
            )
            stored: list[StoredDatasetRow] = []
            for offset, row in enumerate(rows):
                row_id = str(uuid.uuid4())
                prefix = [m.model_dump(mode="json") for m in row.conv_prefix]
                response = row.response.model_dump(mode="json")
                db.execute(
                    "insert into dataset_rows values (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        row_id,
                        dataset.dataset_id,
                        start + offset,
                        json.dumps(prefix, ensure_ascii=False),
                        json.dumps(response, ensure_ascii=False),
                        row.ground_truth,
                        row.context,
                        now,
                    ),
                )
                stored.append(
                    StoredDatasetRow(
                        id=row_id,
                        conv_prefix=row.conv_prefix,
                        response=row.response,
                        ground_truth=row.ground_truth,
                        context=row.context,
                    )
                )
        return dataset, stored

    @staticmethod
    def _dataset_from_row(row: sqlite3.Row) -> Dataset:
        return Dataset(
            row["dataset_id"], row["space_id"], row["name"], row["origin"], row["evaluation_type"], row["created_at"]
        )

    def get_dataset(self, space_id: str, dataset_id: str) -> Dataset | None:
        row = (
            self._conn()
            .execute("select * from datasets where dataset_id = ? and space_id = ?", (dataset_id, space_id))
            .fetchone()
        )
        return None if row is None else self._dataset_from_row(row)

    def dataset_rows(self, dataset_id: str) -> list[StoredDatasetRow]:
        rows = self._conn().execute("select * from dataset_rows where dataset_id = ? order by position", (dataset_id,))
        return [
            StoredDatasetRow(
                id=r["row_id"],
                conv_prefix=[ConversationMessage.model_validate(m) for m in json.loads(r["conv_prefix_json"])],
                response=ConversationMessage.model_validate_json(r["response_json"]),
                ground_truth=r["ground_truth"],
                context=r["context"],
            )
            for r in rows
        ]

    # -- judges -----------------------------------------------------------------------------------------
    def create_judge(self, judge: JudgeRecord) -> None:
        rag = judge.rag
        with self._tx() as db:
            self._ensure_space(db, judge.space_id, judge.created_at)
            taken = db.execute(
                "select 1 from judges where space_id = ? and judge_name = ?", (judge.space_id, judge.judge_name)
            ).fetchone()
            if taken is not None:
                raise DuplicateJudgeName(judge.judge_name)
            db.execute(
                "insert into judges values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    judge.judge_id,
                    judge.space_id,
                    judge.judge_name,
                    judge.model_name,
                    judge.kind,
                    judge.nano_model_type,
                    _json_or_none(judge.qa_few_shot),
                    _json_or_none(judge.nli_few_shot),
                    _json_or_none(judge.conv_few_shot),
                    rag.index if rag else None,
                    rag.namespace if rag else None,
                    rag.host if rag else None,
                    rag.top_k if rag else None,
                    int(bool(rag and rag.api_key_set)),
                    judge.created_at,
                ),
            )

    def get_judge(self, space_id: str, judge_id: str) -> JudgeRecord | None:
        row = (
            self._conn()
            .execute("select * from judges where judge_id = ? and space_id = ?", (judge_id, space_id))
            .fetchone()
        )
        if row is None:
            return None
        has_rag = any(row[c] is not None for c in ("rag_index", "rag_namespace", "rag_host", "rag_top_k"))
        rag = (
            RagSettings(
                row["rag_index"], row["rag_namespace"], row["rag_host"], row["rag_top_k"], bool(row["rag_api_key_set"])
            )
            if has_rag or row["rag_api_key_set"]
            else None
        )
        return JudgeRecord(
            judge_id=row["judge_id"],
            space_id=row["space_id"],
            judge_name=row["judge_name"],
            model_name=row["model_name"],
            kind=row["kind"],
            nano_model_type=row["nano_model_type"],
            qa_few_shot=_loads_or_none(row["qa_few_shot_json"]),
            nli_few_shot=_loads_or_none(row["nli_few_shot_json"]),
            conv_few_shot=_loads_or_none(row["conv_few_shot_json"]),
            rag=rag,
            created_at=row["created_at"],
        )

    # -- evaluation runs --------------------------------------------------------------------------------
    def record_evaluation(
        self,
        *,
        space_id: str,
        dataset_id: str,
        name: str,
        judge_ids: Sequence[str],
        roll_data: bool,
        result: dict[str, Any],
    ) -> str:
        evaluation_id = str(uuid.uuid4())
        with self._tx() as db:
            db.execute(
                "insert into evaluation_runs values (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    evaluation_id,
                    space_id,
                    dataset_id,
                    name,
                    json.dumps(list(judge_ids)),
                    int(roll_data),
                    utc_now_iso(),
                    json.dumps(result, ensure_ascii=False),
                ),
            )
        return evaluation_id

    def get_evaluation(self, evaluation_id: str) -> dict[str, Any] | None:
        row = self._conn().execute("select * from evaluation_runs where evaluation_id = ?", (evaluation_id,)).fetchone()
        if row is None:
            return None
        return {
            "evaluation_id": row["evaluation_id"],
            "space_id": row["space_id"],
            "dataset_id": row["dataset_id"],
            "name": row["name"],
            "judge_ids": json.loads(row["judge_ids_json"]),
            "roll_data": bool(row["roll_data"]),
            "created_at": row["created_at"],
            "result": json.loads(row["result_json"]),
        }

    # -- synthetic-data jobs ----------------------------------------------------------------------------
    def start_synth_job(self, *, model_id: str, multiplier: int, examples: int, prompt: str) -> str:
        job_id = str(uuid.uuid4())
        with self._tx() as db:
            db.execute(
                "insert into synth_jobs (job_id, model_id, multiplier, examples, prompt, status, target_rows,"
                " created_at) values (?, ?, ?, ?, ?, 'running', ?, ?)",
                (job_id, model_id, multiplier, examples, prompt, multiplier * examples, utc_now_iso()),
            )
        return job_id

    def add_synth_row(self, job_id: str, position: int, original: dict[str, Any], generated: str) -> None:
        with self._tx() as db:
            db.execute(
                "insert into synth_rows values (?, ?, ?, ?)",
                (job_id, position, json.dumps(original, ensure_ascii=False), generated),
            )
            db.execute("update synth_jobs set generated_rows = generated_rows + 1 where job_id = ?", (job_id,))

    def finish_synth_job(self, job_id: str, status: str) -> None:
        with self._tx() as db:
            db.execute(
                "update synth_jobs set status = ?, completed_at = ? where job_id = ?", (status, utc_now_iso(), job_id)
            )

    def synth_job(self, job_id: str) -> dict[str, Any] | None:
        row = self._conn().execute("select * from synth_jobs where job_id = ?", (job_id,)).fetchone()
        return None if row is None else dict(row)
