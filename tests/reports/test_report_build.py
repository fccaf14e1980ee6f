"""build_report and the Dagster pass-rate summary on a real catalog: files, self-containment, sweep choice,
labels of simulated models in every chart and table, and the errors a user can hit."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from eval_pipelines.reports import (
    CHARTS,
    ReportError,
    build_report,
    load_report_data,
    pass_rate_summary,
)
from eval_pipelines.warehouse.catalog import build_catalog
from tests.reports.conftest import NEW_SWEEP, OLD_SWEEP

SVG = "{http://www.w3.org/2000/svg}"


def _svg_texts(svg: str | bytes) -> str:
    """The chart's text elements, read by an XML parser (so the SVG is also well-formed)."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and int(root.attrib["width"]) > 300 and int(root.attrib["height"]) > 200
    return "\n".join(t.text or "" for t in root.iter(f"{SVG}text"))


def test_report_writes_html_and_svgs_for_the_latest_sweep(report_catalog: Path, tmp_path: Path) -> None:
    files = build_report(report_catalog, tmp_path / "out" / "report.html")
    assert files.sweep_id == NEW_SWEEP
    assert set(files.charts) == set(CHARTS) == {"pass_rate", "pass_hat_k", "cost", "task_heatmap"}
    page = files.html.read_text(encoding="utf-8")
    embedded = re.findall(r'<img alt="[^"]*" src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)">', page)
    assert len(embedded) == len(CHARTS)
    for name, path in files.charts.items():
        assert path.parent == files.html.parent and path.name == f"report_{name}.svg"
        svg = path.read_bytes()
        assert NEW_SWEEP in _svg_texts(svg) and len(svg) > 2000
        # The page embeds exactly the bytes of the SVG beside it.
        assert base64.b64encode(svg).decode("ascii") in embedded
    # Self-contained: nothing to fetch, nothing to run. The only links are to the viewer, one per row.
    for pattern in (r"\bsrc=\"(?!data:)", r"<script", r"<link", r"url\(", r"@import"):
        assert not re.search(pattern, page), pattern
    links = re.findall(r'<a href="([^"]*)">', page)
    assert links and all(link.startswith("http://127.0.0.1:8765/rollouts?sweep=") for link in links), links
    assert len(links) == page.count('<a href="') and len(links) == len(load_report_data(report_catalog).groups)
    assert f"sweep <code>{NEW_SWEEP}</code>" in page
    assert "sim-oracle (simulated)" in page and "sim-noop (simulated)" in page
    assert "gpt-real (simulated)" not in page and "gpt-real" in page
    # Both scenarios, the comparison table and the method notes made it.
    assert "calendar:2.0.0" in page and "email_ops:1.0.0" in page
    assert "sign-flip permutation" in page and "CR1" in page


def test_every_chart_labels_simulated_models(report_catalog: Path) -> None:
    data = load_report_data(report_catalog)
    for name, make_chart in CHARTS.items():
        text = _svg_texts(make_chart(data))
        assert "sim-oracle (simulated)" in text and "sim-noop (simulated)" in text, name
        assert "gpt-real (simulated)" not in text and "gpt-real" in text, name


def test_report_for_a_named_sweep_and_its_numbers(report_catalog: Path, tmp_path: Path) -> None:
    files = build_report(report_catalog, tmp_path / "old.html", sweep_id=OLD_SWEEP)
    assert files.sweep_id == OLD_SWEEP
    data = load_report_data(report_catalog, OLD_SWEEP)
    assert [(g["model_name"], g["n"], g["passes"]) for g in data.groups] == [("gpt-real", 1, 0)]
    assert data.comparisons == []
    assert "nothing to compare" in files.html.read_text(encoding="utf-8")
    # Comparisons are listed once per pair, better model first.
    latest = load_report_data(report_catalog)
    assert latest.comparisons and all(row["diff"] >= 0 for row in latest.comparisons)
    pairs = [(r["scenario_id"], frozenset((r["model_a"], r["model_b"]))) for r in latest.comparisons]
    assert len(pairs) == len(set(pairs)) == 2 * 3


def test_report_errors_name_the_problem(report_catalog: Path, tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"unknown sweep 'nope'.*nightly-0101"):
        build_report(report_catalog, tmp_path / "r.html", sweep_id="nope")
    with pytest.raises(ReportError, match="no catalog yet"):
        build_report(tmp_path / "missing.duckdb", tmp_path / "r.html")
    empty = build_catalog(tmp_path / "empty-warehouse", tmp_path / "empty.duckdb").path
    with pytest.raises(ReportError, match="no rollouts yet"):
        build_report(empty, tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_pass_rate_summary_for_dagster_metadata(report_catalog: Path, tmp_path: Path) -> None:
    summary = pass_rate_summary(report_catalog, chart_path=tmp_path / "charts" / "pass_rates.svg")
    assert summary.sweep_id == NEW_SWEEP
    lines = summary.table_markdown.splitlines()
    assert lines[0].startswith("| scenario | model |") and "95% CI (t, clustered)" in lines[0]
    assert len(lines) == 2 + 2 * 3
    assert any("| sim-oracle (simulated) |" in line for line in lines)
    assert summary.chart_path is not None and summary.chart_path.read_bytes() == summary.chart_svg
    match = re.fullmatch(r"!\[[^\]]*\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)", summary.chart_markdown)
    assert match and "sim-oracle (simulated)" in _svg_texts(base64.b64decode(match.group(1)))

    empty = build_catalog(tmp_path / "empty-warehouse", tmp_path / "empty.duckdb").path
    nothing = pass_rate_summary(empty)
    assert (nothing.sweep_id, nothing.chart_svg) == (None, None)
    assert "no scored rollouts" in nothing.table_markdown and nothing.chart_markdown == ""
