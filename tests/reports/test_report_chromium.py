"""The report renders in a real browser: headless Debian `chromium` loads the HTML in a 1280 px window, every chart
image decodes to its full size, and nothing makes the page wider than the window (its wide tables scroll in their
own box). The report itself has no script; the test loads a copy with a probe script appended that writes each
image's natural size and the page's widths into the DOM, then reads them from `--dump-dom`."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.reports import build_report

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian `chromium` is not installed (`apt-get install -y chromium`); CI installs it"
)

CHART_IDS = {"chart-pass-rate", "chart-pass-hat-k", "chart-cost", "chart-task-heatmap"}

# A deliberately broken image proves the probe can report a failure (natural size 0).
PROBE = """
<img id="control-broken" alt="control" src="data:image/png;base64,AAAA">
<pre id="image-sizes">pending</pre>
<pre id="page-widths">pending</pre>
<script>
window.addEventListener("load", function () {
  var sizes = Array.from(document.images).map(function (img) {
    var figure = img.closest("figure");
    return {id: figure ? figure.id : img.id, complete: img.complete,
            width: img.naturalWidth, height: img.naturalHeight};
  });
  // Measured before the probe writes its own (unwrapped) lines into the page.
  var root = document.documentElement;
  var tables = Array.from(document.querySelectorAll("table")).map(function (t) { return t.scrollWidth; });
  var widths = {scroll: root.scrollWidth, client: root.clientWidth, widest_table: Math.max.apply(null, tables)};
  document.getElementById("image-sizes").textContent = JSON.stringify(sizes);
  document.getElementById("page-widths").textContent = JSON.stringify(widths);
});
</script>
"""


def _dump_dom(page: Path, profile: Path) -> str:
    assert CHROMIUM is not None
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--window-size=1280,900",
            # Lets the load event and the probe run before the DOM is dumped, without a wall-clock sleep.
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout


def _svg_size(path: Path) -> tuple[int, int]:
    root = ET.fromstring(path.read_bytes())
    return int(root.attrib["width"]), int(root.attrib["height"])


def test_every_chart_decodes_at_its_full_size_in_chromium(report_catalog: Path, tmp_path: Path) -> None:
    files = build_report(report_catalog, tmp_path / "report.html")
    probe = tmp_path / "probe.html"
    probe.write_text(files.html.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")

    dom = _dump_dom(probe, tmp_path / "chromium-profile")
    match = re.search(r'<pre id="image-sizes">(.*?)</pre>', dom, re.S)
    assert match, dom[-2000:]
    sizes: list[dict[str, Any]] = json.loads(html.unescape(match.group(1)))
    by_id = {s["id"]: s for s in sizes}

    assert set(by_id) == CHART_IDS | {"control-broken"}
    assert by_id["control-broken"]["width"] == 0
    svg_of = {
        "chart-pass-rate": files.charts["pass_rate"],
        "chart-pass-hat-k": files.charts["pass_hat_k"],
        "chart-cost": files.charts["cost"],
        "chart-task-heatmap": files.charts["task_heatmap"],
    }
    for chart_id in CHART_IDS:
        size = by_id[chart_id]
        assert size["complete"] and size["width"] > 300 and size["height"] > 200, size
        assert (size["width"], size["height"]) == _svg_size(svg_of[chart_id])
    assert "Evaluation report: sweep" in dom and "sim-oracle (simulated)" in dom
    widths_found = re.search(r'<pre id="page-widths">(.*?)</pre>', dom, re.S)
    assert widths_found, dom[-2000:]
    widths = json.loads(html.unescape(widths_found.group(1)))
    # The per-group table is wider than the page's column, and scrolls in its box instead of widening the page.
    assert 1200 <= widths["client"] <= 1280 and widths["scroll"] <= widths["client"], widths
    assert widths["widest_table"] > widths["client"] - 64, widths
