"""Bounded input on the assessment platform: a JSON upload nested 5,000 levels deep and oversized bodies get a
4xx with a JSON `detail` from both upload routes, never a plain-text 500."""

from __future__ import annotations

import httpx
import pytest

from tests.platform.conftest import SPACE, Platform

DEEP = ("[" * 5000 + "]" * 5000).encode()
DEEP_IN_A_ROW = ('[{"conv_prefix": [], "response": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}]").encode()


@pytest.mark.parametrize("route", ["/api/v1/dataset/upload", "/api/v1/dataset/upload/platform"])
@pytest.mark.parametrize("content", [DEEP, DEEP_IN_A_ROW], ids=["deep_array", "deep_row"])
def test_deeply_nested_json_is_a_4xx_with_detail(platform: Platform, route: str, content: bytes) -> None:
    answer = httpx.post(
        f"{platform.url}{route}",
        headers={"Authorization": f"Bearer {platform.token}"},
        files={"file": ("rows.json", content, "application/json")},
        data={"dataset_name": "deep", "space_id": SPACE},
        timeout=60,
    )
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:200])
    assert "deeper than" in str(answer.json()["detail"])


def test_an_oversized_request_is_413_with_detail(platform: Platform) -> None:
    answer = httpx.post(
        f"{platform.url}/api/v1/judge/create/sdk",
        headers={"Authorization": f"Bearer {platform.token}", "content-type": "application/json"},
        content=b'{"judge_name": "' + b"j" * (50 << 20) + b'"}',
        timeout=60,
    )
    assert answer.status_code == 413 and "larger than" in answer.json()["detail"]
