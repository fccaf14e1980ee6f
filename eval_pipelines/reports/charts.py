"""The report's charts as SVG documents, drawn here without a plotting library.

Each chart is a complete `<svg>` with its width and height in pixels, so a browser shows it at that size as a
file, as an `<img>` (the report embeds it as a data: URI) or in the Dagster UI's Markdown. Every label is real
text (searchable, and what the tests read). Nothing here imports more than the standard library.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eval_pipelines.reports.data import ReportData

#: Up to this many k the pass^k curves get point markers; beyond it markers would hide the line.
_MARKER_MAX_POINTS = 20
#: Beyond this k the pass^k panels use a logarithmic k axis.
_LINEAR_K_MAX = 16
#: Heatmap cells get their "c/n" text only while there is room for it.
_ANNOTATE_MAX_CELLS = 400
#: Text that marks a pair or task whose rollouts all errored (no pass rate, which is not a pass rate of 0).
_ERROR_COLOR = "#b22222"
_TEXT = "#1d2330"
_MUTED = "#5b6475"
_GRID = "#e3e6ec"
#: Tableau's ten categorical colours, one per model in order.
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
_SCENARIO_MARKERS = ("circle", "square", "triangle", "diamond", "down", "plus", "cross", "star")
#: Red, yellow, green: the heatmap's colour at pass rates 0, 0.5 and 1.
_HEAT_STOPS = ((0.0, (165, 0, 38)), (0.5, (255, 255, 191)), (1.0, (0, 104, 55)))
_NO_DATA = "#d3d3d3"


def text_width(text: str, size: float) -> float:
    """An estimate of a label's width in pixels for the sans-serif font the charts name (for layout only)."""
    return len(text) * size * 0.58


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


@dataclass
class Svg:
    """An SVG document being drawn: shapes are appended in order, later ones on top."""

    width: float
    height: float
    title: str
    parts: list[str] = field(default_factory=list)

    def line(self, x1: float, y1: float, x2: float, y2: float, color: str = _TEXT, **style: Any) -> None:
        self.parts.append(
            f'<line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" stroke="{color}"{_style(style)}/>'
        )

    def polyline(self, points: Sequence[tuple[float, float]], color: str, **style: Any) -> None:
        coords = " ".join(f"{_num(x)},{_num(y)}" for x, y in points)
        self.parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}"{_style(style)}/>')

    def rect(self, x: float, y: float, w: float, h: float, fill: str, tip: str | None = None, **style: Any) -> None:
        body = f"<title>{html.escape(tip)}</title>" if tip else ""
        self.parts.append(
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(max(w, 0))}" height="{_num(max(h, 0))}" '
            f'fill="{fill}"{_style(style)}>{body}</rect>'
        )

    def text(self, x: float, y: float, text: str, size: float = 11, anchor: str = "start", **style: Any) -> None:
        rotate = style.pop("rotate", None)
        transform = f' transform="rotate({rotate} {_num(x)} {_num(y)})"' if rotate else ""
        style.setdefault("fill", _TEXT)
        self.parts.append(
            f'<text x="{_num(x)}" y="{_num(y)}" font-size="{_num(size)}" text-anchor="{anchor}"{transform}'
            f"{_style(style)}>{html.escape(text)}</text>"
        )

    def marker(self, x: float, y: float, shape: str, color: str, size: float = 4.5) -> None:
        s = size
        if shape == "circle":
            self.parts.append(f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{_num(s)}" fill="{color}"/>')
            return
        if shape == "square":
            self.rect(x - s, y - s, 2 * s, 2 * s, color)
            return
        outlines = {
            "triangle": [(0, -s * 1.2), (s * 1.1, s * 0.8), (-s * 1.1, s * 0.8)],
            "down": [(0, s * 1.2), (s * 1.1, -s * 0.8), (-s * 1.1, -s * 0.8)],
            "diamond": [(0, -s * 1.3), (s, 0), (0, s * 1.3), (-s, 0)],
            "star": [
                (math.cos(math.pi / 2 + i * math.pi / 5) * (s * 1.4 if i % 2 == 0 else s * 0.6),
                 -math.sin(math.pi / 2 + i * math.pi / 5) * (s * 1.4 if i % 2 == 0 else s * 0.6))
                for i in range(10)
            ],
        }  # fmt: skip
        if shape in outlines:
            points = " ".join(f"{_num(x + dx)},{_num(y + dy)}" for dx, dy in outlines[shape])
            self.parts.append(f'<polygon points="{points}" fill="{color}"/>')
            return
        if shape == "plus":
            self.line(x - s, y, x + s, y, color, stroke_width=2.5)
            self.line(x, y - s, x, y + s, color, stroke_width=2.5)
            return
        self.line(x - s, y - s, x + s, y + s, color, stroke_width=2.5)  # cross
        self.line(x - s, y + s, x + s, y - s, color, stroke_width=2.5)

    def render(self) -> str:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{math.ceil(self.width)}" '
            f'height="{math.ceil(self.height)}" viewBox="0 0 {math.ceil(self.width)} {math.ceil(self.height)}" '
            'role="img" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">'
            f"<title>{html.escape(self.title)}</title>"
            f'<rect width="100%" height="100%" fill="#ffffff"/>' + "".join(self.parts) + "</svg>\n"
        )


def _style(style: Mapping[str, Any]) -> str:
    return "".join(f' {key.replace("_", "-")}="{value}"' for key, value in style.items() if value is not None)


@dataclass(frozen=True)
class Frame:
    """A plot area in pixels and the data range it shows; `log_x` maps x logarithmically."""

    left: float
    top: float
    width: float
    height: float
    x_range: tuple[float, float]
    y_range: tuple[float, float] = (0.0, 1.0)
    log_x: bool = False

    def x(self, value: float) -> float:
        low, high = self.x_range
        if self.log_x:
            value, low, high = math.log10(value), math.log10(low), math.log10(high)
        return self.left + (value - low) / ((high - low) or 1.0) * self.width

    def y(self, value: float) -> float:
        low, high = self.y_range
        return self.top + self.height - (value - low) / ((high - low) or 1.0) * self.height


def _y_axis(svg: Svg, frame: Frame, label: str) -> None:
    """Grid lines and labels at 0, 0.2, ..., 1 (pass rates), the axis line and its label."""
    for step in range(6):
        value = step / 5
        y = frame.y(value)
        svg.line(frame.left, y, frame.left + frame.width, y, _GRID)
        svg.text(frame.left - 6, y + 4, f"{value:.1f}", 10, "end", fill=_MUTED)
    svg.line(frame.left, frame.top, frame.left, frame.top + frame.height, _MUTED)
    svg.line(frame.left, frame.top + frame.height, frame.left + frame.width, frame.top + frame.height, _MUTED)
    middle = frame.top + frame.height / 2
    svg.text(frame.left - 40, middle, label, 11, "middle", rotate=-90)


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def _tick_label(value: float) -> str:
    if value == int(value):
        return str(int(value))
    return f"{value:.4g}"


def _x_axis(svg: Svg, frame: Frame, ticks: Sequence[float], label: str) -> None:
    bottom = frame.top + frame.height
    for value in ticks:
        x = frame.x(value)
        svg.line(x, frame.top, x, bottom, _GRID)
        svg.text(x, bottom + 14, _tick_label(value), 10, "middle", fill=_MUTED)
    svg.text(frame.left + frame.width / 2, bottom + 30, label, 11, "middle")


def _legend(svg: Svg, left: float, top: float, entries: Sequence[tuple[str, str, str]]) -> None:
    """Entries of (kind, colour, label): kind is "box", "line", "dash" or a marker shape."""
    for index, (kind, color, label) in enumerate(entries):
        y = top + index * 18
        if kind == "box":
            svg.rect(left, y - 9, 12, 12, color)
        elif kind in ("line", "dash"):
            svg.line(
                left - 2,
                y - 3,
                left + 16,
                y - 3,
                color,
                stroke_width=2,
                stroke_dasharray="5 3" if kind == "dash" else None,
            )
        else:
            svg.marker(left + 6, y - 3, kind, color)
        svg.text(left + 22, y + 1, label, 10)


def model_colors(labels: Mapping[str, str]) -> dict[str, str]:
    return {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(labels)}


def _value(row: Mapping[str, Any] | None, column: str) -> float:
    if row is None or row.get(column) is None:
        return math.nan
    return float(row[column])


def _whisker(svg: Svg, frame: Frame, x: float, low: float, high: float, color: str, dashed: bool = False) -> None:
    """A vertical interval clipped to [0, 1] for display, with caps."""
    if math.isnan(low) or math.isnan(high):
        return
    top, bottom = frame.y(min(high, 1.0)), frame.y(max(low, 0.0))
    dash = "4 2" if dashed else None
    svg.line(x, top, x, bottom, color, stroke_width=1.4, stroke_dasharray=dash)
    svg.line(x - 3, top, x + 3, top, color, stroke_width=1.4)
    svg.line(x - 3, bottom, x + 3, bottom, color, stroke_width=1.4)


def pass_rate_chart(sweep_id: str, groups: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> str:
    """Bars: pass rate per scenario (x) and model (bar); whiskers: the 95% t-interval and the bootstrap interval."""
    scenarios = sorted({row["scenario_id"] for row in groups})
    models = list(labels)
    by_key = {(row["scenario_id"], row["model_name"]): row for row in groups}
    colors = model_colors(labels)
    legend_width = max([text_width(labels[m], 10) for m in models] + [text_width("95% CI: t, task-clustered SE", 10)])
    slot = max(60.0 * len(models) + 40, max((text_width(s, 10) for s in scenarios), default=0) + 20)
    plot_width = max(420.0, slot * len(scenarios))
    svg = Svg(70 + plot_width + 40 + legend_width + 20, 380, f"Pass rate with 95% confidence intervals, {sweep_id}")
    frame = Frame(70, 40, plot_width, 280, (0.0, float(len(scenarios))), (0.0, 1.08))
    svg.text(svg.width / 2, 22, f"Pass rate with 95% confidence intervals (sweep {sweep_id})", 13, "middle")
    _y_axis(svg, frame, "pass rate (scored rollouts)")
    bar = frame.width / max(len(scenarios), 1) * 0.8 / max(len(models), 1)
    for i, scenario in enumerate(scenarios):
        centre = frame.x(i + 0.5)
        svg.text(centre, frame.top + frame.height + 16, scenario, 10, "middle")
        for j, model in enumerate(models):
            row = by_key.get((scenario, model))
            x = centre - bar * len(models) / 2 + bar * (j + 0.5)
            rate = _value(row, "pass_rate")
            if not math.isnan(rate):
                top = frame.y(rate)
                svg.rect(
                    x - bar * 0.45, top, bar * 0.9, frame.y(0) - top, colors[model], f"{labels[model]}: {rate:.3f}"
                )
                _whisker(svg, frame, x - bar * 0.15, _value(row, "ci_t_low"), _value(row, "ci_t_high"), "#000000")
                _whisker(
                    svg, frame, x + bar * 0.15, _value(row, "ci_boot_low"), _value(row, "ci_boot_high"), "#696969", True
                )
                color = "#ffffff" if rate >= 0.08 else _TEXT
                svg.text(x, frame.y(0) - 4, f"{rate:.2f}", 9, "middle", fill=color, font_weight="bold")
            elif row is not None and row.get("n_errors"):
                # No bar is not a zero: every rollout of this pair errored, so it has no pass rate at all.
                svg.text(
                    x + 3, frame.y(0) - 4, f"{row['n_errors']} errors, no pass rate", 9, "start", fill=_ERROR_COLOR,
                    font_weight="bold", rotate=-90,
                )  # fmt: skip
    entries = [("box", colors[m], labels[m]) for m in models]
    entries += [("line", "#000000", "95% CI: t, task-clustered SE"), ("dash", "#696969", "95% CI: task bootstrap")]
    _legend(svg, frame.left + frame.width + 30, frame.top + 10, entries)
    return svg.render()


def _grid(count: int, columns: int = 3) -> tuple[int, int]:
    cols = min(columns, max(count, 1))
    return math.ceil(max(count, 1) / cols), cols


def _k_panel(svg: Svg, frame: Frame, data: ReportData, scenario: str, colors: Mapping[str, str]) -> bool:
    """One scenario's pass^k and pass@k curves; True when some k covers fewer tasks."""
    labels = data.model_labels
    excluded = False
    all_errors: list[str] = []
    _y_axis(svg, frame, "mean over tasks")
    ks = [r["k"] for r in data.pass_at_k if r["scenario_id"] == scenario and r["k"] is not None]
    max_k = max(ks, default=1)
    if frame.log_x:
        ticks = [float(10**e) for e in range(int(math.log10(max_k)) + 1)]
    else:
        ticks = [t for t in _nice_ticks(1, max_k, 6) if t == int(t) and t >= 1]
    _x_axis(svg, frame, ticks, "k (attempts)")
    svg.text(frame.left + frame.width / 2, frame.top - 8, scenario, 11, "middle", font_weight="bold")
    for model in labels:
        mine = [r for r in data.pass_at_k if r["scenario_id"] == scenario and r["model_name"] == model]
        # A pair whose rollouts all errored has one row with a NULL k: there is no curve to draw.
        points = [r for r in mine if r["k"] is not None]
        if not points:
            all_errors += [labels[model] for r in mine if r.get("n_errors")][:1]
            continue
        excluded = excluded or any(r["n_tasks_excluded"] for r in points)
        hat = [(frame.x(r["k"]), frame.y(r["pass_hat_k"])) for r in points]
        at = [(frame.x(r["k"]), frame.y(r["pass_at_k"])) for r in points]
        svg.polyline(hat, colors[model], stroke_width=1.8)
        svg.polyline(at, colors[model], stroke_width=1.5, stroke_dasharray="5 3", stroke_opacity=0.75)
        if len(points) <= _MARKER_MAX_POINTS:
            for x, y in hat:
                svg.marker(x, y, "circle", colors[model], 2.8)
    if all_errors:
        svg.text(
            frame.left + frame.width / 2, frame.top + 14, "all rollouts errored, no pass^k: " + ", ".join(all_errors),
            9, "middle", fill=_ERROR_COLOR,
        )  # fmt: skip
    return excluded


def pass_hat_k_chart(data: ReportData) -> str:
    """pass^k (solid) and pass@k (dashed) against k, one panel per scenario."""
    labels, colors = data.model_labels, model_colors(data.model_labels)
    rows, cols = _grid(len(data.scenarios))
    panel_w, panel_h = 330.0, 250.0
    legend_width = max([text_width(v, 10) for v in labels.values()] + [text_width("pass@k: at least one passes", 10)])
    width = cols * panel_w + legend_width + 60
    svg = Svg(width, rows * panel_h + 70, f"Reliability: pass^k and pass@k by k, {data.sweep_id}")
    svg.text(cols * panel_w / 2, 20, f"Reliability: pass^k and pass@k by k (sweep {data.sweep_id})", 13, "middle")
    excluded = False
    for index, scenario in enumerate(data.scenarios):
        row, col = divmod(index, cols)
        max_k = max((r["k"] for r in data.pass_at_k if r["scenario_id"] == scenario and r["k"] is not None), default=1)
        # With hundreds of rollouts per task the curves change within the first few k; a log axis shows them.
        log_x = max_k > _LINEAR_K_MAX
        frame = Frame(
            col * panel_w + 60, row * panel_h + 55, panel_w - 80, panel_h - 100,
            (1.0, float(max(max_k, 2))), (-0.02, 1.02), log_x,
        )  # fmt: skip
        excluded = _k_panel(svg, frame, data, scenario, colors) or excluded
    entries = [("line", colors[m], labels[m]) for m in labels]
    entries += [("line", "#000000", "pass^k: all k attempts pass"), ("dash", "#000000", "pass@k: at least one passes")]
    _legend(svg, cols * panel_w + 20, 60, entries)
    if excluded:
        svg.text(
            8, svg.height - 8, "Where some tasks have fewer than k scored rollouts, the mean at k covers fewer tasks "
            "(n_tasks_excluded in the pass_at_k view).", 9, fill=_MUTED,
        )  # fmt: skip
    return svg.render()


def _cost_panel(svg: Svg, frame: Frame, data: ReportData, column: str, xlabel: str, markers: Mapping[str, str]) -> None:
    colors = model_colors(data.model_labels)
    points = []
    for row in data.groups:
        y = _value(row, "pass_rate")
        if not math.isnan(y):
            x = _value(row, column)
            points.append((0.0 if math.isnan(x) else x, y, row))
    top_x = max((x for x, _, _ in points), default=0.0)
    high = top_x * 1.1 if top_x > 0 else 1.0
    frame = Frame(frame.left, frame.top, frame.width, frame.height, (0.0, high), (-0.02, 1.08))
    _y_axis(svg, frame, "pass rate, 95% t-interval")
    _x_axis(svg, frame, _nice_ticks(0.0, high), xlabel)
    for x, y, row in points:
        color = colors[row["model_name"]]
        _whisker(svg, frame, frame.x(x), _value(row, "ci_t_low"), _value(row, "ci_t_high"), color)
        svg.marker(frame.x(x), frame.y(y), markers[row["scenario_id"]], color)
    if points and top_x == 0.0:
        svg.text(
            frame.left + frame.width / 2, frame.top + 14,
            f"every group reports 0 {xlabel} (simulated models have no cost)", 10, "middle", fill=_MUTED,
        )  # fmt: skip


def cost_chart(data: ReportData) -> str:
    """Pass rate (with its t-interval) against cost and against tokens per rollout, per model x scenario."""
    labels, colors = data.model_labels, model_colors(data.model_labels)
    markers = {s: _SCENARIO_MARKERS[i % len(_SCENARIO_MARKERS)] for i, s in enumerate(data.scenarios)}
    entries = [("circle", colors[m], labels[m]) for m in labels]
    entries += [(markers[s], "#808080", f"scenario {s}") for s in data.scenarios]
    legend_width = max(text_width(label, 10) for _, _, label in entries)
    panel_w = 420.0
    svg = Svg(
        2 * panel_w + legend_width + 60, max(360.0, 80 + 18 * len(entries)), f"Cost versus pass rate, {data.sweep_id}"
    )
    svg.text(panel_w, 20, f"Cost versus pass rate (sweep {data.sweep_id})", 13, "middle")
    panels = (("cost_per_rollout_usd", "cost per rollout (USD)"), ("tokens_per_rollout", "tokens per rollout"))
    for index, (column, xlabel) in enumerate(panels):
        frame = Frame(index * panel_w + 70, 45, panel_w - 100, 250, (0.0, 1.0))
        _cost_panel(svg, frame, data, column, xlabel, markers)
    _legend(svg, 2 * panel_w + 20, 60, entries)
    return svg.render()


def heat_color(rate: float) -> str:
    """The heatmap's colour for a pass rate in [0, 1]: red through yellow to green."""
    rate = min(max(rate, 0.0), 1.0)
    for (low, c0), (high, c1) in itertools.pairwise(_HEAT_STOPS):
        if rate <= high:
            t = (rate - low) / (high - low)
            r, g, b = (round(a + (b - a) * t) for a, b in zip(c0, c1, strict=True))
            return f"#{r:02x}{g:02x}{b:02x}"
    return "#006837"


def task_heatmap_chart(data: ReportData) -> str:
    """Pass rate per task (row) and model (column); grey where the model has no scored rollout of the task."""
    labels = data.model_labels
    models = list(labels)
    task_keys = sorted({(r["scenario_id"], r["task_id"]) for r in data.tasks})
    by_key = {(r["scenario_id"], r["task_id"], r["model_name"]): r for r in data.tasks}
    several_scenarios = len({s for s, _ in task_keys}) > 1
    row_labels = [f"{s} / {t}" if several_scenarios else t for s, t in task_keys]
    row_h = 20.0 if len(task_keys) <= 60 else 9.0
    font = 10 if len(task_keys) <= 60 else 7
    col_w = max(70.0, max((text_width(labels[m], 10) for m in models), default=0) * 0.75 + 10)
    left = max((text_width(label, font) for label in row_labels), default=40) + 16
    title = f"Pass rate per task (sweep {data.sweep_id}); cells: passes/scored, or errors where none scored"
    top = 40.0
    width = max(left + col_w * len(models) + 110, text_width(title, 12) + 20)
    svg = Svg(width, top + row_h * len(task_keys) + 90, f"Pass rate per task, {data.sweep_id}")
    svg.text(8, 20, title, 12)
    annotate = len(task_keys) * len(models) <= _ANNOTATE_MAX_CELLS
    for i, (scenario, task) in enumerate(task_keys):
        y = top + i * row_h
        svg.text(left - 6, y + row_h / 2 + font * 0.35, row_labels[i], font, "end")
        for j, model in enumerate(models):
            row = by_key.get((scenario, task, model))
            rate = _value(row, "pass_rate")
            x = left + j * col_w
            fill = _NO_DATA if math.isnan(rate) else heat_color(rate)
            tip = f"{row_labels[i]}, {labels[model]}: " + ("no scored rollout" if math.isnan(rate) else f"{rate:.3f}")
            svg.rect(x, y, col_w, row_h, fill, tip, stroke="#ffffff", stroke_width=1)
            if not annotate or row is None:
                continue
            if row["n"]:
                share = row["passes"] / row["n"]
                color = "#ffffff" if share < 0.2 or share > 0.8 else _TEXT
                svg.text(x + col_w / 2, y + row_h / 2 + 3.5, f"{row['passes']}/{row['n']}", 9, "middle", fill=color)
            elif row.get("n_errors"):
                svg.text(x + col_w / 2, y + row_h / 2 + 3.5, f"{row['n_errors']} err", 9, "middle", fill=_ERROR_COLOR)
    bottom = top + row_h * len(task_keys)
    for j, model in enumerate(models):
        x = left + j * col_w + col_w / 2
        svg.text(x, bottom + 12, labels[model], 10, "end", rotate=-20)
    # The colour scale: 0 at the bottom, 1 at the top.
    bar_x, bar_h = left + col_w * len(models) + 20, min(200.0, max(row_h * len(task_keys), 80.0))
    for step in range(20):
        svg.rect(bar_x, top + bar_h * (19 - step) / 20, 14, bar_h / 20 + 0.5, heat_color((step + 0.5) / 20))
    for value in (0.0, 0.5, 1.0):
        svg.text(bar_x + 18, top + bar_h * (1 - value) + 4, f"{value:.1f}", 9, fill=_MUTED)
    svg.text(bar_x + 50, top + bar_h / 2, "pass rate", 10, "middle", rotate=90)
    return svg.render()
