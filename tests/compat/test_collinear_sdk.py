"""The collinear SDK 0.1.34, unmodified, against `eval-pipelines serve platform` (spec 002).

Each flow runs in the SDK's own venv; a raise inside the SDK (its pydantic checks included) fails the test.
The SDK reads no environment and hard-codes its host, so `collinear_flows.py` sets each service's base URL.
"""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import HERE, PlatformUnderTest, client_venv, describe, run_client

pytestmark = pytest.mark.slow


def run_flow(platform: PlatformUnderTest, flow: str, cwd: Path) -> Any:
    python = client_venv("collinear") / "python"
    env = {"PLATFORM_URL": platform.url, "PLATFORM_TOKEN": platform.token, "PLATFORM_SPACE_ID": platform.space_id}
    result = run_client([str(python), str(HERE / "collinear_flows.py"), flow], env, cwd)
    assert result.returncode == 0, describe(result)
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_upload_hands_back_the_dataset_id_and_rows(platform: PlatformUnderTest, tmp_path: Path) -> None:
    out = run_flow(platform, "upload", tmp_path)
    labelled, unlabelled = out["labelled"], out["unlabelled"]
    assert str(uuid.UUID(labelled["dataset_id"])) == labelled["dataset_id"]
    assert labelled["dataset_id"] != unlabelled["dataset_id"]
    assert [row["ground_truth"] for row in labelled["dataset"]] == [1, 0]
    assert [row["context"] for row in labelled["dataset"]] == ["help-center", "safety"]
    assert all(row["id"] for row in labelled["dataset"])
    # no ground-truth column: the SDK sends `{}` per row, which is no label
    assert [row["ground_truth"] for row in unlabelled["dataset"]] == [None, None]


def test_the_four_judge_kinds_are_created(platform: PlatformUnderTest, tmp_path: Path) -> None:
    out = run_flow(platform, "judges", tmp_path)
    assert set(out) == {"veritas", "veritas_nano", "collinear_guard", "collinear_guard_nano"}
    ids = [judge["id"] for judge in out.values()]
    assert len(set(ids)) == 4 and all(str(uuid.UUID(judge_id)) == judge_id for judge_id in ids)


def test_an_assessment_scores_every_row_with_every_judge(platform: PlatformUnderTest, tmp_path: Path) -> None:
    out = run_flow(platform, "assess", tmp_path)
    batches = out["batches"]
    # the SDK swallows a failed batch: four judges are two batches of at most three, each answered
    assert len(batches) == math.ceil(len(out["judge_ids"]) / 3) == 2
    first, second = (batch["evaluation_result"] for batch in batches)
    assert len(first) == len(second) == 2
    assert [len(entry["conversation_scores"]) for entry in first + second] == [3, 3, 1, 1]
    scores = [s for entry in first + second for s in entry["conversation_scores"].values()]
    assert all(isinstance(s["score"], int | float) and s["rationale"] for s in scores)


def test_one_conversation_is_judged(platform: PlatformUnderTest, tmp_path: Path) -> None:
    out = run_flow(platform, "judge_conversation", tmp_path)
    verdict = out["judgements"]["guard"]
    assert isinstance(verdict["score"], int | float) and verdict["rationale"]
    # the harmful answer scores as concerning (higher is more concerning on the safety scale)
    assert verdict["score"] > 5


def test_synthetic_rows_come_back_as_a_frame(platform: PlatformUnderTest, tmp_path: Path) -> None:
    out = run_flow(platform, "synthetic", tmp_path)
    assert {"original", "generated"} <= set(out["columns"])
    assert len(out["rows"]) == 3
    assert all(row["original"]["response"]["content"] == "Yes, until the order ships." for row in out["rows"])
    assert all(isinstance(row["generated"], str) and row["generated"] for row in out["rows"])
