"""json_content / response_json: the hot paths' JSON, as httpx's `json=` and `Response.json()` would have it."""

from __future__ import annotations

import json

import httpx
import pytest

from eval_pipelines.lib.json_http import json_content, response_json


def test_a_body_is_sent_as_json_bytes_with_its_content_type() -> None:
    body = {"seed": [{"to": "ä@x.test", "n": 1, "ok": True, "none": None}]}
    request = httpx.Request("POST", "http://x.test/", **json_content(body))
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == body


def test_none_sends_no_body() -> None:
    assert json_content(None) == {}
    assert httpx.Request("GET", "http://x.test/", **json_content(None)).content == b""


def test_a_response_reads_as_json_and_anything_else_is_a_value_error() -> None:
    assert response_json(httpx.Response(200, content=b'{"a": [1, 2.5, "\\u00e4"]}')) == {"a": [1, 2.5, "ä"]}
    for body in (b"", b"<html>", b'{"a": 1'):
        with pytest.raises(ValueError):
            response_json(httpx.Response(200, content=body))
