"""`build_report`: the HTML report with its PNG charts beside it, and the pass-rate summary for Dagster."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipelines.lib.progress import ProgressReporter
from eval_pipelines.reports.data import ReportData, load_report_data, model_label, pass_rate_rows
from eval_pipelines.reports.html import data_uri, pass_rate_markdown, render_report_html

# `charts` (matplotlib, with numpy and Pillow) is imported by the functions below when they draw: the Dagster code
# location and the CLI import this module at start-up and draw only when a report or the catalog is built.
if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _pass_rate_chart(data: ReportData) -> Figure:
    from eval_pipelines.reports.charts import pass_rate_figure

    return pass_rate_figure(data.sweep_id, data.groups, data.model_labels)


def _pass_hat_k_chart(data: ReportData) -> Figure:
    from eval_pipelines.reports.charts import pass_hat_k_figure

    return pass_hat_k_figure(data)


def _cost_chart(data: ReportData) -> Figure:
    from eval_pipelines.reports.charts import cost_figure

    return cost_figure(data)


def _task_heatmap_chart(data: ReportData) -> Figure:
    from eval_pipelines.reports.charts import task_heatmap_figure

    return task_heatmap_figure(data)


#: Chart name -> figure builder; the PNG beside `report.html` is `report_<name>.png`.
CHARTS: dict[str, Callable[[ReportData], Figure]] = {
    "pass_rate": _pass_rate_chart,
    "pass_hat_k": _pass_hat_k_chart,
    "cost": _cost_chart,
    "task_heatmap": _task_heatmap_chart,
}


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    sweep_id: str
    #: chart name -> PNG path, in CHARTS order.
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
    """Write `out_html` (self-contained) and one PNG per chart beside it, for `sweep_id` (default: the latest).

    Raises ReportError when the catalog is missing, empty, or lacks the sweep.
    """
    from eval_pipelines.reports.charts import figure_png

    out_html = Path(out_html)
    if progress is not None:
        progress.update(total=len(CHARTS) + 2, completed=0, description="reading the catalog")
    data = load_report_data(Path(duckdb_path), sweep_id)
    if progress is not None:
        progress.advance()
    out_html.parent.mkdir(parents=True, exist_ok=True)
    pngs: dict[str, bytes] = {}
    paths: dict[str, Path] = {}
    for name, make_figure in CHARTS.items():
        if progress is not None:
            progress.update(description=f"chart {name}")
        png = figure_png(make_figure(data))
        pngs[name] = png
        paths[name] = out_html.with_name(f"{out_html.stem}_{name}.png")
        _write_atomically(paths[name], png)
        if progress is not None:
            progress.advance()
    if progress is not None:
        progress.update(description="writing the HTML")
    page = render_report_html(data, pngs, source=str(duckdb_path))
    _write_atomically(out_html, page.encode("utf-8"))
    if progress is not None:
        progress.advance(description="done")
    return ReportFiles(html=out_html, sweep_id=data.sweep_id, charts=paths)


@dataclass(frozen=True)
class PassRateSummary:
    """The latest sweep's pass rates for the eval_catalog materialisation: a Markdown table and a chart."""

    sweep_id: str | None
    table_markdown: str
    chart_png: bytes | None = None
    chart_path: Path | None = None

    @property
    def chart_markdown(self) -> str:
        """The chart as Markdown with an embedded data: URI image, which the Dagster UI renders inline ("" when
        there is nothing to chart: the table already says so)."""
        if self.chart_png is None:
            return ""
        return f"![pass rate with 95% CIs, sweep {self.sweep_id}]({data_uri(self.chart_png)})"


def pass_rate_summary(
    duckdb_path: Path, chart_path: Path | None = None, sweep_id: str | None = None
) -> PassRateSummary:
    """Table and chart of one sweep (default: the latest); an empty catalog gives a summary that says so.

    With `chart_path`, the PNG is also written there (for `MetadataValue.path`).
    """
    sweep, rows = pass_rate_rows(Path(duckdb_path), sweep_id)
    if sweep is None or not rows:
        return PassRateSummary(sweep_id=sweep, table_markdown=pass_rate_markdown(rows))
    from eval_pipelines.reports.charts import figure_png, pass_rate_figure

    labels: dict[str, str] = {}
    for row in sorted(rows, key=lambda r: r["model_name"]):
        labels[row["model_name"]] = model_label(row["model_name"], row["is_simulated"])
    png = figure_png(pass_rate_figure(sweep, rows, labels))
    if chart_path is not None:
        chart_path = Path(chart_path)
        chart_path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(chart_path, png)
    return PassRateSummary(
        sweep_id=sweep, table_markdown=pass_rate_markdown(rows), chart_png=png, chart_path=chart_path
    )
