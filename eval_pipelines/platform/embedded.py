"""The local platform served in-process on a loopback port: the pipeline's offline default.

The token is made per process and lives only in memory; the space id is fixed, so every run of the pipeline on
one data directory lands in the same local space.
"""

from __future__ import annotations

import secrets
import threading
import uuid
from pathlib import Path
from types import TracebackType

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.platform.app import create_platform_app
from eval_pipelines.platform.auth import TokenRegistry
from eval_pipelines.platform.config import PlatformSettings
from eval_pipelines.platform.models import ModelRegistry

#: The space of the embedded platform (the same on every machine; it only names a folder of local data).
LOCAL_SPACE_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "eval_pipelines:local-space"))


class EmbeddedPlatform:
    """`with EmbeddedPlatform(data_dir) as p: PlatformClient(p.url, p.token)`; `p.space_id` is granted."""

    def __init__(self, data_dir: Path, *, models: ModelRegistry | None = None) -> None:
        self.space_id = LOCAL_SPACE_ID
        self._token = secrets.token_urlsafe(32)
        settings = PlatformSettings(
            data_dir=data_dir,
            tokens=TokenRegistry().with_token(self._token, self.space_id),
            models=models or ModelRegistry.from_env(),
        )
        self._server = BackgroundServer(create_platform_app(settings))
        self._lock = threading.Lock()
        self._started = False

    @property
    def token(self) -> str:
        return self._token

    @property
    def url(self) -> str:
        return self._server.url

    def start(self) -> EmbeddedPlatform:
        with self._lock:
            if not self._started:
                self._server.start()
                self._started = True
        return self

    def stop(self) -> None:
        with self._lock:
            if self._started:
                self._server.stop()
                self._started = False

    def __repr__(self) -> str:
        return f"EmbeddedPlatform(url={self.url!r}, space_id={self.space_id!r}, token='**********')"

    def __enter__(self) -> EmbeddedPlatform:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
