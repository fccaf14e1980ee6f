"""Spec 002: only an integer is a `ground_truth` label, so an explicit null in an uploaded row is the same 400 as a
string label, with the same detail; a row that leaves the key out still uploads without a label."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from eval_pipelines.schemas.platform import GROUND_TRUTH_ERROR
from tests.platform.conftest import BENIGN_ROW, HARMFUL_ROW, SPACE, Platform, launch_platform

UPLOADS = ("/api/v1/dataset/upload", "/api/v1/dataset/upload/platform")


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    shared = launch_platform(tmp_path_factory.mktemp("platform"))
    yield shared
    shared.server.stop()


def _upload(platform: Platform, path: str, rows: list[dict[str, Any]], name: str) -> httpx.Response:
    form = {"dataset_name": name, "space_id": SPACE}
    if path.endswith("/platform"):
        form["evaluation_type"] = "safety"
    return httpx.post(
        platform.url + path,
        headers={"Authorization": f"Bearer {platform.token}"},
        data=form,
        files={"file": ("rows.json", json.dumps(rows).encode(), "application/json")},
        timeout=30,
    )


@pytest.mark.parametrize("path", UPLOADS)
def test_a_null_ground_truth_is_400_with_the_label_detail(platform: Platform, path: str) -> None:
    response = _upload(platform, path, [BENIGN_ROW, {**HARMFUL_ROW, "ground_truth": None}], "null-label")
    assert response.status_code == 400
    assert response.json() == {"detail": GROUND_TRUTH_ERROR}


@pytest.mark.parametrize("path", UPLOADS)
def test_a_row_without_ground_truth_still_uploads_unlabelled(platform: Platform, path: str) -> None:
    unlabelled = {key: value for key, value in BENIGN_ROW.items() if key != "ground_truth"}
    response = _upload(platform, path, [unlabelled], "no-label")
    assert response.status_code == 200, response.text
    if path.endswith("/platform"):
        assert response.json()["data"]["rows"] == 1
    else:
        assert [row["ground_truth"] for row in response.json()] == [None]
