"""Deep links into the viewer (`eval-pipelines view`), for the CLI table, the HTML report and Dagster metadata.

The viewer is a local server the user starts, so a link names where it will answer: `EVAL_VIEWER_URL`, or the
default host and port of `eval-pipelines view`.
"""

from __future__ import annotations

import os
from urllib.parse import quote, urlencode

VIEWER_URL_ENV = "EVAL_VIEWER_URL"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def viewer_url() -> str:
    return (os.environ.get(VIEWER_URL_ENV) or f"http://{DEFAULT_HOST}:{DEFAULT_PORT}").rstrip("/")


def rollouts_link(sweep_id: str, *, model: str | None = None, scenario: str | None = None) -> str:
    """The rollout list of a sweep, narrowed to a model and a scenario when given."""
    query = {"sweep": sweep_id, "model": model, "scenario": scenario}
    return f"{viewer_url()}/rollouts?{urlencode({k: v for k, v in query.items() if v is not None})}"


def rollout_link(rollout_id: str) -> str:
    return f"{viewer_url()}/rollouts/{quote(rollout_id, safe='')}"
