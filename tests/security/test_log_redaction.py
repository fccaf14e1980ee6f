"""Credentials in a model's `base_url` (`http://user:secret@host/v1`, `?key=`) reach no log line.

Every process we start calls `lib.redact.install_log_redaction`, so every record is redacted as it is made,
whatever logger wrote it and whichever handler shows it. The end-to-end test runs a sweep through the CLI and
both local services as processes of their own, each writing its log to a file under the data directory, with
httpx set to DEBUG the way a user debugging a proxy would: the HTTP client then logs every request's URL, which
is exactly where the credentials ride. Then every file and the captured console are searched for the canaries.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from eval_pipelines.cli import main
from eval_pipelines.clients.evaluation import EvaluationClient
from eval_pipelines.clients.platform import PlatformClient
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib.redact import REDACTED, install_log_redaction, redact_text
from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.lib.serving import free_port
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.platform import ConversationJudgeRequest, ConversationMessage, JudgeCreateRequest
from eval_pipelines.schemas.runs import RunLaunchRequest
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.sim.npc import SIM_NPC, sim_npc_persona
from eval_pipelines.sim.platform import PLATFORM_PERSONAS, SIM_QUALITY_JUDGE
from tests.platform.conftest import BENIGN_ROW, SPACE
from tests.reliability.support_canary import find_secrets
from tests.reliability.support_runs import make_dagster_home

PASSWORD = f"SECRETCANARY{uuid.uuid4().hex[:12]}"
QUERY_KEY = f"QUERYCANARY{uuid.uuid4().hex[:12]}"
CANARIES = (PASSWORD, QUERY_KEY)
SERVICE_KEY = f"svc-key-{uuid.uuid4().hex}"
PLATFORM_TOKEN = f"tok-{uuid.uuid4().hex}"
#: Run as a process's entry: httpx at DEBUG (set by the user, so not quieted), then the real entry point.
DEBUG_HTTPX_ENTRY = (
    "import logging, sys; logging.getLogger('httpx').setLevel(logging.DEBUG); "
    "from {module} import main; sys.exit(main(sys.argv[1:]))"
)


def credentialed(url: str) -> str:
    """`http://host:port/v1` with a user-info password and a `?key=` canary."""
    return url.replace("http://", f"http://proxyuser:{PASSWORD}@", 1) + f"/v1?key={QUERY_KEY}"


@contextmanager
def captured(
    logger: logging.Logger, level: int = logging.DEBUG, formatter: logging.Formatter | None = None
) -> Iterator[io.StringIO]:
    """What `logger`'s own handler shows (the logger does not propagate, like uvicorn's)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter or logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    try:
        yield out
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def test_redact_text_drops_user_info_and_credential_query_values() -> None:
    line = f'HTTP Request: POST {credentialed("http://127.0.0.1:8080")} "HTTP/1.1 200 OK"'
    assert redact_text(line) == f'HTTP Request: POST http://127.0.0.1:8080/v1?key={REDACTED} "HTTP/1.1 200 OK"'
    access = f'127.0.0.1:5 - "GET /health?api_key={QUERY_KEY}&page=2 HTTP/1.1" 200'
    assert redact_text(access) == f'127.0.0.1:5 - "GET /health?api_key={REDACTED}&page=2 HTTP/1.1" 200'
    # A password holding '@' is cut where a URL parser ends the user-info: at the last '@' of the authority.
    assert redact_text(f"see http://u:a@{PASSWORD}@host/x") == "see http://host/x"
    assert redact_text("nothing to hide: http://host/v1?page=2") == "nothing to hide: http://host/v1?page=2"


def test_a_non_propagating_logger_a_traceback_and_httpx_at_debug_are_redacted(serve: Any) -> None:
    install_log_redaction()
    own = logging.getLogger(f"tests.redaction.{uuid.uuid4().hex}")
    with captured(own) as out:
        own.info("calling %s", credentialed("http://10.0.0.1:9"))
        try:
            raise ConnectionError(f"cannot reach {credentialed('http://10.0.0.1:9')}")
        except ConnectionError:
            own.exception("the call failed")
    text = out.getvalue()
    assert "calling http://10.0.0.1:9/v1" in text and "ConnectionError: cannot reach http://10.0.0.1:9" in text
    assert not any(secret in text for secret in CANARIES), text

    server = serve(create_sim_app(ReferenceBook.from_catalog(ScenarioCatalog())))
    with captured(logging.getLogger("httpx")) as out:
        httpx.get(credentialed(server.url).replace("/v1?", "/health?"), timeout=10)
    assert "HTTP Request: GET http://127.0.0.1" in out.getvalue()  # httpx really logged the URL
    assert not any(secret in out.getvalue() for secret in CANARIES), out.getvalue()


def test_uvicorn_access_lines_are_redacted() -> None:
    from uvicorn.logging import AccessFormatter

    install_log_redaction()
    access = logging.getLogger("uvicorn.access")
    formatter = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s')
    with captured(access, logging.INFO, formatter) as out:
        # The call uvicorn's h11/httptools protocols make for each request.
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", f"/health?token={QUERY_KEY}", "1.1", 200)
    assert f"/health?token={REDACTED}" in out.getvalue() and QUERY_KEY not in out.getvalue()


def test_the_http_clients_request_lines_are_quieted_unless_set() -> None:
    loggers = [logging.getLogger(name) for name in ("httpx", "httpcore")]
    saved = [lg.level for lg in loggers]
    try:
        loggers[0].setLevel(logging.NOTSET)
        loggers[1].setLevel(logging.DEBUG)
        install_log_redaction()
        assert [lg.level for lg in loggers] == [logging.WARNING, logging.DEBUG]
    finally:
        for lg, level in zip(loggers, saved, strict=True):
            lg.setLevel(level)


# --- a sweep and both services as processes ---------------------------------------------------------------------


def _start(module: str, args: list[str], env: dict[str, str], log: IO[bytes], port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-c", DEBUG_HTTPX_ENTRY.format(module=module), *args, "--port", str(port)]
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"{module} did not come up; see {log.name}")
        time.sleep(0.2)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _use_the_service(url: str, model_url: str) -> None:
    """A credential in a query (first: an in-process server started by a rollout turns uvicorn's access log down
    to WARNING), then a model test and a one-rollout run, both on the credentialed model URL."""
    httpx.get(f"{url}/health?api_key={QUERY_KEY}", timeout=10)
    config = {"model": "sim-oracle", "base_url": model_url, "api_key": "sk-model"}
    policy = RetryPolicy(max_attempts=2, base_delay=0.05, max_delay=0.5)
    async with EvaluationClient(url, SERVICE_KEY, timeout_seconds=60, retry=policy) as client:
        tested = await client.test_model_config(ModelConfig.model_validate(config))
        assert tested.success, tested
        request = RunLaunchRequest.model_validate(
            {"scenario_id": "email_ops:1.0.0", "task_ids": ["email_ops_001"], "model_config": config}
        )
        launched = await client.launch_run(request)
        run = await client.wait_for_run(launched.run_id, deadline_seconds=120, poll_interval=0.2)
        assert run.completed == 1, run


async def _use_the_platform(url: str) -> None:
    """A judge on the registry's `veritas`, which the models file points at the credentialed model URL."""
    async with PlatformClient(url, PLATFORM_TOKEN, timeout=60) as client:
        judge = await client.create_judge(
            JudgeCreateRequest(judge_name="redaction", space_id=uuid.UUID(SPACE), model_name="veritas")
        )
        verdict = await client.judge_conversation(
            ConversationJudgeRequest(
                conversation_prefix=[ConversationMessage(**m) for m in BENIGN_ROW["conv_prefix"]],
                response=ConversationMessage(**BENIGN_ROW["response"]),
                space_id=uuid.UUID(SPACE),
                judge_id=uuid.UUID(judge.id),
            )
        )
    assert verdict.score >= 1
    httpx.get(f"{url}/health?token={QUERY_KEY}", timeout=10)


@pytest.mark.slow
def test_no_credential_of_a_base_url_in_any_log_of_a_sweep_or_the_services(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    seen: list[str] = []
    sim = create_sim_app(
        ReferenceBook.from_catalog(ScenarioCatalog()), personas={SIM_NPC: sim_npc_persona, **PLATFORM_PERSONAS}
    )

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(scope.get("query_string", b"").decode())
        await sim(scope, receive, send)

    model_url = credentialed(serve(recording).url)
    data = tmp_path / "data"
    logs = data / "logs"
    logs.mkdir(parents=True)
    home = make_dagster_home(tmp_path / "dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("EVAL_PIPELINES_DATA_DIR", str(data))
    monkeypatch.setenv("EP_REDACTION_KEY", "sk-model")

    # The sweep, in this process, its log in a file; httpx at DEBUG.
    config = tmp_path / "redaction.yaml"
    config.write_text(
        "name: redaction\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        "task_ids: [email_ops_001]\n"
        "rollout_count: 1\n"
        f"models:\n  - {{name: proxied, model: sim-oracle, base_url: '{model_url}', api_key_env: EP_REDACTION_KEY}}\n",
        encoding="utf-8",
    )
    sweep_log = logging.FileHandler(logs / "sweep.log", encoding="utf-8")
    root, httpx_logger = logging.getLogger(), logging.getLogger("httpx")
    saved = (root.level, httpx_logger.level)
    root.addHandler(sweep_log)
    root.setLevel(logging.DEBUG)
    httpx_logger.setLevel(logging.DEBUG)
    try:
        assert main(["sweep", "--config", str(config), "--skip-assessment"]) == 0
    finally:
        root.removeHandler(sweep_log)
        sweep_log.close()
        root.setLevel(saved[0])
        httpx_logger.setLevel(saved[1])

    # Both services as processes of their own, each writing its log file.
    models_file = tmp_path / "platform_models.yaml"
    models_file.write_text(f"models:\n  veritas: {{model: {SIM_QUALITY_JUDGE}, base_url: '{model_url}'}}\n")
    env = {
        **os.environ,
        "EVAL_SERVICE_API_KEYS": f"{SERVICE_KEY}:write",
        "PLATFORM_TOKENS": f"{PLATFORM_TOKEN}:{SPACE}",
        "PLATFORM_MODELS_FILE": str(models_file),
        # uvicorn's access lines go to stdout: unbuffered, so a stopped process has written them all.
        "PYTHONUNBUFFERED": "1",
    }
    service_port, platform_port = free_port(), free_port()
    with (logs / "eval-service.log").open("wb") as service_log, (logs / "platform.log").open("wb") as platform_log:
        common = ["--log-level", "debug", "--data-dir", str(data)]
        service = _start("eval_pipelines.service.serve", common, env, service_log, service_port)
        try:
            platform = _start("eval_pipelines.platform.serve", common, env, platform_log, platform_port)
            try:
                asyncio.run(_use_the_service(f"http://127.0.0.1:{service_port}", model_url))
                asyncio.run(_use_the_platform(f"http://127.0.0.1:{platform_port}"))
            finally:
                _stop(platform)
        finally:
            _stop(service)

    assert sum(f"key={QUERY_KEY}" in q for q in seen) >= 4  # the credentialed URL really was used by all three
    written = {name: (logs / name).read_text(encoding="utf-8") for name in ("eval-service.log", "platform.log")}
    # The logs hold the lines the credentials would have ridden in: httpx's requests, uvicorn's access lines.
    assert "HTTP Request: POST http://127.0.0.1" in written["eval-service.log"]
    assert "HTTP Request: POST http://127.0.0.1" in written["platform.log"]
    assert f"/health?api_key={REDACTED}" in written["eval-service.log"]
    assert "HTTP Request: POST http://127.0.0.1" in (logs / "sweep.log").read_text(encoding="utf-8")
    assert find_secrets([data, home], CANARIES) == []
    console = capfd.readouterr()
    assert not any(secret in console.out + console.err for secret in CANARIES)
