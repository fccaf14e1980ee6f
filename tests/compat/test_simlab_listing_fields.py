"""The SimLab CLI 0.2.0, unmodified, reading what the service serves beyond spec 000: a scenario's guidance
(`env init` copies it into env.yaml), hidden templates, test tasks (`tasks list --include-test`), the task-gen
filter summary (`tasks-gen run` prints the filtered tasks and the funnel) and `simlab feedback`, which lands in
the service's feedback log.

The service runs in its own process over scenarios of this module's own, with task generation pointed at the
simulated task-generation model, made to fail two tasks: one's verifier does not import (dropped by a gate),
the other's instruction leaves out what its verifier checks (dropped before the gates).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.simlab_bundle import import_bundle
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.llm.types import ChatRequest
from eval_pipelines.service.layout import feedback_log_path
from eval_pipelines.sim.endpoint import ReferenceBook, SimPersona, create_sim_app
from eval_pipelines.sim.taskgen import SIM_TASKGEN, prompt_context, taskgen_persona
from eval_pipelines.toolservers.calendar import CalendarServer
from tests.compat.conftest import EvalServiceUnderTest, describe, run_client, serve
from tests.compat.test_simlab_cli import SimLab
from tests.support.simlab_sources import cookbook_dir

pytestmark = pytest.mark.slow

GUIDANCE = "# Operations desk\n\nSign every email as the operations desk; never promise refunds."
NOT_IMPORTABLE = "```python\nimport no_such_module_for_taskgen\n\n\ndef verify(run_artifacts):\n    return True\n```"
VAGUE_INSTRUCTION = "Please sort out the calendar."
#: SimLab's cookbook bundle, imported from inside an environment whose env.yaml holds guidance.
EMAIL_BUNDLE = Path("langgraph-email-agent", "examples", "task-bundle")
IMPORTED_FAMILY = "guided_email"
IMPORTED_GUIDANCE = "Reply from the support alias.\nEscalate anything about invoices."


def _faulty_taskgen(request: ChatRequest) -> str:
    """The simulated task-generation model, except that calendar_001's verifier does not import and
    calendar_002's instruction leaves out what its verifier checks."""
    reply = taskgen_persona(request)
    context = prompt_context(request) or {}
    task_id = context.get("task_id") or (context.get("task") or {}).get("task_id")
    if context.get("step") == "verifiers" and task_id == "calendar_001":
        return NOT_IMPORTABLE
    if context.get("step") == "instructions" and task_id == "calendar_002":
        return VAGUE_INSTRUCTION
    return reply


def _edit_json(path: Path, **fields: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalServiceUnderTest]:
    root = tmp_path_factory.mktemp("listing-fields")
    scenarios = root / "scenarios"
    shutil.copytree(builtin_scenarios_dir(), scenarios)
    (scenarios / "email_ops" / "guidance.md").write_text(GUIDANCE + "\n")
    _edit_json(scenarios / "email_ops" / "tasks" / "email_ops_001.json", category="test")
    _edit_json(scenarios / "email_ops" / "tasks" / "email_ops_002.json", visibility="hidden")
    _edit_json(scenarios / "team_chat" / "template.json", visibility="hidden")
    environment = root / "environments" / "guided"
    shutil.copytree(cookbook_dir() / EMAIL_BUNDLE, environment / "task-bundle")
    env_yaml = {"name": "guided", "tools": ["email"], "scenario_guidance_md": IMPORTED_GUIDANCE}
    (environment / "env.yaml").write_text(yaml.safe_dump(env_yaml))
    report = import_bundle(environment / "task-bundle", scenarios, f"{IMPORTED_FAMILY}:1.0.0")
    assert any("scenario_guidance_md" in line and "guidance.md" in line for line in report.lines()), report.lines()
    personas: dict[str, SimPersona] = {SIM_TASKGEN: _faulty_taskgen}
    write_key, read_key = f"wk-{secrets.token_hex(12)}", f"rk-{secrets.token_hex(12)}"
    with BackgroundServer(create_sim_app(ReferenceBook(), personas=personas)) as model:
        served = serve(
            ["eval-service", "--data-dir", str(root / "data"), "--scenarios-dir", str(scenarios)],
            {
                "EVAL_SERVICE_API_KEYS": f"{write_key}:write,{read_key}:read",
                "EVAL_TASKGEN_BASE_URL": f"{model.url}/v1",
                "EVAL_TASKGEN_MODEL": SIM_TASKGEN,
            },
            root / "service.log",
            "/v1/auth/verify",
            {"API-Key": read_key},
        )
        try:
            yield EvalServiceUnderTest(served.url, write_key, read_key, root / "data", scenarios)
        finally:
            served.stop()
    assert "Traceback" not in served.log_text(), served.log_text()


@pytest.fixture
def simlab(service: EvalServiceUnderTest, tmp_path: Path) -> SimLab:
    return SimLab(service, tmp_path)


def test_env_init_copies_the_scenario_guidance_into_env_yaml(simlab: SimLab) -> None:
    simlab.ok("env", "init", "em", "--template", "email_ops", "--non-interactive")
    config = yaml.safe_load((simlab.cwd / "environments" / "em" / "env.yaml").read_text())
    assert config["template"] == "email_ops:1.0.0"
    assert config["scenario_guidance_md"] == GUIDANCE


def test_an_imported_bundle_s_environment_guidance_reaches_a_new_environment(simlab: SimLab) -> None:
    simlab.ok("env", "init", "guided", "--template", IMPORTED_FAMILY, "--non-interactive")
    config = yaml.safe_load((simlab.cwd / "environments" / "guided" / "env.yaml").read_text())
    assert config["scenario_guidance_md"] == IMPORTED_GUIDANCE


def test_hidden_templates_are_left_out_of_templates_list_but_found_by_name(simlab: SimLab) -> None:
    listing = simlab.ok("templates", "list")
    assert "email_ops:1.0.0" in listing and "team_chat" not in listing, listing
    assert "team_chat:1.0.0" in simlab.ok("templates", "info", "team_chat")
    simlab.ok("env", "init", "chat", "--template", "team_chat", "--non-interactive")


def test_tasks_list_shows_test_tasks_only_with_include_test(simlab: SimLab) -> None:
    simlab.ok("env", "init", "em", "--template", "email_ops", "--non-interactive")
    default = simlab.ok("tasks", "list", "--env", "em")
    assert "email_ops_001" not in default and re.search(r"\b11 task\(s\) total", default), default
    # SimLab asks for hidden tasks itself (include_hidden=true), so the hidden one is listed
    assert "email_ops_002" in default
    with_tests = simlab.ok("tasks", "list", "--env", "em", "--include-test")
    assert "email_ops_001" in with_tests and re.search(r"\b12 task\(s\) total", with_tests), with_tests
    # an explicit id finds a test task without the flag (SimLab asks again with include_test=true)
    info = simlab.ok("tasks", "info", "--env", "em", "--task", "email_ops_001")
    assert re.search(r"Category:\s+test", info), info


def test_tasks_gen_run_prints_the_filtered_tasks_and_the_funnel(simlab: SimLab) -> None:
    tools = [tool.as_task_gen_tool() for tool in CalendarServer().tools()]
    (simlab.cwd / "tools.json").write_text(json.dumps(tools))
    out = simlab.ok("tasks-gen", "run", "--tools", "tools.json", "--num-tasks", "6", "--model", SIM_TASKGEN)
    assert "4 of 6 requested tasks survived quality filtering" in out, out
    filtered = out.split("Filtered tasks:", 1)[1]
    assert re.search(r"✗ calendar_001\s+no verifier passed its quality gates .*no_such_module_for_taskgen", filtered)
    assert re.search(r"✗ calendar_002\s+\S", filtered), filtered
    funnel = filtered.split("Filter funnel:", 1)[1]
    assert "Started with 6 tasks" in funnel
    assert re.search(r"usable_draft: 1 filtered, 5 passed", funnel), funnel
    assert re.search(r"verifier_imports: 1 filtered, 4 passed", funnel), funnel
    assert sorted(p.name for p in (simlab.cwd / "generated-tasks" / "tasks").glob("*.json")) == [
        f"calendar_{i:03d}.json" for i in range(3, 7)
    ]


def _feedback(simlab: SimLab, *args: str, disabled: bool) -> str:
    env = {"SIMLAB_SCENARIO_MANAGER_API_URL": simlab.service.url, "SIMLAB_COLLINEAR_API_KEY": simlab.service.read_key}
    if disabled:
        env["SIMLAB_DISABLE_TELEMETRY"] = "1"
    result = run_client([simlab.binary, "feedback", *args], env, simlab.cwd, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, describe(result)
    return result.stdout


def test_simlab_feedback_lands_in_the_service_feedback_log(simlab: SimLab) -> None:
    log = feedback_log_path(simlab.service.data_dir)
    message = f"guidance arrived, thanks ({secrets.token_hex(4)})"
    assert "Thanks! Your feedback has been sent." in _feedback(simlab, message, "--env", "em", disabled=False)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    mine = [r for r in records if r["message"] == message]
    assert len(mine) == 1 and mine[0]["context"]["env_name"] == "em", records
    assert mine[0]["context"]["simlab_version"] == "0.2.0"
    assert simlab.service.read_key not in log.read_text()
    # the started/finished events of the command were accepted and not kept
    assert all(set(r) == {"received_at", "message", "context"} for r in records)

    # opted out on the client's side: nothing is sent
    opted_out = f"not sent ({secrets.token_hex(4)})"
    assert "telemetry is disabled" in _feedback(simlab, opted_out, disabled=True)
    assert opted_out not in log.read_text()
