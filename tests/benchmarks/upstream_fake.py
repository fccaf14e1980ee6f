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
from eval_pipelines.inputs.paths import BENCHMARK_PYTHON_ENV_PREFIX

#: The fake upstream worker: a script the worker runs with `python -I`, importing only the standard library.
FAKE_WORKER_SCRIPT = Path(__file__).with_name("fake_upstream_worker.py")

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
    """A copy of the fake worker script in `folder` (a test may run several)."""
    script = folder / FAKE_WORKER_SCRIPT.name
    script.write_text(FAKE_WORKER_SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    return script


def fake_environment(name: str = "fakebench") -> EnvironmentSpec:
    return EnvironmentSpec(name=name, label="fakebench 1.0", installs=())


class FakeCounterServer(UpstreamToolServer):
    """The counter as a tool server; its environment's interpreter is the test's own, through the override
    variable `python_override` sets."""

    name: ClassVar[str] = "fakebench"
    environment: ClassVar[EnvironmentSpec] = fake_environment()
    worker_script: ClassVar[Path] = FAKE_WORKER_SCRIPT
    call_timeout_seconds: ClassVar[float] = 5.0


def python_override() -> tuple[str, str]:
    """The variable and value that make `fakebench`'s environment this interpreter."""
    return BENCHMARK_PYTHON_ENV_PREFIX + "FAKEBENCH", sys.executable


class FakeAdapter:
    """Materialises `fakebench_counter` as a scenario whose tasks each seed a counter."""

    name = "fakebench"
    families = ("fakebench_counter",)
    refused = {"fakebench_telecom": "not supported yet: needs user-side tools"}
    version = "1.0"
    default_max_steps_per_turn = None
    metric = "fake_accuracy"

    def __init__(
        self, script: Path = FAKE_WORKER_SCRIPT, task_count: int = 12, splits: dict[str, list[str]] | None = None
    ) -> None:
        self.environment = fake_environment()
        self.worker_script = script
        self.tool_servers: dict[str, type[UpstreamToolServer]] = {"fakebench": FakeCounterServer}
        self.task_count = task_count
        self.splits = splits
        self.materialised = 0

    async def materialise(self, worker: UpstreamWorker, family: str, out_dir: Path) -> None:
        self.materialised += 1
        tasks: list[dict[str, Any]] = await worker.request("tasks", count=self.task_count)
        (out_dir / "tasks").mkdir()
        (out_dir / "seed_data").mkdir()
        (out_dir / "verifiers").mkdir()
        (out_dir / "verifiers" / "__init__.py").write_text("")
        template = {
            "scenario_id": f"{family}:{self.version}",
            "name": "Fake counter",
            "tool_servers": [{"name": "fakebench"}],
        }
        (out_dir / "template.json").write_text(json.dumps(template))
        for task in tasks:
            body = {
                "task_id": task["id"],
                "name": task["id"],
                "description": f"count from {task['start']}",
                "tool_servers": [{"name": "fakebench"}],
                "seed_data": {"fakebench": [f"{task['id']}.json"]},
                "benchmark": self.name,
            }
            (out_dir / "tasks" / f"{task['id']}.json").write_text(json.dumps(body))
            seed = {"start": task["start"], "tools": FAKE_TOOLS}
            (out_dir / "seed_data" / f"{task['id']}.json").write_text(json.dumps(seed))
        if self.splits is not None:
            (out_dir / "splits.json").write_text(json.dumps(self.splits))
