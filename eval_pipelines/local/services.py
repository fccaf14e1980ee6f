"""The embedded default: the local evaluation service (spec 000) and assessment platform (spec 002) on loopback
ports, reached through the same clients as hosted ones.

The pipeline never calls the service's store or executor: it sends `POST /runs` and polls `GET /runs/{id}` over
HTTP, exactly as against a remote service, so the default path proves the client code a hosted deployment runs.
Loopback was chosen over an in-process ASGI transport because the service executes runs on its own event loop
between requests (a launch returns before the rollouts run), which an ASGI transport only drives while a request
is in flight; the cost of the loopback hop is measured in `benchmarks/dagster_overhead.py`.

The API key is made per process and lives only in memory. One process starts the service once and shares it:
every holder (a Dagster run's resource, the CLI's whole sweep) takes a reference, and the last one to let go stops
it, so a sweep of many partitions in one process pays the start-up once.
"""

from __future__ import annotations

import os
import secrets
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.clients.evaluation import EvaluationClient, EvaluationClientSync
from eval_pipelines.clients.platform import PLATFORM_SPACE_ENV, PLATFORM_TOKEN_ENV, PLATFORM_URL_ENV, PlatformTarget
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.platform.embedded import EmbeddedPlatform
from eval_pipelines.platform.models import ModelRegistry
from eval_pipelines.service.api import create_app
from eval_pipelines.service.auth import ApiKeyRegistry, Permission
from eval_pipelines.service.layout import service_paths, stored_rollout_artifacts
from eval_pipelines.service.settings import ServiceSettings

#: How often the pipeline polls the local service for progress: a loopback request costs well under a
#: millisecond, and a partition's steps wait on it.
LOCAL_POLL_SECONDS = 0.2
#: How long a stopping local service lets active rollouts finish. Short: whoever stops it while a run is active
#: (a step in its own process, under a multi-process executor) leaves the run to the next holder, whose wait
#: resumes what was interrupted.
LOCAL_DRAIN_SECONDS = 1.0


@dataclass
class LocalEvaluationService:
    """The local service on a loopback port with a key of this process's own. The key never leaves memory."""

    data_dir: Path
    scenarios_dir: Path
    key: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)

    def __post_init__(self) -> None:
        settings = ServiceSettings(
            data_dir=self.data_dir,
            api_keys=ApiKeyRegistry({self.key: Permission.WRITE}),
            scenarios_dir=self.scenarios_dir,
            drain_seconds=LOCAL_DRAIN_SECONDS,
        )
        self._server = BackgroundServer(create_app(settings))

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def artifacts_dir(self) -> Path:
        return service_paths(self.data_dir)[1]

    def start(self) -> LocalEvaluationService:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def backend(self) -> EvaluationBackend:
        """A client of this service. It shares the service's data directory, so it reads each rollout's artifacts
        from the file the service wrote instead of copying them."""
        artifacts_dir = self.artifacts_dir
        return EvaluationBackend(
            EvaluationClientSync(EvaluationClient(self.url, self.key)),
            poll_interval=LOCAL_POLL_SECONDS,
            local_artifacts=lambda run_id, rollout_id: stored_rollout_artifacts(artifacts_dir, run_id, rollout_id),
            name="embedded",
        )


_lock = threading.Lock()
#: (data dir, scenarios dir) -> the running service and how many holders it has.
_running: dict[tuple[str, str], tuple[LocalEvaluationService, int]] = {}


@contextmanager
def local_evaluation_service(data_dir: Path, scenarios_dir: Path) -> Iterator[LocalEvaluationService]:
    """This process's local service on `data_dir`, started on first use and stopped when its last holder exits."""
    key = (str(data_dir.resolve()), str(scenarios_dir.resolve()))
    with _lock:
        service, holders = _running.get(key, (None, 0))
        if service is None:
            service = LocalEvaluationService(data_dir, scenarios_dir).start()
        _running[key] = (service, holders + 1)
    try:
        yield service
    finally:
        with _lock:
            service, holders = _running[key]
            if holders > 1:
                _running[key] = (service, holders - 1)
            else:
                del _running[key]
                service.stop()


@contextmanager
def open_platform(data_dir: Path, environ: Mapping[str, str] | None = None) -> Iterator[PlatformTarget]:
    """The hosted platform when `PLATFORM_URL` is set (token in `PLATFORM_TOKEN`, space in `PLATFORM_SPACE_ID`),
    else the embedded local platform on `data_dir` (simulated judges unless `PLATFORM_MODELS_FILE` says otherwise),
    started here and stopped on exit."""
    env = os.environ if environ is None else environ
    url = env.get(PLATFORM_URL_ENV)
    if url:
        token, space = env.get(PLATFORM_TOKEN_ENV), env.get(PLATFORM_SPACE_ENV)
        missing = [name for name, value in ((PLATFORM_TOKEN_ENV, token), (PLATFORM_SPACE_ENV, space)) if not value]
        if missing:
            raise ValueError(f"{PLATFORM_URL_ENV} is set, so set {' and '.join(missing)} as well")
        assert token is not None and space is not None
        yield PlatformTarget(url=url, token=token, space_id=str(uuid.UUID(space)), embedded=False)
        return
    with EmbeddedPlatform(data_dir, models=ModelRegistry.from_env(env)) as platform:
        yield PlatformTarget(url=platform.url, token=platform.token, space_id=platform.space_id, embedded=True)
