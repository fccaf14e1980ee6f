"""Assessment platform (spec 002): datasets, judges, assessments, conversation judging, synthetic data."""

from __future__ import annotations

from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import (
    Field,
    SecretStr,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
)

from eval_pipelines.schemas._base import StrictModel, WireModel
from eval_pipelines.schemas.limits import MAX_MODEL_CONCURRENCY
from eval_pipelines.schemas.model_config import MAX_REQUEST_TIMEOUT_SECONDS

GROUND_TRUTH_ERROR = "invalid input for query argument"
DEFAULT_ROLL_DATA = True
DEFAULT_SKIP_CONTEXT_CHECK = False

#: The `model_id` of the simulated synthetic-data generator (a fixed UUID, since `model_id` must be one).
SIM_SYNTH_MODEL_ID = "db60fb6b-d2fc-5a5b-83d0-e200cd9db8a2"
QUALITY_MODELS = ("veritas", "veritas_nano")
SAFETY_MODELS = ("collinear_guard", "collinear_guard_nano")
FULL_SAFETY_GUARD_MODEL = "collinear_guard"
#: The local platform's judge calls in flight per assessment run, and one call's timeout (per HTTP attempt),
#: unless the run's request sets its own.
DEFAULT_JUDGE_CONCURRENCY = 8
DEFAULT_JUDGE_TIMEOUT_SECONDS = 60.0
#: A judge model's calls per verdict: an unreadable verdict is asked for once more.
MAX_VERDICT_ATTEMPTS = 2


class NanoModelType(StrEnum):
    PROMPT = "prompt"
    REFUSAL = "refusal"
    RESPONSE = "response"


#: The collinear SDK spells the nano types `prompt_evaluation` etc.; both spellings name the same type.
NANO_MODEL_TYPE_SUFFIX = "_evaluation"


class ConversationMessage(WireModel):
    role: str = Field(min_length=1)
    content: str


class DatasetRow(StrictModel):
    conv_prefix: list[ConversationMessage]
    response: ConversationMessage
    ground_truth: int | None = None
    context: str | None = None

    @field_validator("ground_truth", mode="before")
    @classmethod
    def _integer_label(cls, value: Any) -> Any:
        # Strings (even "1") are refused like the hosted platform does; bools are not integers here either.
        if value is None:
            return value
        if value == {} or value == []:
            # The collinear SDK sends `{}` for every row when no ground-truth column is named: no label.
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value not in (0, 1):
            raise ValueError(GROUND_TRUTH_ERROR)
        return value


class DatasetUploadResult(WireModel):
    """The general upload's answer: the deployed platform returns the stored rows with ids, the documented one
    `{dataset_id, message}`; whichever arrives fills this."""

    rows: list[StoredDatasetRow] = Field(default_factory=list)
    dataset_id: str | None = None
    message: str | None = None


class StoredDatasetRow(WireModel):
    id: str
    conv_prefix: list[ConversationMessage]
    response: ConversationMessage
    ground_truth: int | None = None
    context: str | None = None


class EligibleEvaluationTypes(WireModel):
    evaluation_types: list[str]


class PlatformUploadData(WireModel):
    dataset_id: str
    eligible_evaluation_types: EligibleEvaluationTypes
    rows: int


class PlatformUploadResponse(WireModel):
    message: str
    data: PlatformUploadData


class JudgeCreateRequest(StrictModel):
    judge_name: str = Field(min_length=1)
    space_id: UUID
    model_name: str = Field(min_length=1)
    nano_model_type: NanoModelType | None = None
    qa_few_shot: list[dict[str, Any]] | None = None
    nli_few_shot: list[dict[str, Any]] | None = None
    conv_few_shot: list[dict[str, Any]] | None = None
    rag_api_key: SecretStr | None = None
    rag_index: str | None = None
    rag_namespace: str | None = None
    rag_host: str | None = None
    rag_top_k: int | None = Field(default=None, ge=1)

    @field_validator("nano_model_type", mode="before")
    @classmethod
    def _sdk_spelling(cls, value: Any) -> Any:
        if isinstance(value, str) and value.endswith(NANO_MODEL_TYPE_SUFFIX):
            return value.removesuffix(NANO_MODEL_TYPE_SUFFIX)
        return value

    @field_serializer("rag_api_key", when_used="always")
    def _mask(self, value: SecretStr | None) -> str | None:
        return None if value is None else "**********"


class JudgeCreateResponse(WireModel):
    id: str


#: The local extensions of an assessment run's request, sent only when set.
ASSESS_RUN_EXTENSIONS = ("judge_timeout_seconds", "judge_max_concurrency")


class AssessRunRequest(StrictModel):
    dataset_id: UUID
    space_id: UUID
    judge_ids: list[UUID] = Field(min_length=1)
    name: str = Field(min_length=1)
    roll_data: bool = DEFAULT_ROLL_DATA
    #: local extension: the judge models' timeout of one HTTP attempt for this run (a call waiting for a slot
    #: has no clock running); absent keeps the platform's default.
    judge_timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_REQUEST_TIMEOUT_SECONDS)
    #: local extension: how many judge calls of this run are in flight at once; absent keeps the platform's default.
    judge_max_concurrency: int | None = Field(default=None, ge=1, le=MAX_MODEL_CONCURRENCY)

    @model_serializer(mode="wrap")
    def _extensions_only_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Unset, the request is the spec's body exactly, as a hosted platform or the collinear SDK knows it.
        data: dict[str, Any] = handler(self)
        for name in ASSESS_RUN_EXTENSIONS:
            if data.get(name) is None:
                data.pop(name, None)
        return data


class JudgeScore(WireModel):
    score: float
    rationale: str = ""
    #: the verdict's category; sent by the local platform, absent from the spec's example
    category: str | None = None


class EvaluationEntry(WireModel):
    conversation_scores: dict[str, JudgeScore]
    conversation_total_turns: int


class JudgeAggregate(WireModel):
    rows: int
    mean_score: float
    min_score: float
    max_score: float


class AssessRunData(WireModel):
    evaluation_result: list[EvaluationEntry]
    #: per judge name, when `roll_data` was true (local platform; the hosted one shows these in its dashboard)
    aggregate: dict[str, JudgeAggregate] | None = None
    evaluation_id: str | None = None


class AssessRunResponse(WireModel):
    message: str
    data: AssessRunData


class ConversationJudgeRequest(StrictModel):
    conversation_prefix: list[ConversationMessage]
    response: ConversationMessage
    space_id: UUID
    judge_id: UUID


class ConversationJudgement(WireModel):
    score: float
    category: str | None = None
    rationale: str = ""


class SynthDataRequest(StrictModel):
    model_id: UUID
    #: the collinear SDK adds its space to every body; when sent, the token must be granted it
    space_id: UUID | None = None
    multiplier: int = Field(ge=1)
    examples: list[dict[str, Any]] = Field(min_length=1)
    prompt: str = Field(min_length=1)


class SyntheticRow(WireModel):
    original: dict[str, Any]
    generated: str
