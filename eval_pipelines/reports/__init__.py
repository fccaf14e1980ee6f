"""Reports people can look at: a self-contained HTML page with its charts, and the pass-rate summary that the
Dagster layer attaches to the eval_catalog materialisation. Reads the DuckDB catalog only.

The names below load on first use (PEP 562), so importing a submodule (`reports.viewer.links`, which the CLI
reads for its defaults) does not import DuckDB and the report builder's modules with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipelines.lib.lazy_names import lazy_names

if TYPE_CHECKING:
    from eval_pipelines.reports.build import CHARTS, PassRateSummary, ReportFiles, build_report, pass_rate_summary
    from eval_pipelines.reports.data import ReportData, ReportError, load_report_data, model_label
    from eval_pipelines.reports.html import pass_rate_markdown

_HOMES = {
    "CHARTS": "build",
    "PassRateSummary": "build",
    "ReportFiles": "build",
    "build_report": "build",
    "pass_rate_summary": "build",
    "ReportData": "data",
    "ReportError": "data",
    "load_report_data": "data",
    "model_label": "data",
    "pass_rate_markdown": "html",
}

__all__ = [
    "CHARTS",
    "PassRateSummary",
    "ReportData",
    "ReportError",
    "ReportFiles",
    "build_report",
    "load_report_data",
    "model_label",
    "pass_rate_markdown",
    "pass_rate_summary",
]


__getattr__ = lazy_names(__name__, globals(), _HOMES)
