"""A scenario generated with the CLI becomes a partition and is swept by `eval-pipelines sweep`, no file edited."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from eval_pipelines.cli import main
from eval_pipelines.toolservers.calendar import CalendarServer
from tests.reliability.support_runs import make_dagster_home

SWEEP = """
name: everything
scenarios: ["*"]
models:
  - {name: sim-oracle, model: sim-oracle, base_url: "sim://local"}
  - {name: sim-noop, model: sim-noop, base_url: "sim://local"}
rollout_count: 1
"""


@pytest.mark.slow
def test_generated_scenario_is_swept_without_edits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(make_dagster_home(tmp_path / "dagster_home")))
    monkeypatch.setenv("EVAL_PIPELINES_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EVAL_PIPELINES_SCENARIOS_DIR", str(tmp_path / "scenarios"))
    (tmp_path / "scenarios").mkdir()
    toolset = tmp_path / "calendar_tools.json"
    toolset.write_text(json.dumps({"tools": [t.model_dump() for t in CalendarServer().tools()]}))
    sweep = tmp_path / "everything.yaml"
    sweep.write_text(SWEEP)

    assert (
        main(
            [
                "generate-tasks",
                "--toolset",
                str(toolset),
                "--scenario-id",
                "calendar_gen:1.0.0",
                "--num-tasks",
                "6",
                "--model",
                "schema",
                "--seed",
                "7",
            ]
        )
        == 0
    )
    assert (tmp_path / "scenarios" / "calendar_gen_1.0.0" / "template.json").is_file()

    assert main(["sweep", "--config", str(sweep), "--skip-assessment"]) == 0
    con = duckdb.connect(str(tmp_path / "data" / "eval.duckdb"), read_only=True)
    rates = dict(
        con.execute("select model_name, pass_rate from pass_rates where scenario_id = 'calendar_gen:1.0.0'").fetchall()
    )
    con.close()
    assert rates["sim-oracle"] >= 0.9 and rates["sim-noop"] <= 0.1

    from dagster import DagsterInstance

    with DagsterInstance.get() as instance:
        assert "calendar_gen:1.0.0" in instance.get_dynamic_partitions("scenarios")  # keyed by scenario id
