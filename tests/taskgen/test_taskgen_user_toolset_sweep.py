"""Tasks generated from a user's own toolset run in a sweep: the scenario keeps the user's tool schemas
(`servers/<name>.json`) and the sweep's tool host serves the stand-in simulated from them, so the simulated
oracle (it replays `reference_actions`) passes every task and a model that does nothing fails them. These
models are simulated: this proves the tasks run, not that they are good."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from eval_pipelines.cli import main
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.scenarios import SIMULATED_SERVERS_DIR, SimulatedServer
from tests.reliability.support_runs import make_dagster_home
from tests.support.user_toolsets import catalog, ticketing

SWEEP = """
name: user_toolsets
scenarios: ["helpdesk", "shop"]
models:
  - {name: sim-oracle, model: sim-oracle, base_url: "sim://local"}
  - {name: sim-noop, model: sim-noop, base_url: "sim://local"}
rollout_count: 1
"""


def _generate(tmp_path: Path, name: str, tools: list[dict[str, object]]) -> None:
    toolset = tmp_path / f"{name}_tools.json"
    toolset.write_text(json.dumps({"tools": tools}))
    argv = ["generate-tasks", "--toolset", str(toolset), "--scenario-id", name, "--num-tasks", "5"]
    assert main([*argv, "--model", "schema", "--seed", "3"]) == 0


@pytest.mark.slow
def test_tasks_generated_from_user_toolsets_are_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(make_dagster_home(tmp_path / "dagster_home")))
    monkeypatch.setenv("EVAL_PIPELINES_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EVAL_PIPELINES_SCENARIOS_DIR", str(tmp_path / "scenarios"))
    (tmp_path / "scenarios").mkdir()
    _generate(tmp_path, "helpdesk", ticketing())  # create_ticket collides with the built-in records server's
    _generate(tmp_path, "shop", catalog())  # read-only: questions answered from the data

    scenarios = ScenarioCatalog(tmp_path / "scenarios")
    helpdesk = scenarios.get("helpdesk")
    served = json.loads((helpdesk.root / SIMULATED_SERVERS_DIR / "tools.json").read_text())
    assert SimulatedServer.model_validate(served).tools[0].parameters == ticketing()[0]["inputSchema"]
    assert [s.name for s in helpdesk.template.tool_servers] == ["tools"]
    task_counts = {s: len(scenarios.get(s).tasks()) for s in ("helpdesk", "shop")}
    assert all(count >= 2 for count in task_counts.values()), task_counts

    sweep = tmp_path / "user_toolsets.yaml"
    sweep.write_text(SWEEP)
    assert main(["sweep", "--config", str(sweep), "--skip-assessment"]) == 0
    con = duckdb.connect(str(tmp_path / "data" / "eval.duckdb"), read_only=True)
    outcomes = con.execute(
        "select scenario_id, model_name, list(outcome order by task_id) from rollout_scores group by 1, 2"
    ).fetchall()
    con.close()
    by_pair = {(scenario, model): listed for scenario, model, listed in outcomes}
    for scenario, tasks in task_counts.items():
        assert by_pair[(scenario, "sim-oracle")] == ["passed"] * tasks, by_pair
        assert by_pair[(scenario, "sim-noop")] == ["failed"] * tasks, by_pair
