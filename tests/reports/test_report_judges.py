"""The report's judge calibration: every judge with its rates, the flagged one marked, and each disagreeing rollout
linked to its page in the viewer."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from eval_pipelines.reports.build import build_report
from eval_pipelines.reports.judge_section import REPORT_DISAGREEMENTS_SHOWN
from eval_pipelines.reports.viewer.links import VIEWER_URL_ENV, rollout_link
from tests.reports.synthetic_warehouse import attempts_with, build
from tests.warehouse.calibration_warehouse import (
    EMAIL,
    QUALITY,
    QUALITY_WRONG,
    SWEEP,
    build_calibration_catalog,
    rollout_id,
)


def _row(page: str, scenario: str, kind: str) -> str:
    for row in re.findall(r"<tr[^>]*>.*?</tr>", page, re.S):
        if f'<td class="text">{html.escape(scenario)}</td><td class="text">{kind}</td>' in row:
            return row
    raise AssertionError(f"no calibration row for {scenario} {kind}")


def test_report_shows_the_calibration_with_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VIEWER_URL_ENV, "http://viewer.test:9000")
    db, _ = build_calibration_catalog(tmp_path)
    page = build_report(db, tmp_path / "report.html", SWEEP).html.read_text(encoding="utf-8")
    assert 'id="judge-calibration"' in page
    note = re.search(r"Flagged judges: (.*?)\.</p>", page)
    assert note and f"{QUALITY[0]} ({QUALITY[1]}) on {EMAIL}" in note.group(1).split(", ")
    quality = _row(page, EMAIL, "quality")
    assert 'class="flagged"' in quality and "flagged: kappa 0." in quality
    assert len(QUALITY_WRONG) < REPORT_DISAGREEMENTS_SHOWN
    linked = set(re.findall(r'<a href="([^"]+)"', quality))
    assert linked == {html.escape(rollout_link(rollout_id(m, EMAIL, i))) for m, i in QUALITY_WRONG}
    assert all(link.startswith("http://viewer.test:9000/rollouts/") for link in linked)
    safety = _row(page, EMAIL, "safety")
    assert 'class="flagged"' not in safety and '<td class="text">ok</td>' in safety


def test_a_report_without_judges_says_there_is_nothing_to_calibrate(tmp_path: Path) -> None:
    db = build(tmp_path, attempts_with({"t0": (2, 1)}, sweep_id="plain"))
    page = build_report(db, tmp_path / "report.html").html.read_text(encoding="utf-8")
    assert "nothing to calibrate" in page and "Flagged judges" not in page
