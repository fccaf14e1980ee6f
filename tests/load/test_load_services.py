"""The bounded load test, small: 10 clients for 5 s against both local services on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.load import main

pytestmark = pytest.mark.slow


def test_small_load_has_no_5xx_and_loses_no_rollout(tmp_path: Path) -> None:
    exit_code = main(["--clients", "10", "--seconds", "5", "--settle-seconds", "120", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "load.json").read_text(encoding="utf-8"))
    summary = {k: v for k, v in report.items() if not isinstance(v, dict)}
    assert report["server_errors_5xx"] == 0, report["server_errors_by_endpoint"]
    assert report["transport_errors"] == 0, report["transport_errors_by_endpoint"]
    assert report["unavailable_503_without_retry_after"] == 0, summary
    assert report["lost_rollouts"] == 0, summary
    # The load did happen: runs were launched and every polled endpoint was measured.
    assert report["launched_rollouts"] > 0 and report["launched_runs"] > 0, summary
    assert report["requests"] > report["launched_runs"], summary
    assert sum(report["rollout_outcomes"].values()) == report["launched_rollouts"], summary
    assert {"GET /runs", "GET /scenarios", "GET platform /health"} <= report["get_latency_by_endpoint"].keys()
    assert report["get_latency"]["p50_ms"] is not None and report["get_latency"]["p99_ms"] is not None
    assert exit_code == 0 and report["passed"] is True
    assert (tmp_path / "load.md").read_text(encoding="utf-8").startswith("# Load: 10 clients")
