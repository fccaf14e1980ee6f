"""A bundle SimLab's `tasks-gen run --out` writes from a user's own toolset (its task files carry the tool
definitions of each simulated server, `simulated_servers`) imports runnable: the scenario keeps those servers as
`servers/<name>.json`, a sweep's tool host serves the stand-ins, so the simulated oracle passes every task and a
model that does nothing fails them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import duckdb
import pytest

from eval_pipelines.cli import main
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.simlab_bundle import BundleImportError, import_bundle
from eval_pipelines.schemas.scenarios import SIMULATED_SERVERS_DIR, SIMULATED_SERVERS_KEY, SimulatedServer
from eval_pipelines.schemas.taskgen import TaskGenResults
from eval_pipelines.taskgen import parse_request
from eval_pipelines.taskgen.default import DefaultTaskGenerator
from tests.reliability.support_runs import make_dagster_home
from tests.simlab.test_generated_bundle_round_trip import simlab_bundle
from tests.support.user_toolsets import ticketing

SWEEP = """
name: imported_user_toolset
scenarios: ["helpdesk"]
models:
  - {name: sim-oracle, model: sim-oracle, base_url: "sim://local"}
  - {name: sim-noop, model: sim-noop, base_url: "sim://local"}
rollout_count: 1
"""


def _generated() -> TaskGenResults:
    request = parse_request({"toolset": ticketing(), "num_tasks": 3})
    return asyncio.run(DefaultTaskGenerator(endpoint=None).generate(request, lambda _: None))


def test_the_import_keeps_a_generated_bundles_simulated_servers(tmp_path: Path) -> None:
    results = _generated()
    report = import_bundle(simlab_bundle(results, tmp_path / "bundle"), tmp_path / "scenarios", "helpdesk:1.0.0")

    assert report.unrunnable == {} and len(report.tasks) == 3, report.lines()
    scenario = ScenarioCatalog(tmp_path / "scenarios").get("helpdesk")
    served = SimulatedServer.model_validate_json((scenario.root / SIMULATED_SERVERS_DIR / "tools.json").read_text())
    assert served.tools[0].parameters == ticketing()[0]["inputSchema"]
    assert [s.name for s in scenario.template.tool_servers] == ["tools"]
    for task in scenario.tasks().values():
        assert [s.name for s in task.tool_servers] == ["tools"] and task.simlab_servers == {"tools": "tools"}
        assert task.seed_data["tools"], task.task_id


def test_two_tasks_giving_one_simulated_server_different_tools_are_refused(tmp_path: Path) -> None:
    bundle = simlab_bundle(_generated(), tmp_path / "bundle")
    last = sorted((bundle / "tasks").glob("*.json"))[-1]
    task = json.loads(last.read_text())
    task[SIMULATED_SERVERS_KEY]["tools"]["tools"] = task[SIMULATED_SERVERS_KEY]["tools"]["tools"][:1]
    last.write_text(json.dumps(task))
    with pytest.raises(BundleImportError, match=r"simulated_servers\.tools: another task gives"):
        import_bundle(bundle, tmp_path / "scenarios", "helpdesk:1.0.0")


@pytest.mark.slow
def test_an_imported_bundle_from_a_user_toolset_is_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(make_dagster_home(tmp_path / "dagster_home")))
    monkeypatch.setenv("EVAL_PIPELINES_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EVAL_PIPELINES_SCENARIOS_DIR", str(tmp_path / "scenarios"))
    bundle = simlab_bundle(_generated(), tmp_path / "bundle")
    argv = ["import", str(bundle), "--scenario-id", "helpdesk:1.0.0", "--scenarios-dir", str(tmp_path / "scenarios")]
    assert main(argv) == 0

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(SWEEP)
    assert main(["sweep", "--config", str(sweep), "--skip-assessment"]) == 0
    con = duckdb.connect(str(tmp_path / "data" / "eval.duckdb"), read_only=True)
    outcomes = dict(
        con.execute("select model_name, list(outcome order by task_id) from rollout_scores group by 1").fetchall()
    )
    con.close()
    assert outcomes == {"sim-oracle": ["passed"] * 3, "sim-noop": ["failed"] * 3}
