"""A fake upstream benchmark for the tests of the generic benchmark machinery: a counter backend run by an
upstream-style worker script (stdlib only, JSON lines), and an adapter that materialises it as a scenario."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, ClassVar

from eval_pipelines.benchmarks.environments import EnvironmentSpec
from eval_pipelines.benchmarks.toolserver import UpstreamToolServer
from eval_pipelines.benchmarks.worker import UpstreamWorker

FAKE_WORKER_SCRIPT = '''
import json, os, subprocess, sys, time

workspaces = {}
TOOLS = [{"type": "function", "function": {"name": "add", "description": "add to the counter",
          "parameters": {"type": "object", "properties": {"by": {"type": "integer"}}}}}]


def state(workspace):
    return {"counter": {"value": workspaces[workspace]}}


def op_create(workspace, start=0):
    workspaces[workspace] = start
    return {"state": state(workspace)}


def op_call(workspace, name, arguments):
    if workspace not in workspaces:
        raise KeyError(workspace)
    if name == "add":
        workspaces[workspace] += arguments.get("by", 1)
        return {"result": str(workspaces[workspace]), "refused": False, "state": state(workspace)}
    if name == "hang":
        time.sleep(3600)
    if name == "crash":
        print("the fake backend dies", file=sys.stderr, flush=True)
        os._exit(3)
    workspaces[workspace] += 100  # as an upstream backend may: a failing call that changed something first
    return {"result": "Error: no such function " + name, "refused": True, "state": state(workspace)}


def op_delete(workspace):
    return workspaces.pop(workspace, None) is not None


def op_env():
    return sorted(os.environ)


def op_spawn():
    return subprocess.Popen(["sleep", "600"]).pid


def op_chatty():
    print("upstream noise on stdout")
    return "answered"


def op_tasks(count):
    return [{"id": "counter_%d" % i, "start": i} for i in range(count)]


OPS = {name[3:]: fn for name, fn in dict(globals()).items() if name.startswith("op_")}

protocol, sys.stdout = sys.stdout, sys.stderr
for line in sys.stdin:
    request = json.loads(line)
    request_id, op = request.pop("id"), request.pop("op")
    try:
        reply = {"id": request_id, "ok": True, "result": OPS[op](**request)}
    except Exception as exc:
        reply = {"id": request_id, "ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
    protocol.write(json.dumps(reply) + "\\n")
    protocol.flush()
'''

FAKE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "add to the counter",
            "parameters": {"type": "object", "properties": {"by": {"type": "integer"}}},
        },
    }
]


def write_fake_script(folder: Path) -> Path:
    script = folder / "fake_upstream_worker.py"
    script.write_text(FAKE_WORKER_SCRIPT, encoding="utf-8")
    return script


def fake_environment(name: str = "fakebench") -> EnvironmentSpec:
    return EnvironmentSpec(name=name, label="fakebench 1.0", installs=())


def fake_server_class(script: Path, python: Path = Path(sys.executable)) -> type[UpstreamToolServer]:
    """A counter server; the environment's interpreter is the test's own (through the python override)."""

    class FakeCounterServer(UpstreamToolServer):
        name: ClassVar[str] = "fakebench"
        environment: ClassVar[EnvironmentSpec] = fake_environment()
        worker_script: ClassVar[Path] = script
        call_timeout_seconds: ClassVar[float] = 5.0

    return FakeCounterServer


class FakeAdapter:
    """Materialises `fakebench_counter` as a scenario whose tasks each seed a counter."""

    name = "fakebench"
    families = ("fakebench_counter",)
    refused = {"fakebench_telecom": "not supported yet: needs user-side tools"}
    version = "1.0"
    default_max_steps_per_turn = None
    metric = "fake_accuracy"

    def __init__(self, script: Path, task_count: int = 5, splits: dict[str, list[str]] | None = None) -> None:
        self.environment = fake_environment()
        self.worker_script = script
        self.tool_servers = {"fakebench": fake_server_class(script)}
        self.task_count = task_count
        self.splits = splits
        self.materialised = 0

    async def materialise(self, worker: UpstreamWorker, family: str, out_dir: Path) -> None:
        self.materialised += 1
        tasks: list[dict[str, Any]] = await worker.request("tasks", count=self.task_count)
        (out_dir / "tasks").mkdir()
        (out_dir / "verifiers").mkdir()
        (out_dir / "verifiers" / "__init__.py").write_text("")
        template = {"scenario_id": family, "name": "Fake counter", "version": f"{family}:{self.version}"}
        (out_dir / "template.json").write_text(json.dumps(template))
        for task in tasks:
            body = {
                "task_id": task["id"],
                "name": task["id"],
                "description": f"count from {task['start']}",
                "tool_servers": [{"name": "fakebench"}],
                "benchmark": self.name,
            }
            (out_dir / "tasks" / f"{task['id']}.json").write_text(json.dumps(body))
        if self.splits is not None:
            (out_dir / "splits.json").write_text(json.dumps(self.splits))
