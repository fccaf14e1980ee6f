"""Verifier results (spec 001 leaves the field names open; these follow the hosted product)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from eval_pipelines.schemas._base import WireModel

RUBRIC_PASS_THRESHOLD = 0.6


class VerifierKind(StrEnum):
    PROGRAMMATIC = "programmatic"
    RUBRIC = "rubric"


class VerifierNeeds(StrEnum):
    """What a verifier reads: the trace only, or the stored tool-server state as well."""

    TRACE = "trace"
    STATE = "state"


class VerifierResult(WireModel):
    success: bool
    message: str = ""
    output: Any = ""
    reward: float | None = Field(default=None, ge=0.0, le=1.0)


class VerifierOutcome(WireModel):
    """One verifier's result on one rollout, as stored in `result.verifiers` and the `verifications` table."""

    module: str
    verifier_version: str
    kind: VerifierKind = VerifierKind.PROGRAMMATIC
    success: bool
    reward: float = Field(ge=0.0, le=1.0)
    message: str = ""
    output: Any = ""
    #: local extension: the verifier could not give a verdict (it crashed, exited, timed out or returned
    #: garbage). The rollout then ends in a `verifier` error: no verdict is not a negative verdict.
    is_error: bool = False


class JudgeVerdict(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    ERROR = "ERROR"
