from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.toolservers import EmailServer, create_app


@pytest.fixture(scope="module")
def email_url() -> Iterator[str]:
    with BackgroundServer(create_app(EmailServer())) as server:
        yield server.url


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as http:
        yield http
