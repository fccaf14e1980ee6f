"""The report as one self-contained HTML page (charts as data: URIs, inline CSS, no script, no external asset),
and the Markdown pass-rate table for Dagster metadata."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from eval_pipelines.pipeline.summary import markdown_table
from eval_pipelines.reports.data import UNKNOWN_COST, ReportData, model_label, simulator_error_note
from eval_pipelines.reports.judge_section import calibration_html
from eval_pipelines.reports.viewer.links import rollouts_link
from eval_pipelines.warehouse.metrics import METHODS

#: pass^k columns shown in the report's table; the chart has every k.
TABLE_MAX_K = 8

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px;
       padding: 0 1rem; color: #1d2330; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.2rem; margin-top: 2.2rem; border-bottom: 1px solid #dde1e8; padding-bottom: 0.2rem; }
.meta { color: #5b6475; font-size: 0.9rem; }
.note { background: #fff6e0; border-left: 4px solid #e0a800; padding: 0.5rem 0.8rem; font-size: 0.9rem; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eef0f4; }
figcaption { color: #5b6475; font-size: 0.85rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.8rem 0; }
/* A table wider than the page (the per-group table has 17 columns) scrolls in its own box, not the page. */
table { display: block; max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid #dde1e8; padding: 0.25rem 0.55rem; text-align: right; }
td { white-space: nowrap; }
th { background: #f4f6f9; }
td.text, th.text { text-align: left; }
code { background: #f4f6f9; padding: 0 0.2rem; border-radius: 3px; }
"""


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


#: Where a pass rate stands for a pair or task whose rollouts all errored: it has none, which is not 0.
ALL_ERRORED = "none: all errored"


def _pass_rate(row: Mapping[str, Any], column: str = "pass_rate") -> str:
    if row.get(column) is None and not row.get("n") and row.get("n_errors"):
        return ALL_ERRORED
    return _fmt(row.get(column))


def _interval(low: Any, high: Any, digits: int = 3) -> str:
    if low is None or high is None:
        return "-"
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


def _usd(value: Any) -> str:
    return UNKNOWN_COST if value is None else f"{value:.4f}"


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    text_columns: int,
    links: Sequence[str] | None = None,
) -> str:
    """An HTML table; the first `text_columns` columns are left-aligned text, the rest numbers. `links`, one per
    row, add a last column linking each row's rollouts in the viewer."""

    def cell(tag: str, index: int, value: str) -> str:
        css = ' class="text"' if index < text_columns else ""
        return f"<{tag}{css}>{html.escape(value)}</{tag}>"

    def link(url: str) -> str:
        return f'<td class="text"><a href="{html.escape(url)}">rollouts</a></td>'

    head = "".join(cell("th", i, h) for i, h in enumerate(headers)) + ("<th>viewer</th>" if links else "")
    body = "\n".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + (link(links[index]) if links else "") + "</tr>"
        for index, r in enumerate(rows)
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _inline_code(text: str) -> str:
    """Escape, then render `code` spans, as in the METHODS notes."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))


def _group_rows(data: ReportData) -> list[list[str]]:
    labels = data.model_labels
    return [
        [
            row["scenario_id"],
            labels[row["model_name"]],
            _fmt(row["n_tasks"]),
            _fmt(row["n"]),
            _fmt(row["n_unscored"]),
            _errors(row),
            _pass_rate(row),
            _fmt(row["clustered_se"]),
            _interval(row["ci_t_low"], row["ci_t_high"]),
            _interval(row["ci_boot_low"], row["ci_boot_high"]),
            _fmt(row["mean_partial_credit"]),
            _fmt(row["tokens_per_rollout"], 0),
            _usd(row["cost_per_rollout_usd"]),
            _fmt(row["seconds_per_rollout"], 2),
            _fmt(row.get("text_tool_calls", 0)),
            _fmt(row.get("bad_arguments", 0)),
        ]
        for row in data.groups
    ]


def _errors(row: Mapping[str, Any]) -> str:
    """Errors beside n: how many rollouts say nothing about the model, and their share."""
    n_errors = row.get("n_errors") or 0
    return f"{n_errors} ({row['error_share']:.0%}{simulator_error_note(row)})" if n_errors else "0"


_GROUP_HEADERS = (
    "scenario",
    "model",
    "tasks",
    "scored",
    "unscored",
    "errors",
    "pass rate",
    "clustered SE",
    "95% CI (t)",
    "95% CI (bootstrap)",
    "partial credit",
    "tokens / rollout",
    "cost / rollout (USD)",
    "s / rollout",
    "answers that are text tool calls",
    "tool calls with invalid arguments",
)


def _model_rows(data: ReportData) -> list[list[str]]:
    return [
        [
            model_label(row["model_name"], row["is_simulated"]),
            _fmt(row["n_scenarios"]),
            _fmt(row["n_tasks"]),
            _fmt(row["n"]),
            _pass_rate(row),
            _interval(row["ci_t_low"], row["ci_t_high"]),
            _interval(row["ci_boot_low"], row["ci_boot_high"]),
            _usd(row["total_cost_usd"]),
        ]
        for row in data.models
    ]


def _comparison_rows(data: ReportData) -> list[list[str]]:
    return [
        [
            row["scenario_id"],
            model_label(row["model_a"], row["a_is_simulated"]),
            model_label(row["model_b"], row["b_is_simulated"]),
            _fmt(row["n_tasks"]),
            _fmt(row["pass_rate_a"]),
            _fmt(row["pass_rate_b"]),
            _fmt(row["diff"]),
            _interval(row["ci_low"], row["ci_high"]),
            _fmt(row["p_value"], 4),
            _fmt(row["mcnemar_p_value"], 4),
            f"{row['a_only_passes']} / {row['b_only_passes']}",
            _fmt(row["mdd"]),
            _fmt(row["epochs_needed"]),
            f"{row['tasks_a_better']} / {row['tasks_b_better']}",
        ]
        for row in data.comparisons
    ]


def _noise_floor_rows(data: ReportData) -> list[list[str]]:
    return [
        [
            row["scenario_id"],
            model_label(row["model_name"], row["is_simulated"]),
            _fmt(row["n_tasks"]),
            _fmt(row["epochs"]),
            _fmt(row["flip_rate"]),
            f"{row['n_unstable_tasks']} / {row['n_repeated_tasks']}",
            _fmt(row["pass_at_k"]),
            _fmt(row["pass_hat_k"]),
            _fmt(row["mdd"]),
            _fmt(row["epochs_needed"]),
        ]
        for row in data.noise_floor
    ]


def _pass_hat_k_table(data: ReportData) -> tuple[list[str], list[list[str]]]:
    labels = data.model_labels
    # An all-errored pair has one row with a NULL k.
    max_k = min(TABLE_MAX_K, max((r["k"] for r in data.pass_at_k if r["k"] is not None), default=0))
    by_key = {(r["scenario_id"], r["model_name"], r["k"]): r for r in data.pass_at_k}
    headers = ["scenario", "model", *(f"pass^{k}" for k in range(1, max_k + 1))]
    rows = []
    for group in data.groups:
        cells = [group["scenario_id"], labels[group["model_name"]]]
        if group["pass_rate"] is None and not group["n"] and group.get("n_errors"):
            rows.append(cells + [ALL_ERRORED] * max_k)
            continue
        for k in range(1, max_k + 1):
            point = by_key.get((group["scenario_id"], group["model_name"], k))
            cells.append("-" if point is None else _fmt(point["pass_hat_k"]))
        rows.append(cells)
    return headers, rows


def data_uri(svg: bytes) -> str:
    """An SVG chart as a data: URI, for an <img> in the report and in Dagster's Markdown metadata."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")


def _figure(chart_id: str, svg: bytes, alt: str, caption: str) -> str:
    return (
        f'<figure id="{chart_id}"><img alt="{html.escape(alt)}" src="{data_uri(svg)}">'
        f"<figcaption>{_inline_code(caption)}</figcaption></figure>"
    )


def render_report_html(data: ReportData, charts: Mapping[str, bytes], *, source: str) -> str:
    simulated = [label for label in data.model_labels.values() if label.endswith("(simulated)")]
    note = (
        f'<p class="note">{html.escape(", ".join(simulated))}: simulated models, offline stand-ins that exist so '
        "the pipeline runs anywhere. Their numbers say nothing about any real model.</p>"
        if simulated
        else ""
    )
    pass_hat_headers, pass_hat_rows = _pass_hat_k_table(data)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!doctype html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Evaluation report: sweep {html.escape(data.sweep_id)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>Evaluation report: sweep <code>{html.escape(data.sweep_id)}</code></h1>",
        f'<p class="meta">From <code>{html.escape(source)}</code>, generated {generated}. '
        f"{len(data.scenarios)} scenario(s), {len(data.model_labels)} model(s). Intervals are 95%; tasks are the "
        "unit of independence (see Method).</p>",
        note,
        "<h2>Pass rate per scenario and model</h2>",
        _figure(
            "chart-pass-rate",
            charts["pass_rate"],
            "Bar chart of pass rate per model and scenario with 95% confidence intervals",
            "Solid whiskers: t-interval from the task-clustered standard error; dashed: task bootstrap. Clipped "
            "to [0, 1] for display; the table has the exact bounds.",
        ),
        _table(
            _GROUP_HEADERS,
            _group_rows(data),
            text_columns=2,
            links=[
                rollouts_link(data.sweep_id, model=row["model_name"], scenario=row["scenario_id"])
                for row in data.groups
            ],
        ),
        '<p class="meta">The viewer links answer while <code>eval-pipelines view</code> runs.</p>',
        "<h2>Per model, over all scenarios</h2>",
        _table(
            ("model", "scenarios", "tasks", "scored", "pass rate", "95% CI (t)", "95% CI (bootstrap)", "cost (USD)"),
            _model_rows(data),
            text_columns=1,
        ),
        "<h2>Model comparisons</h2>",
        "<p>Paired by task. diff = A - B in mean task pass rate; CI from a paired task bootstrap; p from a two-sided "
        "sign-flip permutation test over tasks; McNemar p from the epochs paired by task and epoch (A-only / B-only: "
        "the discordant epochs). MDD: the smallest difference this sweep detects with 80% power (alpha 0.05); a diff "
        "below it is not evidence of no difference. Epochs for 10 pts: rollouts per task that would detect a "
        "10-point difference with these tasks (- when more epochs cannot: add tasks). "
        + (
            f"Every model against the baseline <code>{html.escape(data.baseline)}</code> (B).</p>"
            if data.baseline
            else "Each pair is listed once, better model first.</p>"
        ),
        _table(
            (
                "scenario",
                "A",
                "B",
                "paired tasks",
                "pass rate A",
                "pass rate B",
                "diff",
                "95% CI",
                "p",
                "McNemar p",
                "A-only / B-only epochs",
                "MDD",
                "epochs for 10 pts",
                "tasks A / B better",
            ),
            _comparison_rows(data),
            text_columns=3,
        )
        if data.comparisons
        else "<p>Only one model ran: nothing to compare.</p>",
        "<h2>Noise floor</h2>",
        "<p>How often a task's verdict flips between two identical epochs, pass@k beside pass^k at the sweep's "
        "epochs, and the smallest difference from an equally noisy model this noise alone lets the sweep detect "
        "(MDD floor), with the epochs per task a 10-point difference needs.</p>",
        _table(
            (
                "scenario",
                "model",
                "tasks",
                "epochs (k)",
                "flip rate",
                "unstable / repeated tasks",
                "pass@k",
                "pass^k",
                "MDD floor",
                "epochs for 10 pts",
            ),
            _noise_floor_rows(data),
            text_columns=2,
        ),
        "<h2>Reliability: pass^k</h2>",
        _figure(
            "chart-pass-hat-k",
            charts["pass_hat_k"],
            "Line chart of pass^k and pass@k against k per model",
            "pass^k: probability that all k attempts at a task pass (tau-bench); pass@k: that at least one does. "
            "Both unbiased estimates per task, averaged over tasks.",
        ),
        _table(pass_hat_headers, pass_hat_rows, text_columns=2),
        "<h2>Cost versus pass rate</h2>",
        _figure(
            "chart-cost",
            charts["cost"],
            "Scatter plot of pass rate against cost and tokens per rollout",
            "One point per model and scenario; whiskers are the 95% t-interval.",
        ),
        "<h2>Per-task pass rate</h2>",
        _figure(
            "chart-task-heatmap",
            charts["task_heatmap"],
            "Heatmap of pass rate per task and model",
            "Cells show passes / scored rollouts; grey: no scored rollout.",
        ),
        calibration_html(data.judges, data.sweep_id),
        "<h2>Method</h2>",
        "<ul>",
        *(f"<li>{_inline_code(note_text)}</li>" for note_text in METHODS),
        "</ul>",
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(part for part in parts if part)


def pass_rate_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """scenario_model_metrics rows as a Markdown table with the intervals, simulated models labelled."""
    if not rows:
        return "_no scored rollouts yet_"
    table = [
        {
            "scenario": row["scenario_id"],
            "model": model_label(row["model_name"], row["is_simulated"]),
            "tasks": row["n_tasks"],
            "n": row["n"],
            "errors": _errors(row),
            "pass rate": _pass_rate(row),
            "95% CI (t, clustered)": _interval(row["ci_t_low"], row["ci_t_high"]),
            "95% CI (bootstrap)": _interval(row["ci_boot_low"], row["ci_boot_high"]),
            "cost / rollout (USD)": _usd(row["cost_per_rollout_usd"]),
        }
        for row in rows
    ]
    return markdown_table(table)
