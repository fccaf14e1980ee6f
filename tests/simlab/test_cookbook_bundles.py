"""SimLab's own cookbook bundles, imported as they are: every task is runnable or marked unrunnable with the reason
(printed by `eval-pipelines import`, recorded on the task and in the warehouse's tasks table), and with the servers
nobody builds in named by the user, a sweep of a scripted agent passes every task that can pass while the
unrunnable ones stay out of it.

Material: the cookbook of the pinned simulationlab 0.2.0 sdist (`tests/support/simlab_sources.py`, fetched from
PyPI on first use): langgraph-email-agent/examples/task-bundle (3 tasks checking an `edgar-mcp` MCP server),
langgraph-vendor-agent/examples/task-bundle (2 tasks on an `erp-env` server) and secure-agent-eval/injection-task
(2 tasks saying `instruction`, with `meta.name` and `meta.apps`, and no verifier). SimLab's repository example
examples/custom-cli-tools is not in the sdist and CI cannot reach GitHub, so tests/simlab/bundles/custom_cli_tools/
is an equivalent written for these tests in the same format: env.yaml beside a task-bundle/ whose two tasks name
`coding-env`, one graded by `simlab.verifiers.custom_coding` (whose file the bundle ships, as the repository's
does), one by the bundle's own module. The servers are ours: `erp_tool_server.py` (spec 001 HTTP) and
`edgar_mcp_server.py` (stdio MCP); the agent is `cookbook_agent.py`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from eval_pipelines.cli import main
from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.clients.errors import ServiceError
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.simlab_bundle import NOTHING_GRADES, import_bundle
from eval_pipelines.inputs.sweeps import selected_task_ids, sweep_notices, sweep_scenarios
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.pipeline.steps import launch_request
from eval_pipelines.schemas.runs import RunLaunchRequest
from eval_pipelines.schemas.sweep import SweepConfig
from eval_pipelines.warehouse import tasks_table
from tests.simlab.erp_tool_server import build_app
from tests.support.simlab_sources import cookbook_dir

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CUSTOM_CLI = HERE / "bundles" / "custom_cli_tools"
EDGAR_SERVER = HERE / "edgar_mcp_server.py"
BUNDLES = {
    "email_cookbook:1.0.0": "langgraph-email-agent/examples/task-bundle",
    "vendor_cookbook:1.0.0": "langgraph-vendor-agent/examples/task-bundle",
    "injection_cookbook:1.0.0": "secure-agent-eval/injection-task",
}
EMAIL_TASKS = ["counterparty_brief_apple", "email_assistant_summary", "meeting_prep_packet"]
VENDOR_TASKS = ["procurement_audit", "vendor_erp_review"]
CUSTOM_TASKS = ["example_task", "workspace_asset_report"]
INJECTION_TASKS = ["injection_test_lookup_stock_price", "injection_test_schedule_phone_screen"]


def copy_bundles(root: Path) -> dict[str, Path]:
    """Writable copies: scenario id -> bundle folder (the custom CLI tools one keeps its env.yaml beside it)."""
    bundles = {
        sid: Path(shutil.copytree(cookbook_dir() / rel, root / sid.partition(":")[0])) for sid, rel in BUNDLES.items()
    }
    shutil.copytree(CUSTOM_CLI, root / "custom_cli_tools")
    bundles["custom_cli:1.0.0"] = root / "custom_cli_tools" / "task-bundle"
    return bundles


def test_without_named_servers_every_task_is_runnable_or_unrunnable_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reasons: dict[str, str | None] = {}
    for scenario_id, bundle in copy_bundles(tmp_path / "bundles").items():
        assert main(["import", str(bundle), "--scenario-id", scenario_id, "--scenarios-dir", str(tmp_path / "s")]) == 0
        tasks = ScenarioCatalog(tmp_path / "s").get(scenario_id).tasks()
        reasons.update({task_id: task.unrunnable_reason for task_id, task in tasks.items()})
        table = tasks_table(scenario_id, tasks.values()).to_pydict()  # the catalog's tasks table shows it
        assert dict(zip(table["task_id"], table["unrunnable_reason"], strict=True)) == {
            t: task.unrunnable_reason for t, task in tasks.items()
        }
    printed = capsys.readouterr().out

    for task_id in EMAIL_TASKS:
        assert (
            reasons[task_id]
            == "apps[1] 'SEC EDGAR': no server plays this SimLab app (name one in mcp-servers.json or --servers)"
        )
    for task_id in VENDOR_TASKS:  # the ERP server is said once, not again as the task's `ERP` app
        assert reasons[task_id] == (
            "tool_servers[1] 'erp-env': no built-in server plays it and no server was named for it (name one in "
            "mcp-servers.json or --servers)"
        )
    assert reasons["injection_test_lookup_stock_price"] == (
        f"apps[0] 'twelve-data-env': no server plays this SimLab app (name one in mcp-servers.json or --servers); "
        f"{NOTHING_GRADES}"
    )
    # chronos-server is the built-in calendar; the HR system is nobody's
    assert reasons["injection_test_schedule_phone_screen"] == (
        f"apps[0] 'frappe-hrms-env': no server plays this SimLab app (name one in mcp-servers.json or --servers); "
        f"{NOTHING_GRADES}"
    )
    assert reasons["example_task"] is None and reasons["workspace_asset_report"] is None
    assert f"  procurement_audit: UNRUNNABLE: {reasons['procurement_audit']}" in printed
    assert "  workspace_asset_report: runnable" in printed
    # env.yaml: the coding app is the built-in files server; the environment's own settings are reported
    assert "bundle: note: env.yaml: coding: the environment's, not reproduced here; left out" in printed

    # the listing of the catalog says the same
    monkeypatch.setenv("EVAL_PIPELINES_SCENARIOS_DIR", str(tmp_path / "s"))
    assert main(["tasks", "vendor_cookbook:1.0.0", "custom_cli:1.0.0"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed == [
        "vendor_cookbook:1.0.0: 2 task(s), 2 unrunnable",
        f"  procurement_audit: UNRUNNABLE: {reasons['procurement_audit']}",
        f"  vendor_erp_review: UNRUNNABLE: {reasons['vendor_erp_review']}",
        "custom_cli:1.0.0: 2 task(s), 0 unrunnable",
        "  example_task: runnable",
        "  workspace_asset_report: runnable",
    ]
    assert main(["tasks", "--unrunnable", "custom_cli:1.0.0"]) == 0
    assert capsys.readouterr().out.splitlines() == ["custom_cli:1.0.0: 2 task(s), 0 unrunnable"]


def test_instruction_tasks_import_with_their_meta_name_and_apps(tmp_path: Path) -> None:
    bundle = copy_bundles(tmp_path / "bundles")["injection_cookbook:1.0.0"]
    report = import_bundle(bundle, tmp_path / "s", "injection_cookbook:1.0.0")
    assert report.tasks == INJECTION_TASKS
    task = ScenarioCatalog(tmp_path / "s").get("injection_cookbook").task("injection_test_schedule_phone_screen")
    raw = json.loads((bundle / "tasks" / "injection_test_schedule_phone_screen.json").read_text())
    assert (
        task.description == raw["instruction"] and task.name == "Schedule phone screen with candidate (injection test)"
    )
    assert task.simlab_servers == {"calendar": "chronos-server"} and task.difficulty == "easy"
    assert task.simlab_origin["text_key"] == "instruction"
    assert (
        task.simlab_origin["apps"] == ["frappe-hrms-env", "chronos-server"]
        and task.simlab_origin["meta"] == raw["meta"]
    )
    assert report.notes.get("injection_test_schedule_phone_screen") is None  # nothing of it left out silently


def test_a_simlab_verifier_module_resolves_as_simlab_resolves_it(tmp_path: Path) -> None:
    """`simlab.verifiers.custom_coding`: the bundle's own verifiers/custom_coding.py first; without it, the SimLab
    package given; without either, the task is unrunnable saying so."""
    bundle = copy_bundles(tmp_path / "bundles")["custom_cli:1.0.0"]
    own = (bundle / "verifiers" / "custom_coding.py").read_text()
    (bundle / "verifiers" / "custom_coding.py").unlink()

    report = import_bundle(bundle, tmp_path / "s", "custom_cli:1.0.0", simlab_package=tmp_path / "absent")
    assert report.unrunnable == {
        "example_task": "verifiers[0] 'simlab.verifiers.custom_coding': no file verifiers/custom_coding.py in the "
        f"bundle nor in the SimLab package at {tmp_path / 'absent'}"
    }

    package = tmp_path / "site" / "simlab"
    (package / "verifiers").mkdir(parents=True)
    (package / "verifiers" / "custom_coding.py").write_text(own)
    report = import_bundle(bundle, tmp_path / "s", "custom_cli:1.0.0", overwrite=True, simlab_package=package)
    assert report.unrunnable == {}
    scenario = ScenarioCatalog(tmp_path / "s").get("custom_cli")
    assert scenario.task("example_task").verifiers == ["custom_coding"]
    assert (scenario.verifiers_dir / "custom_coding.py").read_text() == own
    assert f"verifiers/custom_coding.py: taken from the SimLab package at {package}" in report.notes["bundle"]


def test_a_task_nothing_grades_is_unrunnable_unless_the_user_says_otherwise(tmp_path: Path) -> None:
    bundle = copy_bundles(tmp_path / "bundles")["injection_cookbook:1.0.0"]
    servers = tmp_path / "servers.yaml"
    servers.write_text(yaml.safe_dump({"servers": {"twelve-data-env": {"url": "http://127.0.0.1:9/"}}}))
    report = import_bundle(bundle, tmp_path / "s", "injection_cookbook:1.0.0", servers_file=servers)
    assert report.unrunnable["injection_test_lookup_stock_price"] == NOTHING_GRADES
    report = import_bundle(
        bundle, tmp_path / "s", "injection_cookbook:1.0.0", servers_file=servers, overwrite=True, allow_ungraded=True
    )
    assert "injection_test_lookup_stock_price" not in report.unrunnable
    task = ScenarioCatalog(tmp_path / "s").get("injection_cookbook").task("injection_test_lookup_stock_price")
    assert task.http_servers == {"twelve-data-env": "http://127.0.0.1:9/"} and task.tool_servers == []


def test_a_sweep_leaves_unrunnable_tasks_out_and_says_simulated_models_give_no_signal_on_imported_ones(
    tmp_path: Path,
) -> None:
    for scenario_id, bundle in copy_bundles(tmp_path / "bundles").items():
        import_bundle(bundle, tmp_path / "s", scenario_id)
    catalog = ScenarioCatalog(tmp_path / "s")
    sweep = SweepConfig.model_validate(
        {
            "name": "t",
            "scenarios": ["*"],
            "models": [{"name": "sim-oracle", "model": "sim-oracle", "base_url": "sim://local"}],
        }
    )
    every = sweep_scenarios(sweep, catalog, runnable_only=False)
    run = {s.scenario_id for s in sweep_scenarios(sweep, catalog)}
    # every task of these two is unrunnable: the scenarios are not run at all
    assert run == {"custom_cli:1.0.0"}
    assert {s.scenario_id: selected_task_ids(sweep, s) for s in every}["vendor_cookbook:1.0.0"] == []
    notices = "\n".join(sweep_notices(sweep, every))
    assert "vendor_cookbook:1.0.0: 2 task(s) left out, they cannot run here (not counted as failures" in notices
    assert "  procurement_audit: tool_servers[1] 'erp-env': no built-in server plays it" in notices
    assert re.search(
        r"custom_cli:1\.0\.0: the simulated models \(sim-oracle\) give no signal on its 2 imported task", notices
    )


@pytest.fixture
def erp_server() -> Iterator[str]:
    with BackgroundServer(build_app()) as server:
        yield server.url


@pytest.mark.slow
def test_with_the_servers_named_a_sweep_passes_every_passable_task_and_leaves_the_rest_out(
    tmp_path: Path, erp_server: str
) -> None:
    bundles = copy_bundles(tmp_path / "bundles")
    # The email bundle's MCP server in SimLab's own file beside it; the ERP server in a servers file of ours.
    (bundles["email_cookbook:1.0.0"].parent / "mcp-servers.json").write_text(
        json.dumps({"mcpServers": {"edgar-mcp": {"command": sys.executable, "args": [str(EDGAR_SERVER)]}}})
    )
    # The import records a URL where no ERP server answers; the sweep names the one that does (`servers`).
    servers = tmp_path / "servers.yaml"
    servers.write_text(yaml.safe_dump({"servers": {"erp-env": {"url": "http://127.0.0.1:9/"}}}))
    env = {
        **os.environ,
        "EVAL_PIPELINES_DATA_DIR": str(tmp_path / "data"),
        "EVAL_PIPELINES_SCENARIOS_DIR": str(tmp_path / "scenarios"),
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    cli = [str(ROOT / ".venv" / "bin" / "eval-pipelines")]
    for scenario_id, bundle in bundles.items():
        extra = ["--servers", str(servers)] if scenario_id.startswith("vendor") else []
        done = subprocess.run(
            [*cli, "import", str(bundle), "--scenario-id", scenario_id, *extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        if not scenario_id.startswith("injection"):
            assert "UNRUNNABLE" not in done.stdout, done.stdout
    config = tmp_path / "sweeps" / "cookbook.yaml"
    config.parent.mkdir()
    config.write_text(
        yaml.safe_dump(
            {
                "name": "cookbook",
                "scenarios": list(bundles),
                "models": [
                    {
                        "name": "scripted",
                        "model": "sim-noop",
                        "base_url": "sim://local",
                        "agent": "tests.simlab.cookbook_agent:CookbookAgent",
                    }
                ],
                "rollout_count": 1,
                "max_parallel": 4,
                "rollout_timeout_seconds": 120,
                "servers": {"erp-env": erp_server},
            }
        )
    )
    done = subprocess.run(
        [*cli, "sweep", "--config", str(config), "--skip-assessment"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "injection_cookbook:1.0.0: 2 task(s) left out, they cannot run here" in out
    assert "= 7 rollouts" in out, out  # 3 + 2 + 2: the injection tasks are in no run
    # the pass-rate table: scenario | model | tasks | n | passes | ...
    rows = {
        cells[1]: cells
        for line in out.splitlines()
        if len(cells := [c.strip() for c in re.split(r"[│|]", line)]) > 6 and cells[1].endswith(":1.0.0")
    }
    assert {sid: (cells[3], cells[5]) for sid, cells in rows.items()} == {
        "email_cookbook:1.0.0": ("3", "3"),
        "vendor_cookbook:1.0.0": ("2", "2"),
        "custom_cli:1.0.0": ("2", "2"),
    }, out


def test_a_sweep_gives_its_runs_its_own_server_urls_and_the_service_refuses_an_unrunnable_task(
    tmp_path: Path, local_backend: Callable[..., EvaluationBackend]
) -> None:
    bundles = copy_bundles(tmp_path / "bundles")
    servers = tmp_path / "servers.yaml"
    servers.write_text(yaml.safe_dump({"servers": {"erp-env": {"url": "http://127.0.0.1:9/"}}}))
    import_bundle(bundles["vendor_cookbook:1.0.0"], tmp_path / "s", "vendor_cookbook:1.0.0", servers_file=servers)
    import_bundle(bundles["injection_cookbook:1.0.0"], tmp_path / "s", "injection_cookbook:1.0.0")
    catalog = ScenarioCatalog(tmp_path / "s")
    vendor = catalog.get("vendor_cookbook")
    assert vendor.task("procurement_audit").http_servers == {"erp-env": "http://127.0.0.1:9/"}
    model = {"name": "scripted", "model": "sim-noop", "base_url": "sim://local"}
    sweep = SweepConfig.model_validate(
        {"name": "t", "scenarios": ["*"], "models": [model], "servers": {"erp-env": "http://erp.test:8100"}}
    )
    request = launch_request(sweep, sweep.models[0], vendor, "t-1")
    assert sorted(request.task_overrides) == VENDOR_TASKS
    for override in request.task_overrides.values():
        assert override.task_json is not None and override.task_json["http_servers"] == {
            "erp-env": "http://erp.test:8100"
        }
    plain = SweepConfig.model_validate({"name": "t", "scenarios": ["*"], "models": [model]})
    assert launch_request(plain, plain.models[0], vendor, "t-2").task_overrides == {}

    backend = local_backend(tmp_path / "data", catalog)
    refused = RunLaunchRequest.model_validate(
        {
            "scenario_id": "injection_cookbook:1.0.0",
            "task_ids": ["injection_test_lookup_stock_price"],
            "model_config": {"model": "sim-noop", "base_url": "sim://local", "api_key": "x"},
        }
    )
    with pytest.raises(ServiceError, match=r"cannot run here.*twelve-data-env"):
        backend.launch_or_resume(refused)


def test_a_credential_in_simlabs_mcp_server_file_never_reaches_the_scenario(tmp_path: Path) -> None:
    """SimLab's mcp-servers.json carries env values; those that look like credentials become secrets the server's
    child reads from the environment when it starts, and are written nowhere."""
    bundle = copy_bundles(tmp_path / "bundles")["email_cookbook:1.0.0"]
    server = {
        "command": "uvx",
        "args": ["sec-edgar-mcp"],
        "env": {"SEC_EDGAR_USER_AGENT": "me", "EDGAR_API_KEY": "s3cr3t-value"},
    }
    (bundle / "mcp-servers.json").write_text(json.dumps({"mcpServers": {"edgar-mcp": server}}))
    report = import_bundle(bundle, tmp_path / "s", "email_cookbook:1.0.0")
    assert report.unrunnable == {}
    task = ScenarioCatalog(tmp_path / "s").get("email_cookbook").task("meeting_prep_packet")
    assert task.mcp_servers == [
        {
            "name": "edgar-mcp",
            "command": "uvx",
            "args": ["sec-edgar-mcp"],
            "env": {"SEC_EDGAR_USER_AGENT": "me"},
            "secrets": {"EDGAR_API_KEY": None},
        }
    ]
    assert (
        "server 'edgar-mcp': ['EDGAR_API_KEY'] are read from the environment when it starts"
        in report.notes["meeting_prep_packet"]
    )
    assert not [p for p in (tmp_path / "s").rglob("*") if p.is_file() and b"s3cr3t-value" in p.read_bytes()]
