"""The local assessment platform (spec 002) as a FastAPI app: datasets, judges, assessment runs, conversation
judging and synthetic data, with a durable store and Bearer-token auth on every endpoint.

Status codes where the spec is silent: 401 missing/invalid token, 403 token not granted the space, 404 dataset
or judge not in the space, 409 duplicate judge name, 413 file too large, 422 validation (detail: a list of
{loc, msg, type}, loc as strings), 502 the judge/generator model failed, 503 a model is not usable (e.g. its key
variable is unset). Request validation errors never echo the input, so a secret sent in a bad body stays out
of the response.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

from fastapi import Depends, FastAPI, File, Form, HTTPException, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from eval_pipelines.lib.body_limit import BodyLimit
from eval_pipelines.llm.errors import LLMError
from eval_pipelines.platform.auth import Principal, authenticator
from eval_pipelines.platform.config import PlatformSettings
from eval_pipelines.platform.datasets import (
    EVALUATION_TYPE_REQUIREMENTS,
    DatasetFileError,
    eligible_evaluation_types,
    first_ineligible_row,
    parse_json_rows,
    parse_rows_file,
    validate_rows,
)
from eval_pipelines.platform.judges import Verdict, VerdictError, run_judge
from eval_pipelines.platform.models import ModelKind, ModelRouter, ModelUnavailable
from eval_pipelines.platform.store import DuplicateJudgeName, JudgeRecord, PlatformStore, RagSettings
from eval_pipelines.platform.synth import generate_rows
from eval_pipelines.schemas._base import utc_now_iso
from eval_pipelines.schemas.limits import MAX_PLATFORM_REQUEST_BYTES
from eval_pipelines.schemas.platform import (
    FULL_SAFETY_GUARD_MODEL,
    AssessRunRequest,
    ConversationJudgeRequest,
    ConversationMessage,
    EligibleEvaluationTypes,
    JudgeCreateRequest,
    JudgeCreateResponse,
    PlatformUploadData,
    PlatformUploadResponse,
    StoredDatasetRow,
    SynthDataRequest,
)

logger = logging.getLogger(__name__)

API = "/api/v1"
UPLOAD_MESSAGE = "Dataset uploaded successfully"
ASSESS_MESSAGE = "Conversation evaluated"
MAX_FEW_SHOT_EXAMPLES = 50
MAX_RAG_TOP_K = 100
_HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:\d{1,5})?$")
_URL = re.compile(r"^https?://[^\s/@]+(/\S*)?$", re.IGNORECASE)


_ERROR_DESCRIPTIONS = {
    400: "Unparseable body or file, non-integer ground_truth (`invalid input for query argument`), ineligible rows",
    401: "Missing or invalid bearer token",
    403: "The token is not granted this space",
    404: "Dataset or judge not found in the space",
    409: "A judge with this name exists in the space",
    413: "File too large",
    502: "The judge or generator model failed",
    503: "The model is not usable (e.g. its key variable is unset)",
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries of the error statuses a route can answer (all share the `{detail}` body)."""
    return {code: {"description": _ERROR_DESCRIPTIONS[code]} for code in sorted({400, 401, *codes})}


def _issue(loc: Sequence[str], msg: str, type_: str = "value_error") -> dict[str, Any]:
    return {"loc": [str(p) for p in loc], "msg": msg, "type": type_}


def _unprocessable(*issues: dict[str, Any]) -> HTTPException:
    return HTTPException(status_code=422, detail=list(issues))


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
            issues.append(_issue(("body", name), f"{name} is required when any rag_* field is set", "missing"))
    host = (body.rag_host or "").strip()
    if host and not (_URL.match(host) or _HOSTNAME.match(host)):
        issues.append(
            _issue(("body", "rag_host"), "rag_host must be an http(s) URL or a host name, without credentials")
        )
    if body.rag_top_k is not None and body.rag_top_k > MAX_RAG_TOP_K:
        issues.append(_issue(("body", "rag_top_k"), f"rag_top_k must be at most {MAX_RAG_TOP_K}"))
    if body.rag_api_key is not None and not body.rag_api_key.get_secret_value().strip():
        issues.append(_issue(("body", "rag_api_key"), "rag_api_key must not be empty"))
    if issues:
        raise _unprocessable(*issues)
    return RagSettings(
        index=(body.rag_index or "").strip() or None,
        namespace=body.rag_namespace,
        host=host or None,
        top_k=body.rag_top_k,
        api_key_set=body.rag_api_key is not None,
    )


def _wire_score(score: float) -> float | int:
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


def create_platform_app(settings: PlatformSettings) -> FastAPI:
    store = PlatformStore(settings.store_path)
    router = ModelRouter(
        settings.models,
        timeout_seconds=settings.model_timeout_seconds,
        retry=settings.model_retry,
        max_concurrency=settings.judge_concurrency,
    )
    authenticate = authenticator(settings.tokens)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await router.aclose()
        store.close()

    app = FastAPI(title="eval_pipelines assessment platform (local)", lifespan=lifespan)
    # Form fields and multipart framing ride with an upload's file: give them a margin over the file's limit.
    upload_limit = max(settings.max_upload_bytes, MAX_PLATFORM_REQUEST_BYTES) + (1 << 20)
    app.add_middleware(
        BodyLimit, max_bytes=MAX_PLATFORM_REQUEST_BYTES, larger=[(f"{API}/dataset/upload", upload_limit)]
    )

    @app.exception_handler(RequestValidationError)
    async def validation_failed(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Only loc/msg/type: FastAPI's default also echoes `input`, which could be a secret (rag_api_key).
        detail = [_issue(e.get("loc", ()), str(e.get("msg", "")), str(e.get("type", ""))) for e in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": detail})

    async def verdict(
        judge: JudgeRecord, prefix: Sequence[ConversationMessage], response: ConversationMessage, where: str = ""
    ) -> Verdict:
        subject = f"judge {judge.judge_name!r} (model {judge.model_name!r})"
        try:
            return await run_judge(router, judge, prefix, response)
        except ModelUnavailable as exc:
            raise HTTPException(status_code=503, detail=f"{subject} is not usable: {exc}") from None
        except (LLMError, VerdictError) as exc:
            raise HTTPException(status_code=502, detail=f"{subject} failed{where}: {exc}") from None

    async def read_upload(file: UploadFile) -> bytes:
        content = await file.read(settings.max_upload_bytes + 1)
        if len(content) > settings.max_upload_bytes:
            raise HTTPException(status_code=413, detail=f"file is larger than {settings.max_upload_bytes} bytes")
        return content

    def file_error(exc: DatasetFileError) -> HTTPException:
        return HTTPException(status_code=exc.status, detail=exc.detail)

    @app.get("/health", include_in_schema=False)
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.post(f"{API}/dataset/upload", response_model=list[StoredDatasetRow], responses=_errors(403, 413))
    async def upload_dataset(
        file: UploadFile = File(..., description="JSON array of rows, or CSV"),
        dataset_name: str = Form(..., min_length=1),
        space_id: UUID = Form(...),
        principal: Principal = Depends(authenticate),
    ) -> list[StoredDatasetRow]:
        space = principal.require_space(space_id)
        content = await read_upload(file)
        try:
            # Off the event loop: a large file takes a while to parse and validate.
            rows = await run_in_threadpool(
                lambda: validate_rows(parse_rows_file(content, file.filename, file.content_type))
            )
        except DatasetFileError as exc:
            raise file_error(exc) from None
        dataset, stored = await run_in_threadpool(
            lambda: store.add_rows(space_id=space, dataset_name=dataset_name, rows=rows, origin="upload")
        )
        logger.info("dataset %s (%r): %d row(s) appended", dataset.dataset_id, dataset.name, len(stored))
        return stored

    @app.post(f"{API}/dataset/upload/platform", response_model=PlatformUploadResponse, responses=_errors(403, 413))
    async def upload_platform(
        file: UploadFile = File(..., description="JSON array of rows (application/json)"),
        dataset_name: str = Form(..., min_length=1),
        space_id: UUID = Form(...),
        evaluation_type: str | None = Form(None),
        skip_context_check: bool = Form(False),
        principal: Principal = Depends(authenticate),
    ) -> PlatformUploadResponse:
        space = principal.require_space(space_id)
        kind = (evaluation_type or "").strip() or None
        if kind is not None and kind not in EVALUATION_TYPE_REQUIREMENTS:
            raise _unprocessable(
                _issue(
                    ("body", "evaluation_type"),
                    f"unknown evaluation_type {kind!r}; known: {sorted(EVALUATION_TYPE_REQUIREMENTS)}",
                )
            )
        content = await read_upload(file)
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
            lambda: store.add_rows(
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

    @app.post(f"{API}/judge/create/sdk", response_model=JudgeCreateResponse, responses=_errors(403, 409))
    async def create_judge(
        body: JudgeCreateRequest, principal: Principal = Depends(authenticate)
    ) -> JudgeCreateResponse:
        space = principal.require_space(body.space_id)
        entry = settings.models.get(body.model_name)
        if entry is None or entry.kind not in (ModelKind.QUALITY, ModelKind.SAFETY):
            known = settings.models.names(ModelKind.QUALITY) + settings.models.names(ModelKind.SAFETY)
            raise _unprocessable(
                _issue(("body", "model_name"), f"unknown judge model {body.model_name!r}; known: {sorted(known)}")
            )
        if body.nano_model_type is not None:
            if body.model_name == FULL_SAFETY_GUARD_MODEL:
                raise _unprocessable(
                    _issue(
                        ("body", "nano_model_type"),
                        f"nano_model_type is not supported by the full safety guard model "
                        f"{FULL_SAFETY_GUARD_MODEL!r}; use a nano guard model such as 'collinear_guard_nano'",
                    )
                )
            if entry.kind != ModelKind.SAFETY:
                raise _unprocessable(
                    _issue(("body", "nano_model_type"), "nano_model_type applies to safety guard models only")
                )
        issues = [
            _issue(("body", name), f"at most {MAX_FEW_SHOT_EXAMPLES} few-shot examples")
            for name in ("qa_few_shot", "nli_few_shot", "conv_few_shot")
            if len(getattr(body, name) or []) > MAX_FEW_SHOT_EXAMPLES
        ]
        if issues:
            raise _unprocessable(*issues)
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
            await run_in_threadpool(store.create_judge, judge)
        except DuplicateJudgeName as exc:
            raise HTTPException(status_code=409, detail=str(exc)) from None
        logger.info("judge %s (%r) created on model %s", judge.judge_id, judge.judge_name, judge.model_name)
        return JudgeCreateResponse(id=judge.judge_id)

    async def find_judge(space: str, judge_id: UUID) -> JudgeRecord:
        judge = await run_in_threadpool(store.get_judge, space, str(judge_id))
        if judge is None:
            raise HTTPException(status_code=404, detail=f"judge {judge_id} not found in space {space}")
        return judge

    @app.post(f"{API}/judge/conversation", response_model=None, responses=_errors(403, 404, 502, 503))
    async def judge_conversation(
        body: ConversationJudgeRequest, principal: Principal = Depends(authenticate)
    ) -> dict[str, Any]:
        space = principal.require_space(body.space_id)
        judge = await find_judge(space, body.judge_id)
        result = await verdict(judge, body.conversation_prefix, body.response)
        return {"score": _wire_score(result.score), "category": result.category, "rationale": result.rationale}

    @app.post(f"{API}/dataset/assess/run", responses=_errors(403, 404, 502, 503))
    async def assess_run(body: AssessRunRequest, principal: Principal = Depends(authenticate)) -> dict[str, Any]:
        space = principal.require_space(body.space_id)
        dataset = await run_in_threadpool(store.get_dataset, space, str(body.dataset_id))
        if dataset is None:
            raise HTTPException(status_code=404, detail=f"dataset {body.dataset_id} not found in space {space}")
        judges = [await find_judge(space, judge_id) for judge_id in dict.fromkeys(body.judge_ids)]
        rows = await run_in_threadpool(store.dataset_rows, dataset.dataset_id)
        semaphore = asyncio.Semaphore(settings.judge_concurrency)

        async def score(index: int, row: StoredDatasetRow, judge: JudgeRecord) -> Verdict:
            async with semaphore:
                return await verdict(judge, row.conv_prefix, row.response, where=f" on row {index}")

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
                            "score": _wire_score(v.score),
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
            lambda: store.record_evaluation(
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

    @app.post(f"{API}/synth_data/generate", dependencies=[Depends(authenticate)], responses=_errors(503))
    async def synth_generate(body: SynthDataRequest) -> StreamingResponse:
        # Any valid token may generate: the request names no space, and nothing is stored in one.
        model_id = str(body.model_id)
        entry = settings.models.get(model_id)
        if entry is None or entry.kind != ModelKind.GENERATOR:
            raise _unprocessable(
                _issue(
                    ("body", "model_id"),
                    f"unknown generator model_id {model_id}; known: {settings.models.names(ModelKind.GENERATOR)}",
                )
            )
        try:
            router.check_available(model_id)
        except ModelUnavailable as exc:
            raise HTTPException(status_code=503, detail=f"generator {model_id} is not usable: {exc}") from None
        target = len(body.examples) * body.multiplier
        if target > settings.max_synth_rows:
            raise _unprocessable(
                _issue(
                    ("body", "multiplier"),
                    f"len(examples) x multiplier = {target} exceeds this platform's limit of {settings.max_synth_rows}",
                )
            )
        job_id = await run_in_threadpool(
            lambda: store.start_synth_job(
                model_id=model_id, multiplier=body.multiplier, examples=len(body.examples), prompt=body.prompt
            )
        )

        async def stream() -> AsyncIterator[bytes]:
            # Each row is its own chunk, written as soon as it is ready; the body is one JSON array in the end.
            status, written = "failed", 0
            try:
                yield b"["
                async for row in generate_rows(
                    router,
                    model_id,
                    examples=body.examples,
                    multiplier=body.multiplier,
                    prompt=body.prompt,
                    concurrency=settings.judge_concurrency,
                ):
                    item: dict[str, Any] = {"original": row.original, "generated": row.generated}
                    if entry.is_simulated:
                        item["simulated"] = True
                    yield (b"," if written else b"") + json.dumps(item, ensure_ascii=False).encode("utf-8")
                    written += 1
                    await run_in_threadpool(store.add_synth_row, job_id, row.position, row.original, row.generated)
                yield b"]"
                status = "completed" if written == target else "partial"
            finally:
                # Synchronous on purpose: after a client disconnect this runs in a cancelled task.
                store.finish_synth_job(job_id, status)
                logger.info("synthetic job %s: %d of %d row(s), %s", job_id, written, target, status)

        return StreamingResponse(
            stream(),
            media_type="application/json",
            headers={"X-Synth-Job-Id": job_id, "X-Synth-Target-Rows": str(target)},
        )

    return app
