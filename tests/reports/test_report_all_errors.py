"""A model x scenario whose rollouts all errored has no pass rate, and every report shows it as errors: the CLI's
`report`, the `eval_report` asset's builder, the charts and the Markdown table. That is the case the error design
exists for (a dead endpoint), so none of them may crash on it or draw it as a 0."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from eval_pipelines.cli import EXIT_ERRORS
from eval_pipelines.reports import build_report, load_report_data
from eval_pipelines.reports.charts import pass_hat_k_chart, pass_rate_chart, task_heatmap_chart
from eval_pipelines.reports.html import ALL_ERRORED, pass_rate_markdown
from eval_pipelines.schemas.runs import ErrorClass, Rollout
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.rows import rollout_tables, verification_table
from eval_pipelines.warehouse.store import Warehouse
from tests.warehouse import conftest as f

DEAD, LIVE = "dead-endpoint", "gpt-x"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two models on one scenario: DEAD's two rollouts both errored, LIVE passed one task and failed the other."""
    root = tmp_path_factory.mktemp("all-errors")
    warehouse = Warehouse(root / "warehouse")

    def errored(rollout_id: str, task_id: str) -> Rollout:
        rollout = f.make_rollout(rollout_id, task_id, status="failed", success=False)
        assert rollout.result is not None
        rollout.result.error_class = ErrorClass.MODEL_ENDPOINT
        return rollout

    dead_rows = [(errored(f"d{i}", f"t{i}"), f.make_artifacts(f"t{i}"), None) for i in (1, 2)]
    live_rows = [(f.make_rollout(f"l{i}", f"t{i}"), f.make_artifacts(f"t{i}"), None) for i in (1, 2)]
    live_verdicts = [f.make_verification("l1", "v", "h1", True), f.make_verification("l2", "v", "h1", False)]
    for model, rows, verdicts in ((DEAD, dead_rows, []), (LIVE, live_rows, live_verdicts)):
        for name, table in rollout_tables(f.make_ctx(model), rows).items():
            warehouse.write(name, table, model_key=model, scenario_key=f.SCENARIO_KEY, file_stem=f"run-{model}")
        warehouse.write(
            "verifications",
            verification_table(verdicts),
            model_key=model,
            scenario_key=f.SCENARIO_KEY,
            file_stem=f"v-{model}",
        )
    return build_catalog(warehouse.root, root / "eval.duckdb").path


def _texts(svg: str) -> str:
    return " | ".join(t.text or "" for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text"))


def test_the_cli_report_exits_0_and_shows_the_pair_as_errors(catalog: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    argv = [sys.executable, "-m", "eval_pipelines.cli", "report", "--db", str(catalog), "--out", str(out)]
    # The all-errored pair fails the error_share and coverage gates: the report is held, naming them.
    held = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert held.returncode == EXIT_ERRORS and not out.exists(), held.stderr
    assert f"gate error_share failed for sweep {f.SWEEP}: errors above 20%: {DEAD}" in held.stderr, held.stderr
    done = subprocess.run([*argv, "--ignore-gates"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    page = out.read_text(encoding="utf-8")
    dead_row = next(row for row in page.split("<tr>") if DEAD in row and "email" in row)
    assert ALL_ERRORED in dead_row and "2 (100%)" in dead_row
    live_row = next(row for row in page.split("<tr>") if LIVE in row and "email" in row)
    assert ALL_ERRORED not in live_row and "0.500" in live_row
    for name in ("pass_rate", "pass_hat_k", "cost", "task_heatmap"):
        assert (tmp_path / f"report_{name}.svg").stat().st_size > 0


def test_the_charts_say_errors_where_there_is_no_pass_rate(catalog: Path) -> None:
    data = load_report_data(catalog)
    assert _texts(pass_rate_chart(data.sweep_id, data.groups, data.model_labels)).count("2 errors, no pass rate") == 1
    assert "all rollouts errored, no pass^k: " + data.model_labels[DEAD] in _texts(pass_hat_k_chart(data))
    heatmap = _texts(task_heatmap_chart(data))
    assert heatmap.count("1 err") == 2 and "1/1" in heatmap and "0/1" in heatmap


def test_the_markdown_table_and_the_report_builder_agree(catalog: Path, tmp_path: Path) -> None:
    data = load_report_data(catalog)
    markdown = pass_rate_markdown(data.groups)
    [dead_line] = [line for line in markdown.splitlines() if DEAD in line]
    assert ALL_ERRORED in dead_line and "| 0 |" in dead_line  # n = 0 scored, never a pass rate of 0
    files = build_report(catalog, tmp_path / "asset" / "report.html")  # what the eval_report asset calls
    assert files.sweep_id == data.sweep_id and len(files.charts) == 4
