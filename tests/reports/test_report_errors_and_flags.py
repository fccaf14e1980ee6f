"""The report shows what a pass rate hides: errored rollouts beside n, answers that are tool calls written as
text, and tool calls whose arguments were not JSON."""

from __future__ import annotations

from pathlib import Path

from eval_pipelines.agents.text_tool_calls import flag_text_tool_call
from eval_pipelines.reports import build_report, load_report_data
from eval_pipelines.reports.html import pass_rate_markdown
from eval_pipelines.schemas.runs import ErrorClass
from eval_pipelines.schemas.tools import ToolCall, ToolCallResult
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.rows import rollout_tables, verification_table
from eval_pipelines.warehouse.store import Warehouse
from tests.warehouse import conftest as f


def test_errors_and_malformed_output_are_counted(tmp_path: Path) -> None:
    passed, failed = f.make_rollout("r1", "t1"), f.make_rollout("r2", "t2")
    errored = f.make_rollout("r3", "t3", status="failed", success=False)
    assert errored.result is not None
    errored.result.error_class = ErrorClass.MODEL_ENDPOINT
    flagged = f.make_artifacts("t2")
    flagged.set_final_observation('```json\n{"name": "email__send_email", "arguments": {}}\n```')
    flag_text_tool_call(flagged)
    flagged.record_tool_call(
        ToolCall(tool_server="email", tool_name="send_email", raw_arguments="{oops", arguments_error="not valid JSON"),
        ToolCallResult(observation="Invalid arguments", is_error=True),
    )
    rows = [(passed, f.make_artifacts("t1"), None), (failed, flagged, None), (errored, f.make_artifacts("t3"), None)]
    warehouse = Warehouse(tmp_path / "warehouse")
    for name, table in rollout_tables(f.make_ctx(), rows).items():
        warehouse.write(name, table, model_key="gpt-x", scenario_key=f.SCENARIO_KEY, file_stem="run-1")
    verdicts = [f.make_verification("r1", "v", "h1", True), f.make_verification("r2", "v", "h1", False)]
    warehouse.write(
        "verifications", verification_table(verdicts), model_key="gpt-x", scenario_key=f.SCENARIO_KEY, file_stem="v"
    )
    db = build_catalog(warehouse.root, tmp_path / "eval.duckdb").path

    [group] = load_report_data(db).groups
    assert (group["n"], group["passes"], group["n_errors"]) == (2, 1, 1)
    assert (group["text_tool_calls"], group["bad_arguments"]) == (1, 1)
    page = build_report(db, tmp_path / "report.html").html.read_text(encoding="utf-8")
    assert "<th>errors</th>" in page and "<td>1 (33%)</td>" in page
    assert "answers that are text tool calls" in page and "tool calls with invalid arguments" in page
    assert "| errors |" in pass_rate_markdown([group]) and "1 (33%)" in pass_rate_markdown([group])
