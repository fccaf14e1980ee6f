"""HostApp: each server under its own prefix, as a mount would serve it, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.toolservers.host import build_host_app
from eval_pipelines.toolservers.registry import BUILTIN_SERVERS


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    app = build_host_app({name: BUILTIN_SERVERS[name]() for name in ("email", "calendar")})
    with BackgroundServer(app) as server:
        yield server.url


def test_health_lists_the_servers(host: str) -> None:
    response = httpx.get(f"{host}/health")
    assert response.status_code == 200
    assert response.json() == {"status": "healthy", "servers": ["calendar", "email"]}


def test_each_server_answers_under_its_prefix_with_its_own_workspaces(host: str) -> None:
    created = httpx.post(f"{host}/email/workspaces", json={"seed": []})
    assert created.status_code == 201
    workspace = created.json()["path"]
    assert httpx.get(f"{host}/email{workspace}/health").json() == {"status": "healthy"}
    # The calendar server has workspaces of its own.
    assert httpx.get(f"{host}/calendar{workspace}/health").status_code == 404
    assert httpx.delete(f"{host}/email{workspace}").json()["deleted"] is True


def test_a_server_s_docs_point_at_its_own_schema(host: str) -> None:
    docs = httpx.get(f"{host}/email/docs")
    assert docs.status_code == 200 and "/email/openapi.json" in docs.text
    assert "/workspaces/{workspace_id}/step" in httpx.get(f"{host}/email/openapi.json").json()["paths"]


@pytest.mark.parametrize("path", ["/", "/nowhere", "/emailx/workspaces", "/health/more"])
def test_anything_else_is_a_json_404(host: str, path: str) -> None:
    response = httpx.get(f"{host}{path}")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not Found"}
