"""`POST /telemetry/cli-events`: the SimLab CLI's telemetry, at the hosted product's path (no `/v1`).

SimLab posts every event from a background thread with a 2 s timeout and reads no answer; `simlab feedback`
sends nothing else. So the feedback event is kept where the service's operator reads it (the data directory's
`service/feedback.jsonl`, one JSON object a line, the message's credentials redacted, rotated at a size), and
every other event is accepted and dropped. Any known key may send events: feedback changes nothing here, so a
read-only key's user may send it too. A client opts out on its side (`SIMLAB_DISABLE_TELEMETRY=1`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request, Security
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from eval_pipelines.lib.json_values import text_nests_deeper_than, without_lone_surrogates
from eval_pipelines.lib.redact import REDACTED, redact_text
from eval_pipelines.schemas._base import utc_now_iso
from eval_pipelines.schemas.service_wire import (
    FEEDBACK_CONTEXT_KEYS,
    FEEDBACK_EVENT,
    MAX_CLI_EVENT_BYTES,
    MAX_CLI_EVENT_DEPTH,
    MAX_FEEDBACK_CONTEXT_CHARS,
    MAX_FEEDBACK_LOG_BYTES,
    CliEvent,
    CliEventAccepted,
    FeedbackRecord,
)
from eval_pipelines.service.auth import API_KEY_HEADER, ApiKeyRegistry
from eval_pipelines.service.layout import feedback_log_path
from eval_pipelines.service.responses import error_doc
from eval_pipelines.service.state import API_KEY_SCHEME, service_of

logger = logging.getLogger(__name__)

router = APIRouter()

#: Tokens shaped like the credentials people paste by mistake (provider keys, GitHub and Slack tokens, AWS key
#: ids): a feedback message is free text, and the log is read by people who must not learn them.
_CREDENTIAL_SHAPES = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bAKIA[0-9A-Z]{16}\b"
    r"|\bAIza[0-9A-Za-z_-]{30,}|\bhf_[A-Za-z0-9]{20,}|\bBearer\s+[A-Za-z0-9._~+/=-]{12,}"
)
#: Where an API key of the service's could start and end: keys hold no whitespace, ':' or ','; and, as `name=key`
#: is how a key is often pasted, around an '=' too (looked up both ways, as a key may hold one).
_KEY_BOUNDARIES = (re.compile(r"[\s:,]+"), re.compile(r"[\s:,=]+"))
#: What may stand around a key pasted into prose (quotes, brackets, a full stop).
_AROUND_A_WORD = "\"'`()[]{}<>.;!?"
#: FastAPI's validation error body, which the route's own checks answer with too.
_VALIDATION_ERRORS = {
    "type": "object",
    "required": ["detail"],
    "properties": {"detail": {"type": "array", "items": {"type": "object"}}},
}
#: Appends and rotations of the feedback log, one at a time (the routes run on a thread pool).
_LOG_LOCK = threading.Lock()


async def known_key(request: Request, api_key: Annotated[str | None, Security(API_KEY_SCHEME)]) -> str:
    """The caller's key, which must be known (401 otherwise); a read-only key is enough."""
    if service_of(request).settings.api_keys.permission(api_key) is None or api_key is None:
        raise HTTPException(
            status_code=401,
            detail=f"missing or invalid API key (send it in the {API_KEY_HEADER} header)",
            headers={"WWW-Authenticate": API_KEY_HEADER},
        )
    return api_key


CallerKey = Annotated[str, Security(known_key)]


@router.post(
    "/telemetry/cli-events",
    response_model=CliEventAccepted,
    status_code=202,
    tags=["telemetry"],
    responses={
        401: error_doc("missing or unknown API key"),
        413: error_doc(f"the body is over {MAX_CLI_EVENT_BYTES} bytes"),
        422: {
            "description": "not one event `{event, properties}` within the limits (`detail`: loc, msg, type)",
            "content": {"application/json": {"schema": _VALIDATION_ERRORS}},
        },
    },
    summary="SimLab CLI event (feedback is kept, the rest dropped)",
    # The body is read by hand, so its size is bounded before it is parsed; documented here for clients.
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": CliEvent.model_json_schema()}}}
    },
)
async def post_cli_event(request: Request, api_key: CallerKey) -> CliEventAccepted:
    event = _event(await _bounded_body(request))
    if event.event != FEEDBACK_EVENT:
        return CliEventAccepted(stored=False)
    message = event.properties.get("message")
    if not isinstance(message, str) or not message.strip():
        raise _invalid(["body", "properties", "message"], "a feedback event needs a non-empty message")
    keys = service_of(request).settings.api_keys
    record = FeedbackRecord(
        received_at=utc_now_iso(),
        message=_scrubbed(message.strip(), api_key, keys),
        context={
            key: _scrubbed(value, api_key, keys)[:MAX_FEEDBACK_CONTEXT_CHARS]
            for key in FEEDBACK_CONTEXT_KEYS
            if isinstance(value := event.properties.get(key), str) and value
        },
    )
    await asyncio.to_thread(_append, feedback_log_path(service_of(request).settings.data_dir), record)
    logger.info("feedback from the SimLab CLI stored (%d characters)", len(record.message))
    return CliEventAccepted(stored=True)


async def _bounded_body(request: Request) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_CLI_EVENT_BYTES:
        raise HTTPException(status_code=413, detail=f"a telemetry event is at most {MAX_CLI_EVENT_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_CLI_EVENT_BYTES:
            raise HTTPException(status_code=413, detail=f"a telemetry event is at most {MAX_CLI_EVENT_BYTES} bytes")
    return bytes(body)


def _event(body: bytes) -> CliEvent:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid(["body"], "the request body is not UTF-8") from None
    if text_nests_deeper_than(text, MAX_CLI_EVENT_DEPTH):
        raise _invalid(["body"], f"the event nests deeper than {MAX_CLI_EVENT_DEPTH} levels")
    try:
        raw: Any = without_lone_surrogates(json.loads(text))
    except ValueError:
        raise _invalid(["body"], "the request body is not valid JSON") from None
    try:
        return CliEvent.model_validate(raw)
    except ValidationError as exc:
        errors = [{"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        raise RequestValidationError(errors) from None


def _invalid(loc: list[str], message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": loc, "msg": message, "type": "value_error"}])


def _scrubbed(text: str, api_key: str, keys: ApiKeyRegistry) -> str:
    """Free text as the feedback log may keep it: the sender's own key, any other key of the service's (a read-only
    key's user may paste the write key), credential-shaped tokens and URL credentials replaced."""
    text = text.replace(api_key, REDACTED)
    for word in {w.strip(_AROUND_A_WORD) for boundaries in _KEY_BOUNDARIES for w in boundaries.split(text)}:
        if word and keys.permission(word) is not None:
            text = text.replace(word, REDACTED)
    return _CREDENTIAL_SHAPES.sub(REDACTED, redact_text(text))


def _append(path: Path, record: FeedbackRecord) -> None:
    line = (record.model_dump_json() + "\n").encode("utf-8")
    with _LOG_LOCK:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file() and path.stat().st_size + len(line) > MAX_FEEDBACK_LOG_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
        # Only the operator reads it: the messages are the users' words.
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(descriptor, "ab") as log:
            log.write(line)
