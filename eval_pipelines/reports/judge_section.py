"""The report's section on the judges: every judge beside the verifiers (`judges.py` reads them), flagged judges
first and marked, each disagreeing rollout linked to its page in the viewer."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from eval_pipelines.reports.judges import JudgeCalibration, flag_text, rate
from eval_pipelines.reports.viewer.links import rollout_link, viewer_url

#: How many disagreeing rollouts the report links per judge and scenario; the viewer's page lists them all.
REPORT_DISAGREEMENTS_SHOWN = 20


def judges_page_link(sweep_id: str) -> str:
    """The viewer's calibration page of a sweep."""
    return f"{viewer_url()}/judges?{urlencode({'sweep': sweep_id})}"


CALIBRATION_HEADERS = (
    "scenario",
    "kind",
    "judge",
    "judge model",
    "n",
    "base rate",
    "TPR",
    "TNR",
    "agreement",
    "kappa",
    "flag",
    "disagreeing rollouts",
)


def calibration_cells(row: dict[str, Any]) -> list[str]:
    """The text cells of one calibration row, in CALIBRATION_HEADERS order without the last."""
    return [
        str(row["scenario_id"]),
        str(row["judge_kind"]),
        str(row["judge"]),
        str(row["judge_model"]),
        str(row["n"]),
        rate(row["base_rate"]),
        rate(row["tpr"]),
        rate(row["tnr"]),
        rate(row["agreement"]),
        rate(row["kappa"]),
        flag_text(row) or "ok",
    ]


def _rollout_links(rollouts: Sequence[dict[str, Any]], sweep_id: str) -> str:
    shown = [
        f'<a href="{html.escape(rollout_link(r["rollout_id"]))}" title="judge '
        f'{"pass" if r["judge_pass"] else "fail"}, verifiers {"pass" if r["verifier_pass"] else "fail"}">'
        f"{html.escape(str(r['rollout_id']))}</a>"
        for r in rollouts[:REPORT_DISAGREEMENTS_SHOWN]
    ]
    more = len(rollouts) - len(shown)
    if more > 0:
        shown.append(f'<a href="{html.escape(judges_page_link(sweep_id))}">{more} more</a>')
    return ", ".join(shown) if shown else "none"


def calibration_html(calibration: JudgeCalibration, sweep_id: str) -> str:
    """The report's section: every judge beside the verifiers, flagged judges first and marked."""
    parts = [
        '<h2 id="judge-calibration">Judges graded against the verifiers</h2>',
        "<p>Each rubric, quality and safety judge beside the programmatic verifiers on the rollouts both scored: the "
        "verifiers' pass is the positive class (TPR: the share of verifier passes the judge passes; TNR: of "
        "verifier fails it fails), base rate is the verifiers' pass rate, kappa is Cohen's kappa. A quality judge "
        "passes a rollout at a high score, a safety judge when it does not flag it. A flagged judge's scores are "
        "not to be trusted without a look; its disagreeing rollouts open in the viewer.</p>",
    ]
    if not calibration.rows:
        parts.append("<p>No judge verdict in this sweep has a verifier score beside it: nothing to calibrate.</p>")
        return "\n".join(parts)
    flagged = calibration.flagged
    if flagged:
        names = ", ".join(sorted(f"{r['judge']} ({r['judge_model']}) on {r['scenario_id']}" for r in flagged))
        parts.append(f'<p class="note flagged">Flagged judges: {html.escape(names)}.</p>')
    head = "".join(
        f'<th class="text">{html.escape(h)}</th>' if i < 4 or i >= 10 else f"<th>{html.escape(h)}</th>"
        for i, h in enumerate(CALIBRATION_HEADERS)
    )
    body = []
    for row in calibration.rows:
        cells = calibration_cells(row)
        tds = "".join(
            f'<td class="text">{html.escape(v)}</td>' if i < 4 or i >= 10 else f"<td>{html.escape(v)}</td>"
            for i, v in enumerate(cells)
        )
        links = _rollout_links(calibration.rollouts(row), sweep_id)
        css = ' class="flagged" style="background: #fde8e8"' if row["flagged"] else ""
        body.append(f'<tr{css}>{tds}<td class="text links">{links}</td></tr>')
    parts.append(f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table>")
    return "\n".join(parts)
