"""JSON bodies of the hot paths' requests and responses, by pydantic's compiled encoder and parser: httpx's
`json=` and `Response.json()` run the standard library's, a visible share of a rollout's CPU."""

from __future__ import annotations

from typing import Any

import httpx
import pydantic_core

JSON_CONTENT = {"Content-Type": "application/json"}


def json_content(value: Any) -> dict[str, Any]:
    """`client.request(method, url, **json_content(body))`: the body as JSON bytes with its content type, or
    no body at all for None (as httpx's `json=None`)."""
    if value is None:
        return {}
    return {"content": pydantic_core.to_json(value), "headers": JSON_CONTENT}


def response_json(response: httpx.Response) -> Any:
    """The response's body as JSON; `ValueError` when it is not JSON."""
    return pydantic_core.from_json(response.content)
