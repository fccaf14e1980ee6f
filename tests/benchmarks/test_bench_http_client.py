"""The HTTP client benchmark's harness: every client reaches the server and is measured, in --quick sizes."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import http_client


def test_every_client_is_measured_and_the_report_is_written(tmp_path: Path) -> None:
    assert http_client.main(["--requests", "20", "--rounds", "2", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "http_client.md").read_text(encoding="utf-8")
    for name in http_client.CLIENTS:
        assert f"| {name} |" in report
    data = json.loads((tmp_path / "http_client.json").read_text(encoding="utf-8"))
    assert set(data["cpu_us_per_request"]) == set(http_client.CLIENTS)
    assert all(len(rounds) == 2 and min(rounds) > 0 for rounds in data["every_round"].values())
