"""`run_platform` as a real process configured from the environment, and its refusal to start without tokens."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from eval_pipelines.clients.platform import PlatformClient
from eval_pipelines.lib.serving import free_port
from eval_pipelines.platform.auth import TokenRegistry
from eval_pipelines.platform.serve import PlatformConfigError, load_settings, main
from tests.platform.conftest import BENIGN_ROW, NO_RETRY, SPACE

TOKEN = "tok-serve-test-3c9d1e7f5a"


def test_refuses_to_start_without_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(PlatformConfigError, match="PLATFORM_TOKENS"):
        load_settings(tmp_path, environ={})
    monkeypatch.delenv("PLATFORM_TOKENS", raising=False)
    monkeypatch.delenv("PLATFORM_TOKENS_FILE", raising=False)
    assert main(["--data-dir", str(tmp_path)]) == 2
    assert "no access tokens configured" in capsys.readouterr().err


def test_issue_token_prints_the_token_once_and_stores_its_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens_file = tmp_path / "tokens"
    assert main(["--issue-token", str(tokens_file), "--space-id", SPACE]) == 0
    printed = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert printed["PLATFORM_SPACE_ID"] == SPACE
    assert printed["PLATFORM_TOKEN"] not in tokens_file.read_text()
    assert TokenRegistry.from_file(tokens_file).spaces_for(printed["PLATFORM_TOKEN"]) == {SPACE}
    assert main(["--issue-token", str(tokens_file), "--space-id", "not-a-uuid"]) == 2


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    env = {**os.environ, "PLATFORM_TOKENS": f"{TOKEN}:{SPACE}"}
    command = [sys.executable, "-m", "eval_pipelines.platform.serve", "--port", str(port)]
    command += ["--data-dir", str(tmp_path / "data")]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            output = process.stdout.read().decode() if process.stdout else ""
            process.kill()
            pytest.fail(f"platform process did not come up:\n{output}")
        time.sleep(0.1)
    yield url, process
    if process.poll() is None:
        process.terminate()
        process.wait(timeout=10)


async def test_served_platform_answers_with_env_tokens_and_keeps_them_out_of_its_log(
    served: tuple[str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    url, process = served
    async with PlatformClient(url, TOKEN, retry=NO_RETRY) as client:
        result = await client.upload_dataset([BENIGN_ROW], dataset_name="served", space_id=SPACE)
    assert len(result.rows) == 1
    process.terminate()
    output, _ = process.communicate(timeout=10)
    assert b"assessment platform on http://127.0.0.1" in output
    assert TOKEN.encode() not in output
    assert (tmp_path / "data" / "platform" / "platform.sqlite3").is_file()
