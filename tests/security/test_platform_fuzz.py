"""schemathesis against the platform's served OpenAPI document, with a valid token: no 5xx, no response off
the schema. Mirrors tests/service/test_api_schemathesis.py (the evaluation service's fuzz)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.conftest import ServedPlatform

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).parents[1] / "platform" / "schemathesis.toml"


def test_schemathesis_finds_no_failures_on_the_platform(platform_service: ServedPlatform, tmp_path: Path) -> None:
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(CONFIG),
        "run",
        f"{platform_service.url}/openapi.json",
        "-H",
        f"Authorization: Bearer {platform_service.token}",
        "--max-examples",
        "25",
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
    selected = re.search(r"(\d+) selected / (\d+) total", result.stdout)
    assert selected is not None and selected.group(1) == selected.group(2), report  # every operation was fuzzed
    assert "passed" in result.stdout and "failures" not in result.stdout, report
