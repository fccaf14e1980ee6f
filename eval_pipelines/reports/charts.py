"""The report's charts as matplotlib Figures, and their PNG bytes.

Figures are built with `matplotlib.figure.Figure` directly, never pyplot: no global figure registry, no GUI
backend, safe in a Dagster worker thread. PNGs are rendered by the Agg canvas.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipelines.inputs.paths import data_dir

# matplotlib keeps a font cache in the user's home; kept under the project's data instead, so that a sweep writes
# nothing outside its project directory (a user's own MPLCONFIGDIR wins).
os.environ.setdefault("MPLCONFIGDIR", str(data_dir() / "cache" / "matplotlib"))

import matplotlib  # after MPLCONFIGDIR is set: it is read at import
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from eval_pipelines.reports.data import ReportData

DPI = 100
#: Up to this many k the pass^k curves get point markers; beyond it markers would hide the line.
_MARKER_MAX_POINTS = 20
#: Beyond this k the pass^k panels use a logarithmic k axis.
_LINEAR_K_MAX = 16
_SCENARIO_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: Heatmap cells get their "c/n" text only while there is room for it.
_ANNOTATE_MAX_CELLS = 400
#: Text that marks a pair or task whose rollouts all errored (no pass rate, which is not a pass rate of 0).
_ERROR_COLOR = "firebrick"


def figure_png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    # No "Software" text chunk: the same data renders to the same bytes across matplotlib patch versions.
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return buffer.getvalue()


def model_colors(labels: Mapping[str, str]) -> dict[str, Any]:
    palette = matplotlib.colormaps["tab10"]
    return {name: palette(i % 10) for i, name in enumerate(labels)}


def _value(row: Mapping[str, Any] | None, column: str) -> float:
    if row is None or row.get(column) is None:
        return math.nan
    return float(row[column])


def _clipped_errors(
    values: Sequence[float], lows: Sequence[float], highs: Sequence[float]
) -> tuple[list[float], list[float]]:
    """Error-bar lengths below and above each value, the interval clipped to [0, 1] for display."""
    below = [v - max(low, 0.0) if not math.isnan(low) else math.nan for v, low in zip(values, lows, strict=True)]
    above = [min(high, 1.0) - v if not math.isnan(high) else math.nan for v, high in zip(values, highs, strict=True)]
    return below, above


def pass_rate_figure(sweep_id: str, groups: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> Figure:
    """Bars: pass rate per scenario (x) and model (bar); whiskers: the 95% t-interval and the bootstrap interval."""
    scenarios = sorted({row["scenario_id"] for row in groups})
    models = list(labels)
    by_key = {(row["scenario_id"], row["model_name"]): row for row in groups}
    colors = model_colors(labels)
    figure = Figure(figsize=(max(6.5, 2.0 + len(scenarios) * (0.75 * len(models) + 0.8)), 4.8))
    axes = figure.add_subplot()
    width = 0.8 / max(len(models), 1)
    for j, model in enumerate(models):
        xs = np.arange(len(scenarios)) - 0.4 + width * (j + 0.5)
        rows = [by_key.get((scenario, model)) for scenario in scenarios]
        ys = [_value(row, "pass_rate") for row in rows]
        axes.bar(xs, np.nan_to_num(ys), width * 0.9, color=colors[model], label=labels[model], alpha=0.85)
        t_err = _clipped_errors(ys, [_value(r, "ci_t_low") for r in rows], [_value(r, "ci_t_high") for r in rows])
        boot_err = _clipped_errors(
            ys, [_value(r, "ci_boot_low") for r in rows], [_value(r, "ci_boot_high") for r in rows]
        )
        axes.errorbar(
            xs - width * 0.15, ys, yerr=t_err, fmt="none", ecolor="black", elinewidth=1.4, capsize=3,
            label="95% CI: t, task-clustered SE" if j == 0 else None,
        )  # fmt: skip
        axes.errorbar(
            xs + width * 0.15, ys, yerr=boot_err, fmt="none", ecolor="dimgray", elinewidth=1.4, capsize=3,
            linestyle="--", label="95% CI: task bootstrap" if j == 0 else None,
        )  # fmt: skip
        for x, y, row in zip(xs, ys, rows, strict=True):
            if not math.isnan(y):
                # Inside a bar tall enough to hold it, otherwise just above the axis in dark text.
                color = "white" if y >= 0.08 else "black"
                axes.text(x, 0.01, f"{y:.2f}", ha="center", va="bottom", fontsize=7, color=color, weight="bold")
            elif row is not None and row.get("n_errors"):
                # No bar is not a zero: every rollout of this pair errored, so it has no pass rate at all.
                axes.text(
                    x, 0.01, f"{row['n_errors']} errors, no pass rate", ha="center", va="bottom", fontsize=7,
                    color=_ERROR_COLOR, rotation=90, weight="bold",
                )  # fmt: skip
    axes.set_xticks(range(len(scenarios)), scenarios)
    axes.set_ylim(0, 1.08)
    axes.set_ylabel("pass rate (scored rollouts)")
    axes.set_title(f"Pass rate with 95% confidence intervals (sweep {sweep_id})")
    axes.grid(axis="y", alpha=0.3)
    handles, names = axes.get_legend_handles_labels()
    # Models first, then the two whisker styles (matplotlib lists them in the order they were drawn).
    order = sorted(range(len(names)), key=lambda i: names[i].startswith("95% CI"))
    axes.legend(
        [handles[i] for i in order], [names[i] for i in order], loc="upper left", bbox_to_anchor=(1.01, 1.0),
        fontsize=8, frameon=False,
    )  # fmt: skip
    return figure


def _grid(count: int, columns: int = 3) -> tuple[int, int]:
    cols = min(columns, max(count, 1))
    return math.ceil(max(count, 1) / cols), cols


def pass_hat_k_figure(data: ReportData) -> Figure:
    """pass^k (solid) and pass@k (dashed) against k, one panel per scenario."""
    labels, colors = data.model_labels, model_colors(data.model_labels)
    scenarios = data.scenarios
    rows, cols = _grid(len(scenarios))
    figure = Figure(figsize=(4.6 * cols + 2.2, 3.6 * rows + 0.6))
    excluded = False
    for index, scenario in enumerate(scenarios):
        axes: Axes = figure.add_subplot(rows, cols, index + 1)
        all_errors: list[str] = []
        for model in labels:
            mine = [r for r in data.pass_at_k if r["scenario_id"] == scenario and r["model_name"] == model]
            # A pair whose rollouts all errored has one row with a NULL k: there is no curve to draw.
            points = [r for r in mine if r["k"] is not None]
            if not points:
                all_errors += [labels[model] for r in mine if r.get("n_errors")][:1]
                continue
            excluded = excluded or any(r["n_tasks_excluded"] for r in points)
            ks = [r["k"] for r in points]
            marker = "o" if len(ks) <= _MARKER_MAX_POINTS else None
            axes.plot(ks, [r["pass_hat_k"] for r in points], color=colors[model], marker=marker, markersize=4)
            axes.plot(ks, [r["pass_at_k"] for r in points], color=colors[model], linestyle="--", alpha=0.7)
        axes.set_title(scenario, fontsize=10)
        axes.set_xlabel("k (attempts)")
        axes.set_ylabel("mean over tasks")
        axes.set_ylim(-0.02, 1.02)
        if all_errors:
            axes.text(
                0.5, 0.97, "all rollouts errored, no pass^k: " + ", ".join(all_errors), transform=axes.transAxes,
                ha="center", va="top", fontsize=8, color=_ERROR_COLOR,
            )  # fmt: skip
        max_k = max((r["k"] for r in data.pass_at_k if r["scenario_id"] == scenario and r["k"] is not None), default=1)
        if max_k > _LINEAR_K_MAX:
            # With hundreds of rollouts per task the curves change within the first few k; a log axis shows them.
            axes.set_xscale("log")
            axes.xaxis.set_major_formatter(ScalarFormatter())
        else:
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(alpha=0.3)
    handles = [Line2D([], [], color=colors[m], label=labels[m]) for m in labels]
    handles += [
        Line2D([], [], color="black", label="pass^k: all k attempts pass"),
        Line2D([], [], color="black", linestyle="--", label="pass@k: at least one passes"),
    ]
    figure.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    figure.suptitle(f"Reliability: pass^k and pass@k by k (sweep {data.sweep_id})")
    if excluded:
        figure.text(
            0.01, -0.02, "Where some tasks have fewer than k scored rollouts, the mean at k covers fewer tasks "
            "(n_tasks_excluded in the pass_at_k view).", fontsize=7,
        )  # fmt: skip
    figure.tight_layout()
    return figure


def cost_figure(data: ReportData) -> Figure:
    """Pass rate (with its t-interval) against cost and against tokens per rollout, per model x scenario."""
    labels, colors = data.model_labels, model_colors(data.model_labels)
    markers = {s: _SCENARIO_MARKERS[i % len(_SCENARIO_MARKERS)] for i, s in enumerate(data.scenarios)}
    figure = Figure(figsize=(12, 4.6))
    panels = (("cost_per_rollout_usd", "cost per rollout (USD)"), ("tokens_per_rollout", "tokens per rollout"))
    for index, (column, xlabel) in enumerate(panels):
        axes = figure.add_subplot(1, 2, index + 1)
        xs_seen: list[float] = []
        for row in data.groups:
            x, y = _value(row, column), _value(row, "pass_rate")
            if math.isnan(y):
                continue
            x = 0.0 if math.isnan(x) else x
            xs_seen.append(x)
            below, above = _clipped_errors([y], [_value(row, "ci_t_low")], [_value(row, "ci_t_high")])
            axes.errorbar(
                [x], [y], yerr=[below, above], fmt=markers[row["scenario_id"]], color=colors[row["model_name"]],
                ecolor=colors[row["model_name"]], markersize=8, capsize=3, alpha=0.9,
            )  # fmt: skip
        if xs_seen and max(xs_seen) == 0.0:
            axes.text(
                0.5, 0.97, f"every group reports 0 {xlabel} (simulated models have no cost)",
                transform=axes.transAxes, ha="center", va="top", fontsize=9, color="dimgray",
            )  # fmt: skip
        axes.set_xlabel(xlabel)
        axes.set_ylabel("pass rate, 95% t-interval")
        axes.set_ylim(-0.02, 1.08)
        axes.grid(alpha=0.3)
    handles = [Line2D([], [], color=colors[m], marker="o", linestyle="", label=labels[m]) for m in labels]
    handles += [
        Line2D([], [], color="gray", marker=markers[s], linestyle="", label=f"scenario {s}") for s in data.scenarios
    ]
    figure.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    figure.suptitle(f"Cost versus pass rate (sweep {data.sweep_id})")
    figure.tight_layout()
    return figure


def task_heatmap_figure(data: ReportData) -> Figure:
    """Pass rate per task (row) and model (column); grey where the model has no scored rollout of the task."""
    labels = data.model_labels
    models = list(labels)
    task_keys = sorted({(r["scenario_id"], r["task_id"]) for r in data.tasks})
    by_key = {(r["scenario_id"], r["task_id"], r["model_name"]): r for r in data.tasks}
    matrix = np.full((len(task_keys), len(models)), np.nan)
    for i, (scenario, task) in enumerate(task_keys):
        for j, model in enumerate(models):
            matrix[i, j] = _value(by_key.get((scenario, task, model)), "pass_rate")
    several_scenarios = len({s for s, _ in task_keys}) > 1
    row_labels = [f"{s} / {t}" if several_scenarios else t for s, t in task_keys]
    row_height = 0.32 if len(task_keys) <= 60 else 0.14
    figure = Figure(figsize=(max(6.0, 1.6 * len(models) + 3.5), max(3.0, row_height * len(task_keys) + 2.0)))
    axes = figure.add_subplot()
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="lightgray")
    image = axes.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    axes.set_xticks(range(len(models)), [labels[m] for m in models], rotation=20, ha="right")
    axes.set_yticks(range(len(task_keys)), row_labels, fontsize=8 if len(task_keys) <= 60 else 5)
    if matrix.size <= _ANNOTATE_MAX_CELLS:
        for i, (scenario, task) in enumerate(task_keys):
            for j, model in enumerate(models):
                row = by_key.get((scenario, task, model))
                if row is not None and row["n"]:
                    rate = row["passes"] / row["n"]
                    color = "white" if rate < 0.2 or rate > 0.8 else "black"
                    axes.text(j, i, f"{row['passes']}/{row['n']}", ha="center", va="center", fontsize=7, color=color)
                elif row is not None and row.get("n_errors"):
                    axes.text(j, i, f"{row['n_errors']} err", ha="center", va="center", fontsize=7, color=_ERROR_COLOR)
    figure.colorbar(image, ax=axes, label="pass rate", fraction=0.05)
    axes.set_title(f"Pass rate per task (sweep {data.sweep_id}); cells: passes/scored, or errors where none scored")
    return figure
