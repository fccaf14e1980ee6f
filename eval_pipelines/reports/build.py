"""`build_report`: the HTML report with its SVG charts beside it, and the pass-rate summary for Dagster."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipelines.lib.progress import ProgressReporter
from eval_pipelines.reports.charts import cost_chart, pass_hat_k_chart, pass_rate_chart, task_heatmap_chart
from eval_pipelines.reports.data import ReportData, load_report_data, model_label, pass_rate_rows
from eval_pipelines.reports.html import data_uri, pass_rate_markdown, render_report_html


def _pass_rate_chart(data: ReportData) -> str:
    return pass_rate_chart(data.sweep_id, data.groups, data.model_labels)


#: Chart name -> SVG builder; the file beside `report.html` is `report_<name>.svg`.
CHARTS: dict[str, Callable[[ReportData], str]] = {
    "pass_rate": _pass_rate_chart,
    "pass_hat_k": pass_hat_k_chart,
    "cost": cost_chart,
    "task_heatmap": task_heatmap_chart,
}


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    sweep_id: str
    #: chart name -> SVG path, in CHARTS order.
    charts: dict[str, Path] = field(default_factory=dict)

    @property
    def paths(self) -> list[Path]:
        return [self.html, *self.charts.values()]


def _write_atomically(path: Path, content: bytes) -> None:
    # A browser refreshing the report, or a Dagster UI showing the chart, never sees half a file.
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_bytes(content)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def build_report(
    duckdb_path: Path,
    out_html: Path,
    sweep_id: str | None = None,
    *,
    progress: ProgressReporter | None = None,
) -> ReportFiles:
    """Write `out_html` (self-contained) and one SVG per chart beside it, for `sweep_id` (default: the latest).

    Raises ReportError when the catalog is missing, empty, or lacks the sweep.
    """
    out_html = Path(out_html)
    if progress is not None:
        progress.update(total=len(CHARTS) + 2, completed=0, description="reading the catalog")
    data = load_report_data(Path(duckdb_path), sweep_id)
    if progress is not None:
        progress.advance()
    out_html.parent.mkdir(parents=True, exist_ok=True)
    svgs: dict[str, bytes] = {}
    paths: dict[str, Path] = {}
    for name, make_chart in CHARTS.items():
        if progress is not None:
            progress.update(description=f"chart {name}")
        svgs[name] = make_chart(data).encode("utf-8")
        paths[name] = out_html.with_name(f"{out_html.stem}_{name}.svg")
        _write_atomically(paths[name], svgs[name])
        if progress is not None:
            progress.advance()
    if progress is not None:
        progress.update(description="writing the HTML")
    page = render_report_html(data, svgs, source=str(duckdb_path))
    _write_atomically(out_html, page.encode("utf-8"))
    if progress is not None:
        progress.advance(description="done")
    return ReportFiles(html=out_html, sweep_id=data.sweep_id, charts=paths)


@dataclass(frozen=True)
class PassRateSummary:
    """The latest sweep's pass rates for the eval_catalog materialisation: a Markdown table and a chart."""

    sweep_id: str | None
    table_markdown: str
    #: The chart as SVG bytes.
    chart_svg: bytes | None = None
    chart_path: Path | None = None

    @property
    def chart_markdown(self) -> str:
        """The chart as Markdown with an embedded data: URI image, which the Dagster UI renders inline ("" when
        there is nothing to chart: the table already says so)."""
        if self.chart_svg is None:
            return ""
        return f"![pass rate with 95% CIs, sweep {self.sweep_id}]({data_uri(self.chart_svg)})"


def pass_rate_summary(
    duckdb_path: Path, chart_path: Path | None = None, sweep_id: str | None = None
) -> PassRateSummary:
    """Table and chart of one sweep (default: the latest); an empty catalog gives a summary that says so.

    With `chart_path`, the SVG is also written there (for `MetadataValue.path`).
    """
    sweep, rows = pass_rate_rows(Path(duckdb_path), sweep_id)
    if sweep is None or not rows:
        return PassRateSummary(sweep_id=sweep, table_markdown=pass_rate_markdown(rows))
    labels: dict[str, str] = {}
    for row in sorted(rows, key=lambda r: r["model_name"]):
        labels[row["model_name"]] = model_label(row["model_name"], row["is_simulated"])
    svg = pass_rate_chart(sweep, rows, labels).encode("utf-8")
    if chart_path is not None:
        chart_path = Path(chart_path)
        chart_path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(chart_path, svg)
    return PassRateSummary(
        sweep_id=sweep, table_markdown=pass_rate_markdown(rows), chart_svg=svg, chart_path=chart_path
    )
