"""The SimLab CLI 0.2.0, unmodified, against `eval-pipelines serve eval-service` (spec 000).

Every command runs in the CLI's own venv with a HOME of its own, the service's URL in
`SIMLAB_SCENARIO_MANAGER_API_URL` and the key in `SIMLAB_COLLINEAR_API_KEY`. A traceback, a schema
validation error inside the CLI or a non-zero exit fails the test. Nothing here needs Docker or Daytona:
`env up` and `tasks run` are left out; the verifier bundle is imported by the CLI's own verifier runner.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.toolservers.email import EmailServer
from tests.compat.conftest import EvalServiceUnderTest, client_venv, describe, run_client

pytestmark = pytest.mark.slow

FAMILIES = ("email_ops", "office_ops", "team_chat")
#: `simlab tasks-gen init --preset` names.
SIMLAB_PRESETS = ("hr", "recruiting", "people_mgmt", "coding", "customer_support")
#: SimLab's local email server port (its tool catalog fixes it); `tasks seed` posts there.
SIMLAB_EMAIL_PORT = 8040


class SimLab:
    """`simlab …` in a working directory of its own, pointed at the service."""

    def __init__(self, service: EvalServiceUnderTest, cwd: Path) -> None:
        self.binary = str(client_venv("simlab") / "simlab")
        self.python = str(client_venv("simlab") / "python")
        self.service = service
        self.cwd = cwd

    def env(self, key: str | None) -> dict[str, str]:
        env = {"SIMLAB_SCENARIO_MANAGER_API_URL": self.service.url, "SIMLAB_DISABLE_TELEMETRY": "1"}
        if key is not None:
            env["SIMLAB_COLLINEAR_API_KEY"] = key
        return env

    def run(self, *args: str, key: str | None = "", stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        chosen = self.service.write_key if key == "" else key
        return run_client([self.binary, *args], self.env(chosen), self.cwd, timeout=300, stdin=stdin)

    def ok(self, *args: str, **kwargs: Any) -> str:
        result = self.run(*args, **kwargs)
        assert result.returncode == 0 and "Traceback" not in result.stderr, describe(result)
        return result.stdout

    def python_ok(self, code: str) -> str:
        result = run_client([self.python, "-c", code], self.env(self.service.write_key), self.cwd, timeout=300)
        assert result.returncode == 0, describe(result)
        return result.stdout


@pytest.fixture
def simlab(eval_service: EvalServiceUnderTest, tmp_path: Path) -> SimLab:
    return SimLab(eval_service, tmp_path)


# -- auth and templates ------------------------------------------------------------------------------


def test_auth_login_saves_a_valid_key_and_refuses_a_bad_one(simlab: SimLab) -> None:
    config = simlab.cwd / ".home" / ".config" / "simlab" / "config.toml"
    refused = simlab.run("auth", "login", key=None, stdin="not-a-key\n")
    assert refused.returncode == 1 and "Invalid API key" in refused.stdout + refused.stderr, describe(refused)
    assert not config.exists()
    simlab.ok("auth", "login", key=None, stdin=f"{simlab.service.write_key}\n")
    assert f'collinear_api_key = "{simlab.service.write_key}"' in config.read_text()
    assert "Authenticated" in simlab.ok("auth", "status", key=None)
    # every other command checks the key first
    assert simlab.run("templates", "list", key="not-a-key").returncode == 1


def test_templates_list_shows_every_built_in_scenario(simlab: SimLab) -> None:
    out = simlab.ok("templates", "list")
    for family in FAMILIES:
        assert f"Version: {family}:1.0.0" in out
    assert "3 templates available" in out


@pytest.mark.parametrize("family", FAMILIES)
def test_env_init_takes_each_family_id(simlab: SimLab, family: str) -> None:
    out = simlab.ok("env", "init", f"{family}-env", "--template", family, "--non-interactive")
    assert f"Starting from template '{family}:1.0.0'" in out
    env_yaml = (simlab.cwd / "environments" / f"{family}-env" / "env.yaml").read_text()
    assert f"template: {family}:1.0.0" in env_yaml and "- email" in env_yaml


# -- tasks of a scenario -----------------------------------------------------------------------------


def test_tasks_list_and_info_show_verifiers_and_seed_data(simlab: SimLab) -> None:
    simlab.ok("env", "init", "em", "--template", "email_ops", "--non-interactive")
    listing = simlab.ok("tasks", "list", "--env", "em")
    assert "email_ops_001" in listing and re.search(r"\b12 task\(s\) total", listing), listing
    info = simlab.ok("tasks", "info", "--env", "em", "--task", "email_ops_001")
    assert "collinear.scenarios.email_ops.verifiers." in info, info
    mailbox = json.loads((simlab.service.scenarios_dir / "email_ops" / "seed_data" / "mailbox.json").read_text())
    assert re.search(rf"Emails:\s+{len(mailbox['emails'])}\b", info), info
    # a workspace of this listing's own on the service (SimLab rewrote the host to localhost)
    assert re.search(r"email\s+http://localhost:\d+/ws/[\w-]+/email_ops_001/email\b", info), info
    missing = simlab.run("tasks", "info", "--env", "em", "--task", "no_such_task")
    assert missing.returncode == 1 and "Task not found" in missing.stdout + missing.stderr


class _RecordingMailServer(BaseHTTPRequestHandler):
    """SimLab's local mail server as `tasks seed` talks to it: `GET /tools`, `POST /step`."""

    steps: list[dict[str, Any]] = []

    def _reply(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # http.server names the handlers
        self._reply({"tools": [{"name": "send_email"}]})

    def do_POST(self) -> None:
        self.steps.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self._reply({"observation": {"text": json.dumps({"success": True}), "is_error": False}})

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def mail_server() -> Iterator[list[dict[str, Any]]]:
    _RecordingMailServer.steps = []
    try:
        server = ThreadingHTTPServer(("127.0.0.1", SIMLAB_EMAIL_PORT), _RecordingMailServer)
    except OSError as exc:
        pytest.fail(f"port {SIMLAB_EMAIL_PORT} (SimLab's mail server port) is taken: {exc}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield _RecordingMailServer.steps
    server.shutdown()
    server.server_close()


def test_tasks_seed_sends_the_task_mailbox(simlab: SimLab, mail_server: list[dict[str, Any]]) -> None:
    simlab.ok("env", "init", "em", "--template", "email_ops", "--non-interactive")
    mailbox = json.loads((simlab.service.scenarios_dir / "email_ops" / "seed_data" / "mailbox.json").read_text())
    out = simlab.ok("tasks", "seed", "--env", "em", "--task", "email_ops_001")
    assert "No seed data" not in out and "seeded successfully" in out, out
    sent = [step["action"] for step in mail_server if step.get("action", {}).get("tool_name") == "send_email"]
    assert [s["parameters"]["subject"] for s in sent] == [e["subject"] for e in mailbox["emails"]]
    first = mailbox["emails"][0]
    assert sent[0]["parameters"]["from_email"] == first["from"]
    assert sent[0]["parameters"]["to"] == ", ".join(first["to"]) and sent[0]["parameters"]["body"] == first["body"]


# -- task generation ---------------------------------------------------------------------------------


def _email_tools() -> list[dict[str, Any]]:
    return [tool.as_task_gen_tool() for tool in EmailServer().tools()]


def _generated_task_ids(bundle: Path) -> list[str]:
    return sorted(json.loads(p.read_text())["meta"]["task_id"] for p in (bundle / "tasks").glob("*.json"))


def _check_bundle_with_simlab_loader(simlab: SimLab, bundle: Path) -> None:
    """The downloaded bundle as SimLab's own local loader reads it."""
    task_ids = _generated_task_ids(bundle)
    assert task_ids
    listing = simlab.ok("tasks", "list", "--tasks-dir", str(bundle))
    assert all(task_id in listing for task_id in task_ids), listing
    simlab.ok("tasks", "info", "--tasks-dir", str(bundle), "--task", task_ids[0])
    simlab.ok("tasks", "validate", "--tasks-dir", str(bundle))
    for path in (bundle / "tasks").glob("*.json"):
        for entry in json.loads(path.read_text())["verifiers"]:
            assert entry["func"] == "python_module"
            assert (bundle / "verifiers" / f"{entry['module'].rsplit('.', 1)[-1]}.py").is_file(), entry


def test_tasks_gen_run_from_a_toolset_then_status_and_the_bundle(simlab: SimLab) -> None:
    (simlab.cwd / "tools.json").write_text(json.dumps(_email_tools()))
    out = simlab.ok(
        "tasks-gen",
        "run",
        "--tools",
        "tools.json",
        "--num-tasks",
        "3",
        "--model",
        "schema",
        "--out",
        "gen",
        "--verbose",
    )
    job = re.search(r"Job ID:\s*(\S+)", out)
    assert job is not None, out
    assert re.search(r"Status:\s*completed", simlab.ok("tasks-gen", "status", job.group(1)))
    bundle = simlab.cwd / "gen"
    assert (bundle / "skills.md").is_file() and list((bundle / "instructions").glob("*.md"))
    _check_bundle_with_simlab_loader(simlab, bundle)
    unknown = simlab.run("tasks-gen", "status", "00000000-0000-0000-0000-000000000000")
    assert unknown.returncode == 1 and "Not found" in unknown.stdout + unknown.stderr


def test_tasks_gen_run_from_an_openai_schema_with_a_description(simlab: SimLab) -> None:
    schema = {
        "tools": [
            {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": p}}
            for t in _email_tools()
            if isinstance(p := t.get("inputSchema"), dict)
        ]
    }
    (simlab.cwd / "schema.json").write_text(json.dumps(schema))
    simlab.ok(
        "tasks-gen",
        "run",
        "--from-schema",
        "schema.json",
        "--num-tasks",
        "2",
        "--model",
        "schema",
        "--describe",
        "triage the shared inbox",
        "--out",
        "gen",
    )
    _check_bundle_with_simlab_loader(simlab, simlab.cwd / "gen")


@pytest.mark.parametrize("preset", SIMLAB_PRESETS)
def test_tasks_gen_run_from_a_simlab_preset_config(simlab: SimLab, preset: str) -> None:
    simlab.ok("tasks-gen", "init", "--preset", preset, "--output-dir", "cfg")
    config = simlab.cwd / "cfg" / "config.toml"
    assert f'preset = "{preset}"' in config.read_text()
    simlab.ok("tasks-gen", "run", "--config", str(config), "--num-tasks", "3", "--model", "schema", "--out", "gen")
    bundle = simlab.cwd / "gen"
    _check_bundle_with_simlab_loader(simlab, bundle)
    profiles = json.loads((bundle / "npcs" / "profiles.json").read_text())
    assert profiles and all(p["profile_id"] and p["email"] for p in profiles)


# -- the verifier bundle -----------------------------------------------------------------------------

_RUN_VERIFIER = """
import json, os, sys
from pathlib import Path
from simlab.verifiers.runner import _VerifierArtifactsAdapter, run_verifier
state = json.loads(sys.argv[1])
adapter = _VerifierArtifactsAdapter(
    version="0.1", task_id="email_ops_001", task="", task_file="", tool_server_name="email", tool_server_url="",
    agent_strategy="tool-calling", model="m", provider="p", steps_taken=0, max_steps=1, tool_servers=[],
    metadata={"state": state}, messages=[], final_observation=None, last_tool_message=None, verifier_input=None,
    rollback_input=None, diffs=[], created_at="now",
)
result = run_verifier(
    sys.argv[2], adapter, "email_ops",
    scenario_manager_base_url=os.environ["SIMLAB_SCENARIO_MANAGER_API_URL"],
    scenario_manager_api_key=os.environ["SIMLAB_COLLINEAR_API_KEY"],
    verifier_cache_root=Path("vcache"),
)
print(json.dumps({"success": bool(result.success), "message": result.message}))
"""


def test_the_verifier_bundle_is_fetched_by_family_id_and_run_by_simlab(simlab: SimLab) -> None:
    listing = json.loads(simlab.python_ok(_list_tasks_code()))
    modules = next(t["verifier_modules"] for t in listing["tasks"] if t["task_id"] == "email_ops_001")
    assert modules and all(m.startswith("collinear.scenarios.email_ops.verifiers.") for m in modules)
    unchanged = {"email": {"initial": {"emails": {}}, "final": {"emails": {}}}}
    code_file = simlab.cwd / "run_verifier.py"
    code_file.write_text(_RUN_VERIFIER)
    for module in modules:
        result = run_client(
            [simlab.python, str(code_file), json.dumps(unchanged), module],
            simlab.env(simlab.service.write_key),
            simlab.cwd,
        )
        assert result.returncode == 0, describe(result)
        verdict = json.loads(result.stdout.strip().splitlines()[-1])
        # imported and run: a task whose mailbox did not change fails on its merits, not on an import
        assert not verdict["success"], verdict
        assert not verdict["message"].startswith(("Failed to import", "Verifier bundle not found", "Cannot")), verdict
    assert (simlab.cwd / "vcache" / "email_ops" / "collinear" / "scenarios" / "email_ops" / "verifiers").is_dir()


def _list_tasks_code() -> str:
    return (
        "import json, os\n"
        "from simlab.api.client import ScenarioManagerClient\n"
        "client = ScenarioManagerClient(base_url=os.environ['SIMLAB_SCENARIO_MANAGER_API_URL'],"
        " api_key=os.environ['SIMLAB_COLLINEAR_API_KEY'])\n"
        "print(json.dumps(client.list_scenario_tasks('email_ops').model_dump()))\n"
    )


def test_the_client_venv_is_not_the_project_venv() -> None:
    """The clients stay out of the project's dependencies: neither is importable here."""
    for name in ("simlab", "collinear"):
        probe = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, check=False)
        assert probe.returncode != 0, f"{name} is importable from the project's venv"
