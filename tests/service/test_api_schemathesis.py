"""schemathesis against the served OpenAPI document, with a valid key: no 5xx, no response off the schema."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service.eval_service_support import WRITE_KEY, running_service

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).with_name("schemathesis.toml")


def test_schemathesis_finds_no_failures(tmp_path: Path) -> None:
    with running_service(tmp_path / "data") as running:
        command = [
            str(Path(sys.executable).with_name("schemathesis")),
            "--config-file",
            str(CONFIG),
            "run",
            f"{running.url}/openapi.json",
            "-H",
            f"API-Key: {WRITE_KEY}",
            "--max-examples",
            "8",
            "--seed",
            "20260101",
            "--request-timeout",
            "30",
        ]
        result = subprocess.run(
            command,
            cwd=tmp_path,  # schemathesis keeps its caches in the working directory
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "NO_COLOR": "1"},
        )
    report = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert "passed" in result.stdout and "failures" not in result.stdout, report
