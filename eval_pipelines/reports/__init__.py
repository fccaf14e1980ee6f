"""Reports people can look at: a self-contained HTML page with PNG charts, and the pass-rate summary that the
Dagster layer attaches to the eval_catalog materialisation. Reads the DuckDB catalog only."""

from eval_pipelines.reports.build import CHARTS, PassRateSummary, ReportFiles, build_report, pass_rate_summary
from eval_pipelines.reports.data import ReportData, ReportError, load_report_data, model_label
from eval_pipelines.reports.html import pass_rate_markdown

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
