"""Every spec-002 endpoint of the local platform, driven through PlatformClient over real HTTP.

One platform serves the whole module (starting one per test dominated the run time), so judge names get a
unique suffix.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from eval_pipelines.clients.platform import (
    PlatformAuthError,
    PlatformBadRequestError,
    PlatformClient,
    PlatformConflictError,
    PlatformForbiddenError,
    PlatformNotFoundError,
    PlatformValidationError,
)
from eval_pipelines.schemas.platform import (
    GROUND_TRUTH_ERROR,
    AssessRunRequest,
    ConversationJudgeRequest,
    ConversationMessage,
    JudgeCreateRequest,
    NanoModelType,
    SynthDataRequest,
)
from tests.platform.conftest import BENIGN_ROW, HARMFUL_ROW, OTHER_SPACE, SPACE, Platform, launch_platform

UPLOAD = "/api/v1/dataset/upload"


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    shared = launch_platform(tmp_path_factory.mktemp("platform"))
    yield shared
    shared.server.stop()


def _unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _judge(name: str, model: str = "veritas", space: str = SPACE, **extra: Any) -> JudgeCreateRequest:
    return JudgeCreateRequest(judge_name=_unique(name), space_id=uuid.UUID(space), model_name=model, **extra)


def _conversation(row: dict[str, Any], judge_id: str, space: str = SPACE) -> ConversationJudgeRequest:
    return ConversationJudgeRequest(
        conversation_prefix=[ConversationMessage(**m) for m in row["conv_prefix"]],
        response=ConversationMessage(**row["response"]),
        space_id=uuid.UUID(space),
        judge_id=uuid.UUID(judge_id),
    )


# --- datasets -------------------------------------------------------------------------------------------


async def test_general_upload_returns_each_row_with_a_generated_id(client: PlatformClient) -> None:
    result = await client.upload_dataset([BENIGN_ROW, HARMFUL_ROW], dataset_name="mixed", space_id=SPACE)
    assert len(result.rows) == 2
    assert len({r.id for r in result.rows}) == 2
    assert all(uuid.UUID(r.id) for r in result.rows)
    assert result.rows[0].response.content == BENIGN_ROW["response"]["content"]
    assert [r.ground_truth for r in result.rows] == [1, 0]
    assert [r.context for r in result.rows] == ["task-1", "task-2"]
    # Appending to the same dataset name gives the new rows their own ids.
    again = await client.upload_dataset([BENIGN_ROW], dataset_name="mixed", space_id=SPACE)
    assert len(again.rows) == 1 and again.rows[0].id not in {r.id for r in result.rows}


async def test_general_upload_accepts_csv_with_json_and_plain_text_cells(client: PlatformClient) -> None:
    prefix = json.dumps([{"role": "user", "content": 'Say "hi", please'}]).replace('"', '""')
    response_json = json.dumps({"role": "assistant", "content": "hi"}).replace('"', '""')
    csv_text = (
        "conv_prefix,response,ground_truth,context\n"
        f'"{prefix}","{response_json}",1,ctx-a\n'
        f'"{prefix}",plain answer text,0,\n'
        f'"{prefix}","multi, comma answer",,\n'
    )
    result = await client.upload_dataset(csv_text.encode(), dataset_name="csv", space_id=SPACE, filename="rows.csv")
    assert [r.response.content for r in result.rows] == ["hi", "plain answer text", "multi, comma answer"]
    assert all(r.response.role == "assistant" for r in result.rows)
    assert result.rows[0].conv_prefix[0].content == 'Say "hi", please'
    assert [r.ground_truth for r in result.rows] == [1, 0, None]
    assert [r.context for r in result.rows] == ["ctx-a", None, None]


@pytest.mark.parametrize("label", ["1", "yes", 1.0, True])
async def test_non_integer_ground_truth_is_400_with_the_exact_message(
    client: PlatformClient, platform: Platform, label: Any
) -> None:
    row = {**BENIGN_ROW, "ground_truth": label}
    with pytest.raises(PlatformBadRequestError) as caught:
        await client.upload_dataset([row], dataset_name="bad", space_id=SPACE)
    assert caught.value.status == 400
    assert caught.value.detail == GROUND_TRUTH_ERROR
    # The wire body is exactly the FastAPI shape with that message.
    raw = httpx.post(
        platform.url + UPLOAD,
        headers={"Authorization": f"Bearer {platform.token}"},
        data={"dataset_name": "bad", "space_id": SPACE},
        files={"file": ("rows.json", json.dumps([row]).encode(), "application/json")},
    )
    assert raw.status_code == 400 and raw.json() == {"detail": "invalid input for query argument"}


async def test_csv_string_ground_truth_is_the_same_400(client: PlatformClient) -> None:
    csv_text = 'conv_prefix,response,ground_truth\n"[]",ok,correct\n'
    with pytest.raises(PlatformBadRequestError) as caught:
        await client.upload_dataset(csv_text.encode(), dataset_name="bad", space_id=SPACE, filename="rows.csv")
    assert caught.value.detail == GROUND_TRUTH_ERROR


@pytest.mark.parametrize(
    ("csv_text", "expected"),
    [
        ('conv_prefix,response\n"[]",ok\n"[{bad json",ok\n', ["CSV row 2", "'conv_prefix'", "not valid JSON"]),
        ('conv_prefix,response\n"[]",ok,extra\n', ["CSV row 1", "3 field(s)", "header has 2"]),
        ('conv_prefix,response\n"[]","{""role"": ""assistant"", oops}"\n', ["CSV row 1", "'response'"]),
        ('conv_prefix,answer\n"[]",ok\n', ["missing column(s) ['response']", "unknown column(s) ['answer']"]),
        ('conv_prefix,response\n"[]","unterminated\n', ["CSV row 1", "malformed CSV"]),
    ],
)
async def test_malformed_csv_is_400_naming_the_row_and_column(
    client: PlatformClient, csv_text: str, expected: list[str]
) -> None:
    with pytest.raises(PlatformBadRequestError) as caught:
        await client.upload_dataset(csv_text.encode(), dataset_name="bad", space_id=SPACE, filename="rows.csv")
    assert caught.value.status == 400
    for fragment in expected:
        assert fragment in caught.value.detail


async def test_malformed_json_file_is_400(client: PlatformClient) -> None:
    with pytest.raises(PlatformBadRequestError, match="not valid JSON"):
        await client.upload_dataset(b'[{"conv_prefix": [', dataset_name="bad", space_id=SPACE)
    with pytest.raises(PlatformBadRequestError, match="JSON array"):
        await client.upload_dataset(b'{"rows": []}', dataset_name="bad", space_id=SPACE)


def test_missing_multipart_part_is_422_with_loc(platform: Platform) -> None:
    response = httpx.post(
        platform.url + UPLOAD,
        headers={"Authorization": f"Bearer {platform.token}"},
        data={"dataset_name": "no-file", "space_id": SPACE},
    )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert {"loc": ["body", "file"], "msg": "Field required", "type": "missing"} in detail
    assert all(set(item) == {"loc", "msg", "type"} for item in detail)

    no_space = httpx.post(
        platform.url + "/api/v1/dataset/upload/platform",
        headers={"Authorization": f"Bearer {platform.token}"},
        data={"dataset_name": "x"},
        files={"file": ("rows.json", b"[]", "application/json")},
    )
    assert no_space.status_code == 422
    assert ["body", "space_id"] in [item["loc"] for item in no_space.json()["detail"]]


async def test_row_that_does_not_validate_is_422_locating_the_row(client: PlatformClient) -> None:
    rows = [BENIGN_ROW, {"conv_prefix": [{"role": "user", "content": "hi"}]}]
    with pytest.raises(PlatformValidationError) as caught:
        await client.upload_dataset(rows, dataset_name="bad", space_id=SPACE)
    assert ("body", "file", "1", "response") in [issue.loc for issue in caught.value.issues]


async def test_platform_upload_returns_the_documented_object(client: PlatformClient) -> None:
    result = await client.upload_platform([BENIGN_ROW, HARMFUL_ROW], dataset_name="dash", space_id=SPACE)
    assert result.message == "Dataset uploaded successfully"
    assert uuid.UUID(result.data.dataset_id)
    assert result.data.rows == 2
    assert set(result.data.eligible_evaluation_types.evaluation_types) == {
        "safety",
        "quality",
        "performance",
        "grounding",
    }
    # Each platform upload is a new dataset, even under the same display name.
    second = await client.upload_platform([BENIGN_ROW], dataset_name="dash", space_id=SPACE)
    assert second.data.dataset_id != result.data.dataset_id and second.data.rows == 1


async def test_platform_upload_checks_eligibility_unless_skipped(client: PlatformClient) -> None:
    unlabelled = {k: v for k, v in BENIGN_ROW.items() if k != "ground_truth"}
    with pytest.raises(PlatformBadRequestError, match="row 1 is not eligible for evaluation_type 'performance'"):
        await client.upload_platform(
            [BENIGN_ROW, unlabelled], dataset_name="perf", space_id=SPACE, evaluation_type="performance"
        )
    skipped = await client.upload_platform(
        [BENIGN_ROW, unlabelled],
        dataset_name="perf",
        space_id=SPACE,
        evaluation_type="performance",
        skip_context_check=True,
    )
    assert skipped.data.rows == 2
    assert "performance" not in skipped.data.eligible_evaluation_types.evaluation_types
    with pytest.raises(PlatformValidationError) as caught:
        await client.upload_platform([BENIGN_ROW], dataset_name="x", space_id=SPACE, evaluation_type="vibes")
    assert caught.value.issues[0].loc == ("body", "evaluation_type")


# --- auth -----------------------------------------------------------------------------------------------


def test_missing_or_malformed_authorization_is_401(platform: Platform) -> None:
    for headers in ({}, {"Authorization": platform.token}, {"Authorization": "Basic abc"}):
        response = httpx.post(
            platform.url + "/api/v1/judge/create/sdk",
            headers=headers,
            json={"judge_name": "j", "space_id": SPACE, "model_name": "veritas"},
        )
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"] == "Bearer"
        assert isinstance(response.json()["detail"], str)


async def test_unknown_token_is_401_on_every_endpoint(platform: Platform) -> None:
    async with platform.client("tok-not-issued") as stranger:
        calls = [
            stranger.upload_dataset([BENIGN_ROW], dataset_name="d", space_id=SPACE),
            stranger.upload_platform([BENIGN_ROW], dataset_name="d", space_id=SPACE),
            stranger.create_judge(_judge("j")),
            stranger.judge_conversation(_conversation(BENIGN_ROW, str(uuid.uuid4()))),
            stranger.assess_run(
                AssessRunRequest(dataset_id=uuid.uuid4(), space_id=uuid.UUID(SPACE), judge_ids=[uuid.uuid4()], name="r")
            ),
            stranger.generate_synthetic(
                SynthDataRequest(model_id=uuid.uuid4(), multiplier=1, examples=[BENIGN_ROW], prompt="p")
            ),
        ]
        for call in calls:
            with pytest.raises(PlatformAuthError) as caught:
                await call
            assert caught.value.status == 401


async def test_token_used_for_another_space_is_403(platform: Platform, client: PlatformClient) -> None:
    upload = await client.upload_platform([BENIGN_ROW], dataset_name="mine", space_id=SPACE)
    judge = await client.create_judge(_judge("mine"))
    async with platform.client(platform.other_token) as other:
        calls = [
            other.upload_dataset([BENIGN_ROW], dataset_name="d", space_id=SPACE),
            other.upload_platform([BENIGN_ROW], dataset_name="d", space_id=SPACE),
            other.create_judge(_judge("j")),
            other.judge_conversation(_conversation(BENIGN_ROW, judge.id)),
            other.assess_run(
                AssessRunRequest(
                    dataset_id=uuid.UUID(upload.data.dataset_id),
                    space_id=uuid.UUID(SPACE),
                    judge_ids=[uuid.UUID(judge.id)],
                    name="r",
                )
            ),
        ]
        for call in calls:
            with pytest.raises(PlatformForbiddenError) as caught:
                await call
            assert caught.value.status == 403
        # In its own space the same token works, and cannot reach the first space's resources.
        own = await other.create_judge(_judge("theirs", space=OTHER_SPACE))
        with pytest.raises(PlatformNotFoundError):
            await other.assess_run(
                AssessRunRequest(
                    dataset_id=uuid.UUID(upload.data.dataset_id),
                    space_id=uuid.UUID(OTHER_SPACE),
                    judge_ids=[uuid.UUID(own.id)],
                    name="r",
                )
            )


# --- judges ---------------------------------------------------------------------------------------------


async def test_nano_model_type_is_refused_with_the_full_safety_guard_model(client: PlatformClient) -> None:
    with pytest.raises(PlatformValidationError) as caught:
        await client.create_judge(_judge("guard", "collinear_guard", nano_model_type=NanoModelType.PROMPT))
    assert caught.value.status == 422
    assert caught.value.issues[0].loc == ("body", "nano_model_type")
    assert "collinear_guard" in caught.value.issues[0].msg
    created = await client.create_judge(_judge("guard", "collinear_guard_nano", nano_model_type=NanoModelType.PROMPT))
    assert uuid.UUID(created.id)


async def test_duplicate_judge_name_is_409_within_a_space_only(platform: Platform, client: PlatformClient) -> None:
    first = _judge("same-name")
    await client.create_judge(first)
    with pytest.raises(PlatformConflictError) as caught:
        await client.create_judge(first.model_copy(update={"model_name": "collinear_guard"}))
    assert caught.value.status == 409 and first.judge_name in str(caught.value)
    async with platform.client(platform.other_token) as other:
        assert (await other.create_judge(first.model_copy(update={"space_id": uuid.UUID(OTHER_SPACE)}))).id


async def test_unknown_judge_model_is_422(client: PlatformClient) -> None:
    with pytest.raises(PlatformValidationError) as caught:
        await client.create_judge(_judge("j", "gpt-judge-9000"))
    assert caught.value.issues[0].loc == ("body", "model_name")
    assert "veritas" in caught.value.issues[0].msg


async def test_rag_fields_are_validated_and_the_key_never_comes_back(
    platform: Platform, client: PlatformClient
) -> None:
    with pytest.raises(PlatformValidationError) as caught:
        await client.create_judge(_judge("rag", rag_index="docs", rag_api_key=SecretStr("rag-key-1234567890")))
    assert [i.loc for i in caught.value.issues] == [("body", "rag_host")]
    with pytest.raises(PlatformValidationError):
        await client.create_judge(_judge("rag", rag_index="docs", rag_host="https://u:p@db.example", rag_top_k=3))
    with pytest.raises(PlatformValidationError) as top_k:
        await client.create_judge(_judge("rag", rag_index="docs", rag_host="db.example", rag_top_k=1000))
    assert top_k.value.issues[0].loc == ("body", "rag_top_k")

    raw = httpx.post(
        platform.url + "/api/v1/judge/create/sdk",
        headers={"Authorization": f"Bearer {platform.token}"},
        json={
            "judge_name": _unique("rag-ok"),
            "space_id": SPACE,
            "model_name": "veritas",
            "rag_api_key": "rag-key-1234567890",
            "rag_index": "docs",
            "rag_host": "https://index.example.io",
            "rag_namespace": "prod",
            "rag_top_k": 5,
        },
    )
    assert raw.status_code == 200
    assert set(raw.json()) == {"id"} and "rag-key" not in raw.text
    # A type error on the key is a 422 that does not echo the input.
    bad = httpx.post(
        platform.url + "/api/v1/judge/create/sdk",
        headers={"Authorization": f"Bearer {platform.token}"},
        json={"judge_name": "x", "space_id": SPACE, "model_name": "veritas", "rag_api_key": ["rag-key-1234567890"]},
    )
    assert bad.status_code == 422 and "rag-key" not in bad.text


async def test_safety_judge_scores_harmful_response_higher_than_benign(client: PlatformClient) -> None:
    guard = await client.create_judge(_judge("guard", "collinear_guard"))
    harmful = await client.judge_conversation(_conversation(HARMFUL_ROW, guard.id))
    benign = await client.judge_conversation(_conversation(BENIGN_ROW, guard.id))
    assert harmful.score > benign.score
    assert harmful.score >= 8 and benign.score <= 2
    assert harmful.category == "weapons" and benign.category is None
    assert harmful.rationale.startswith("[simulated]")
    assert float(harmful.score).is_integer() and 1 <= benign.score <= 10


async def test_quality_judge_prefers_a_done_task_over_a_refusal(client: PlatformClient) -> None:
    judge = await client.create_judge(_judge("quality"))
    done = await client.judge_conversation(_conversation(BENIGN_ROW, judge.id))
    refused = {**BENIGN_ROW, "response": {"role": "assistant", "content": "I am unable to complete this task."}}
    gave_up = await client.judge_conversation(_conversation(refused, judge.id))
    assert done.score > gave_up.score
    assert done.category == "helpful" and gave_up.category == "unhelpful"


async def test_nano_modes_judge_the_prompt_or_the_refusal(client: PlatformClient) -> None:
    refusal = {**HARMFUL_ROW, "response": {"role": "assistant", "content": "I can't help with that request."}}
    prompt_judge = await client.create_judge(_judge("p", "collinear_guard_nano", nano_model_type=NanoModelType.PROMPT))
    refusal_judge = await client.create_judge(
        _judge("r", "collinear_guard_nano", nano_model_type=NanoModelType.REFUSAL)
    )
    # The prompt is harmful whatever the answer; the refusal itself is the right behaviour.
    assert (await client.judge_conversation(_conversation(refusal, prompt_judge.id))).score >= 8
    assert (await client.judge_conversation(_conversation(refusal, refusal_judge.id))).score <= 2
    assert (await client.judge_conversation(_conversation(HARMFUL_ROW, refusal_judge.id))).score >= 8


async def test_conv_few_shot_examples_steer_the_judge(client: PlatformClient) -> None:
    pinned = await client.create_judge(
        _judge(
            "pinned",
            conv_few_shot=[{"response": BENIGN_ROW["response"]["content"], "score": 3, "rationale": "too terse"}],
        )
    )
    plain = await client.create_judge(_judge("plain"))
    assert (await client.judge_conversation(_conversation(BENIGN_ROW, pinned.id))).score == 3
    assert (await client.judge_conversation(_conversation(BENIGN_ROW, plain.id))).score != 3


async def test_judge_conversation_unknown_judge_is_404(client: PlatformClient) -> None:
    with pytest.raises(PlatformNotFoundError):
        await client.judge_conversation(_conversation(BENIGN_ROW, str(uuid.uuid4())))


# --- assessment runs ------------------------------------------------------------------------------------


async def test_assess_run_scores_every_row_with_every_judge(client: PlatformClient) -> None:
    three_turns = {
        **BENIGN_ROW,
        "conv_prefix": [
            {"role": "system", "content": "You are an email assistant."},
            *BENIGN_ROW["conv_prefix"],
            {"role": "tool", "content": "email sent"},
        ],
    }
    upload = await client.upload_platform([three_turns, HARMFUL_ROW], dataset_name="assess", space_id=SPACE)
    quality_request, safety_request = _judge("quality"), _judge("safety", "collinear_guard")
    quality = await client.create_judge(quality_request)
    safety = await client.create_judge(safety_request)
    q_name, s_name = quality_request.judge_name, safety_request.judge_name
    request = AssessRunRequest(
        dataset_id=uuid.UUID(upload.data.dataset_id),
        space_id=uuid.UUID(SPACE),
        judge_ids=[uuid.UUID(quality.id), uuid.UUID(safety.id)],
        name="nightly",
    )
    result = await client.assess_run(request)
    assert result.message == "Conversation evaluated"
    entries = result.data.evaluation_result
    assert len(entries) == 2
    assert all(set(e.conversation_scores) == {q_name, s_name} for e in entries)
    assert [e.conversation_total_turns for e in entries] == [4, 2]
    assert entries[1].conversation_scores[s_name].score > entries[0].conversation_scores[s_name].score
    assert entries[1].conversation_scores[s_name].category == "weapons"
    assert all(s.rationale.startswith("[simulated]") for e in entries for s in e.conversation_scores.values())
    aggregate = result.data.aggregate
    assert aggregate is not None and aggregate[s_name].rows == 2
    safety_scores = [e.conversation_scores[s_name].score for e in entries]
    assert aggregate[s_name].mean_score == pytest.approx(sum(safety_scores) / 2)
    assert aggregate[s_name].max_score == max(safety_scores)

    unrolled = await client.assess_run(request.model_copy(update={"roll_data": False}))
    assert unrolled.data.aggregate is None
    assert [e.conversation_scores[s_name].score for e in unrolled.data.evaluation_result] == safety_scores


async def test_assess_run_unknown_dataset_or_judge_is_404(client: PlatformClient) -> None:
    upload = await client.upload_platform([BENIGN_ROW], dataset_name="a", space_id=SPACE)
    judge = await client.create_judge(_judge("q"))
    with pytest.raises(PlatformNotFoundError, match="dataset"):
        await client.assess_run(
            AssessRunRequest(
                dataset_id=uuid.uuid4(), space_id=uuid.UUID(SPACE), judge_ids=[uuid.UUID(judge.id)], name="r"
            )
        )
    with pytest.raises(PlatformNotFoundError, match="judge"):
        await client.assess_run(
            AssessRunRequest(
                dataset_id=uuid.UUID(upload.data.dataset_id),
                space_id=uuid.UUID(SPACE),
                judge_ids=[uuid.UUID(judge.id), uuid.uuid4()],
                name="r",
            )
        )


def test_json_validation_errors_have_the_spec_shape(platform: Platform) -> None:
    response = httpx.post(
        platform.url + "/api/v1/dataset/assess/run",
        headers={"Authorization": f"Bearer {platform.token}"},
        json={"dataset_id": "not-a-uuid", "space_id": SPACE, "judge_ids": [], "name": "r", "extra": 1},
    )
    assert response.status_code == 422
    detail = response.json()["detail"]
    locs = [item["loc"] for item in detail]
    assert ["body", "dataset_id"] in locs and ["body", "judge_ids"] in locs and ["body", "extra"] in locs
    for item in detail:
        assert set(item) == {"loc", "msg", "type"}
        assert all(isinstance(part, str) for part in item["loc"])


async def test_datasets_and_judges_survive_a_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    data_dir = tmp_path_factory.mktemp("durable")
    first = launch_platform(data_dir)
    try:
        async with first.client() as client:
            upload = await client.upload_platform([BENIGN_ROW, HARMFUL_ROW], dataset_name="kept", space_id=SPACE)
            judge = await client.create_judge(_judge("kept", "collinear_guard"))
    finally:
        first.server.stop()
    second = launch_platform(data_dir)  # new process state, new tokens for the same space
    try:
        async with second.client() as client:
            result = await client.assess_run(
                AssessRunRequest(
                    dataset_id=uuid.UUID(upload.data.dataset_id),
                    space_id=uuid.UUID(SPACE),
                    judge_ids=[uuid.UUID(judge.id)],
                    name="after-restart",
                )
            )
    finally:
        second.server.stop()
    scores = [next(iter(e.conversation_scores.values())).score for e in result.data.evaluation_result]
    assert len(scores) == 2 and scores[1] > scores[0]
