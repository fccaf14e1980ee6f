"""Reading dataset files (a JSON array of rows, or CSV) into validated `DatasetRow`s.

CSV columns: `conv_prefix` (JSON text of a message list), `response` (JSON text of a message, or plain text,
which becomes an assistant message), `ground_truth` (`0`, `1` or empty), `context` (text, optional).

Errors carry the HTTP status the endpoint answers with: 400 for an unreadable file (naming row and column) and
for a non-integer `ground_truth`, null included (exactly `invalid input for query argument`), 422 with
FastAPI-shaped items for rows that parse but do not validate.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from eval_pipelines.lib.json_values import text_nests_deeper_than
from eval_pipelines.schemas.limits import MAX_JSON_DEPTH
from eval_pipelines.schemas.platform import GROUND_TRUTH_ERROR, DatasetRow

CSV_COLUMNS = ("conv_prefix", "response", "ground_truth", "context")
REQUIRED_CSV_COLUMNS = ("conv_prefix", "response")
MAX_REPORTED_ERRORS = 50

#: Evaluation types of the local platform and what every row needs for each (`skip_context_check` skips this).
EVALUATION_TYPE_REQUIREMENTS: dict[str, str] = {
    "safety": "conv_prefix and response",
    "quality": "conv_prefix and response",
    "performance": "an integer ground_truth",
    "grounding": "a non-empty context",
}


@dataclass
class DatasetFileError(Exception):
    """A 400 (string detail) or 422 (list of {loc, msg, type}) about an uploaded file."""

    status: int
    detail: str | list[dict[str, Any]]

    def __str__(self) -> str:
        return str(self.detail)


def _is_csv(content: bytes, filename: str | None, content_type: str | None) -> bool:
    name = (filename or "").lower()
    kind = (content_type or "").lower()
    if name.endswith(".csv") or "csv" in kind:
        return True
    if name.endswith(".json") or "json" in kind:
        return False
    return not content.lstrip().startswith(b"[")


def _decode(content: bytes) -> str:
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetFileError(400, f"file is not UTF-8 text (byte {exc.start})") from None


def _loads(text: str, where: str) -> Any:
    """JSON text parsed, or a 400 naming the problem: invalid, or nested past MAX_JSON_DEPTH (which would exhaust
    the parser's or the validator's stack)."""
    if text_nests_deeper_than(text, MAX_JSON_DEPTH):
        raise DatasetFileError(400, f"{where} nests JSON deeper than {MAX_JSON_DEPTH} levels")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetFileError(
            400, f"{where} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    return data


def parse_json_rows(content: bytes) -> list[Any]:
    text = _decode(content)
    data = _loads(text, "file")
    if not isinstance(data, list):
        raise DatasetFileError(400, f"file must hold a JSON array of rows, not a JSON {type(data).__name__}")
    return data


def _csv_cell_json(value: str, where: str, column: str) -> Any:
    return _loads(value, f"{where}, column '{column}'")


def parse_csv_rows(content: bytes) -> list[dict[str, Any]]:
    reader = csv.reader(io.StringIO(_decode(content), newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise DatasetFileError(400, f"CSV header (line 1) is malformed: {exc}") from None
    if header is None:
        raise DatasetFileError(400, "CSV file is empty; expected a header row with conv_prefix,response")
    columns = [c.strip() for c in header]
    unknown = [c for c in columns if c not in CSV_COLUMNS]
    missing = [c for c in REQUIRED_CSV_COLUMNS if c not in columns]
    if unknown or missing:
        problems = []
        if missing:
            problems.append(f"missing column(s) {missing}")
        if unknown:
            problems.append(f"unknown column(s) {unknown}")
        raise DatasetFileError(400, f"CSV header: {'; '.join(problems)}; expected columns {list(CSV_COLUMNS)}")
    if len(set(columns)) != len(columns):
        raise DatasetFileError(400, "CSV header: a column is repeated")
    rows: list[dict[str, Any]] = []
    index = 0
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise DatasetFileError(
                400, f"CSV row {index + 1} (line {reader.line_num}): malformed CSV ({exc})"
            ) from None
        if not any(cell.strip() for cell in cells):
            continue  # blank lines, e.g. a trailing newline
        index += 1
        where = f"CSV row {index} (line {reader.line_num})"
        if len(cells) != len(columns):
            raise DatasetFileError(400, f"{where}: has {len(cells)} field(s), the header has {len(columns)}")
        record = dict(zip(columns, cells, strict=True))
        row: dict[str, Any] = {"conv_prefix": _csv_cell_json(record["conv_prefix"], where, "conv_prefix")}
        response = record["response"]
        stripped = response.strip()
        row["response"] = (
            _csv_cell_json(response, where, "response")
            if stripped.startswith("{")
            else {"role": "assistant", "content": response}
        )
        label = record.get("ground_truth", "").strip()
        if label:
            # CSV cells are text: only an integer literal is an integer label; anything else is the string case.
            row["ground_truth"] = int(label) if label.lstrip("-").isdigit() else label
        context = record.get("context", "")
        if context != "":
            row["context"] = context
        rows.append(row)
    return rows


def parse_rows_file(content: bytes, filename: str | None, content_type: str | None) -> list[Any]:
    return parse_csv_rows(content) if _is_csv(content, filename, content_type) else parse_json_rows(content)


def validate_rows(raw_rows: Sequence[Any], *, loc_prefix: Sequence[str] = ("body", "file")) -> list[DatasetRow]:
    """Every row as a DatasetRow; a bad ground_truth anywhere is the 400, other problems a 422 listing all."""
    rows: list[DatasetRow] = []
    issues: list[dict[str, Any]] = []
    label_error = False
    for index, raw in enumerate(raw_rows):
        if not isinstance(raw, Mapping):
            issues.append(
                {"loc": [*loc_prefix, str(index)], "msg": "each row must be a JSON object", "type": "model_type"}
            )
            continue
        if "ground_truth" in raw and raw["ground_truth"] is None:
            # Only an integer is a label (spec 002); a row without one leaves the key out (as CSV's empty cell
            # does), so null is refused like any other non-integer rather than read as "no label".
            label_error = True
            continue
        try:
            rows.append(DatasetRow.model_validate(raw))
        except ValidationError as exc:
            for error in exc.errors():
                if error["loc"][:1] == ("ground_truth",):
                    label_error = True
                issues.append(
                    {
                        "loc": [*loc_prefix, str(index), *(str(p) for p in error["loc"])],
                        "msg": error["msg"],
                        "type": error["type"],
                    }
                )
    if label_error:
        raise DatasetFileError(400, GROUND_TRUTH_ERROR)
    if issues:
        raise DatasetFileError(422, issues[:MAX_REPORTED_ERRORS])
    return rows


def eligible_evaluation_types(rows: Sequence[DatasetRow]) -> list[str]:
    """The evaluation types every row qualifies for."""
    eligible = ["safety", "quality"]
    if rows and all(r.ground_truth is not None for r in rows):
        eligible.append("performance")
    if rows and all(r.context and r.context.strip() for r in rows):
        eligible.append("grounding")
    return eligible


def first_ineligible_row(rows: Sequence[DatasetRow], evaluation_type: str) -> int | None:
    for index, row in enumerate(rows):
        if evaluation_type == "performance" and row.ground_truth is None:
            return index
        if evaluation_type == "grounding" and not (row.context and row.context.strip()):
            return index
    return None
