"""Both local services over real HTTP on loopback, shared by the auth sweep and the platform fuzz."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.platform import PlatformSettings, TokenRegistry, create_platform_app
from eval_pipelines.service.api import create_app
from tests.platform.conftest import OTHER_SPACE, SPACE
from tests.service.eval_service_support import settings_for

#: Methods FastAPI/Starlette add on their own (HEAD with GET); not separate operations of the document.
IMPLICIT_METHODS = frozenset({"HEAD", "OPTIONS"})

Operation = tuple[str, str]


@dataclass
class Served:
    """A running service and its app (the app, to compare what it routes with what it documents)."""

    app: FastAPI
    server: BackgroundServer

    @property
    def url(self) -> str:
        return self.server.url


@dataclass
class ServedPlatform(Served):
    token: str
    other_token: str


@pytest.fixture(scope="module")
def eval_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    app = create_app(settings_for(tmp_path_factory.mktemp("eval-service")))
    with BackgroundServer(app) as server:
        yield Served(app, server)


@pytest.fixture(scope="module")
def platform_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedPlatform]:
    """The platform with two tokens: `token` granted SPACE, `other_token` granted OTHER_SPACE only."""
    token, other = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    settings = PlatformSettings(
        data_dir=tmp_path_factory.mktemp("platform"),
        tokens=TokenRegistry().with_token(token, SPACE).with_token(other, OTHER_SPACE),
        model_retry=RetryPolicy.for_llm(max_attempts=1),
    )
    app = create_platform_app(settings)
    with BackgroundServer(app) as server:
        yield ServedPlatform(app, server, token, other)


def served_openapi(base_url: str) -> dict[str, Any]:
    """The document the service serves (not app.openapi()): what a client or fuzzer actually sees."""
    response = httpx.get(f"{base_url}/openapi.json", timeout=30.0)
    response.raise_for_status()
    document: dict[str, Any] = response.json()
    return document


def document_operations(document: dict[str, Any]) -> set[Operation]:
    return {
        (method.upper(), path)
        for path, item in document.get("paths", {}).items()
        for method in item
        if method.upper() in {"GET", "POST", "PUT", "PATCH", "DELETE"}
    }


def app_operations(app: Any) -> set[Operation]:
    """Every (method, path) the ASGI app routes, documented or not."""
    operations: set[Operation] = set()
    for route in app.routes:
        for method in getattr(route, "methods", None) or ():
            if method not in IMPLICIT_METHODS:
                operations.add((method, route.path))
    return operations
