"""BFCL v4 multi-turn as ordinary scenarios: one scenario folder per category, made from what bfcl_eval itself
reads and executes (the `tasks` op of `upstream_worker.py`), once per pinned version.

A folder holds template.json, tasks/<entry id>.json (a scripted user: the entry's turns, held-out functions
unlocked at their turn), seed_data/<entry id>.json (the workspace the `bfcl` tool server creates in the worker,
with the tools the FC handler would list) and verifiers/ (our grader and gold.json).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_pipelines.benchmarks.environments import EnvironmentSpec
from eval_pipelines.benchmarks.toolserver import UpstreamToolServer
from eval_pipelines.benchmarks.worker import UpstreamWorker
from eval_pipelines.schemas.scenarios import ScriptedUserSpec, Task, TaskToolServer, Template, TemplateToolServer
from eval_pipelines.schemas.tools import ToolCall

BENCHMARK = "bfcl"
SERVER = "bfcl"
PACKAGE = "bfcl-eval"
UPSTREAM_VERSION = "2026.3.23"
#: The bfcl venv, installed as listed (`--no-deps` each): bfcl_eval's multi-turn backends and checker need
#: mpmath; `model_handler.utils` (the FC handler's `convert_to_tool` and `convert_to_function_call`) needs the
#: tree-sitter parsers, filelock and tenacity. Nothing else of its heavy dependency list is imported.
REQUIREMENTS = (
    f"{PACKAGE}=={UPSTREAM_VERSION}",
    "mpmath==1.4.1",
    "tree_sitter==0.21.3",
    "tree_sitter_java==0.21.0",
    "tree_sitter_javascript==0.21.4",
    "filelock==4.3.1",
    "tenacity==9.2.1",
)
WORKER_SCRIPT = Path(__file__).with_name("upstream_worker.py")
VERIFIER_TEMPLATE = Path(__file__).with_name("verifier_template.py")
VERIFIER_MODULE = "bfcl_multi_turn"
GOLD_FILE = "gold.json"
#: scenario family -> bfcl_eval category
FAMILIES = {
    "bfcl_multi_turn_base": "multi_turn_base",
    "bfcl_multi_turn_miss_func": "multi_turn_miss_func",
    "bfcl_multi_turn_miss_param": "multi_turn_miss_param",
    "bfcl_multi_turn_long_context": "multi_turn_long_context",
}


ENVIRONMENT = EnvironmentSpec(
    name=BENCHMARK,
    label=f"{PACKAGE} {UPSTREAM_VERSION}",
    installs=(("--no-deps", *REQUIREMENTS),),
)
#: The tools' schemas are listed per workspace from the task's seed; the upstream classes run them.
MATERIALISE_TIMEOUT_SECONDS = 600.0


class BfclToolServer(UpstreamToolServer):
    name = SERVER
    environment = ENVIRONMENT
    worker_script = WORKER_SCRIPT

    def mutates(self, tool_name: str) -> bool:
        # Upstream's model reads each call's result string and nothing else: a per-call diff would be appended
        # to it (`[STATE DIFF]`), and the state copied before every call. The state still follows every call
        # (the worker's dump), and turn states and the final diff are taken from it.
        return False


def scenario_id(family: str) -> str:
    return f"{family}:{UPSTREAM_VERSION}"


def _turn_text(messages: list[dict[str, Any]]) -> str | None:
    # every BFCL multi-turn turn holds one user message, or none on a turn that only adds functions
    texts = [str(message.get("content") or "") for message in messages if message.get("role") == "user"]
    return "\n".join(texts) if texts else None


def _tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [str(tool["function"]["name"]) for tool in tools]


def build_task(entry: dict[str, Any], category: str, unlock_message: str, max_steps: int) -> Task:
    turns = [_turn_text(messages) for messages in entry["turns"]]
    reference_turns = [
        [
            ToolCall(tool_server=SERVER, tool_name=call["name"], parameters=call["arguments"])
            for call in turn["reference"]
        ]
        for turn in entry["gold"]
    ]
    return Task(
        task_id=entry["id"],
        name=entry["id"],
        category=category,
        description=turns[0] or "",
        tool_servers=[TaskToolServer(name=SERVER)],
        seed_data={SERVER: [f"{entry['id']}.json"]},
        verifiers=[VERIFIER_MODULE],
        reference_actions=[call for turn in reference_turns for call in turn],
        # upstream grades a rollout its step cap cut short in the last turn: the verdict is the verifier's
        pass_at_max_steps=True,
        user=ScriptedUserSpec(
            turns=turns,
            unlocks={turn: _tool_names(tools) for turn, tools in entry["held_out_tools"].items()},
            unlock_message=unlock_message,
        ),
        # the FC handler sends the turns' messages and nothing before them
        system_prompt="",
        bare_tool_names=True,
        # upstream runs a turn's 21st calling step, then force-quits (`count > MAXIMUM_STEP_LIMIT`): 20 calling
        # steps and a final text reply fit in a turn, so the cap on model replies per turn is one more than it
        max_steps_per_turn=max_steps + 1,
        reference_turns=reference_turns,
        benchmark=BENCHMARK,
    )


def seed(entry: dict[str, Any], category: str) -> dict[str, Any]:
    """What the `bfcl` tool server needs to create the entry's workspace in the worker."""
    return {
        "test_entry_id": entry["id"],
        "initial_config": entry["initial_config"],
        "involved_classes": entry["involved_classes"],
        "long_context": "long_context" in category,
        "tools": [*entry["tools"], *(tool for tools in entry["held_out_tools"].values() for tool in tools)],
    }


def gold(entry: dict[str, Any]) -> dict[str, Any]:
    """The verifier's and the parity runner's record of one entry."""
    return {
        "entry": {
            "id": entry["id"],
            "initial_config": entry["initial_config"],
            "involved_classes": entry["involved_classes"],
        },
        "turns": [
            {"calls": turn["calls"], "results": turn["results"], "state": turn["state"]} for turn in entry["gold"]
        ],
    }


def _write_json(path: Path, value: Any) -> None:
    # in upstream's key order: a backend lists a folder's files in the order its initial config names them
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")


def write_scenario(family: str, upstream_tasks: dict[str, Any], folder: Path) -> Path:
    """Write the scenario folder of `family` into `folder` (empty: the catalog moves it into place) from the
    worker's `tasks` answer."""
    category = upstream_tasks["category"]
    entries = upstream_tasks["tasks"]
    staging = folder
    for sub in ("tasks", "seed_data", "verifiers"):
        (staging / sub).mkdir(parents=True)
    template = Template(
        scenario_id=scenario_id(family),
        name=f"BFCL v4 {category.replace('_', ' ')}",
        description=(
            f"BFCL v4 {category} (bfcl-eval {UPSTREAM_VERSION}): multi-turn function calling, graded by the "
            "state and response checks of upstream's multi_turn_checker."
        ),
        num_tasks=len(entries),
        tool_servers=[TemplateToolServer(name=SERVER)],
    )
    _write_json(staging / "template.json", template.model_dump(mode="json"))
    for entry in entries:
        task = build_task(entry, category, upstream_tasks["unlock_message"], upstream_tasks["max_steps_per_turn"])
        _write_json(staging / "tasks" / f"{entry['id']}.json", task.model_dump(mode="json", exclude_none=True))
        _write_json(staging / "seed_data" / f"{entry['id']}.json", seed(entry, category))
    (staging / "verifiers" / "__init__.py").write_text(
        '"""BFCL v4 multi-turn verifiers (materialised by eval_pipelines.benchmarks.bfcl)."""\n', encoding="utf-8"
    )
    shutil.copyfile(VERIFIER_TEMPLATE, staging / "verifiers" / f"{VERIFIER_MODULE}.py")
    _write_json(staging / "verifiers" / GOLD_FILE, {entry["id"]: gold(entry) for entry in entries})
    return folder


@dataclass(frozen=True)
class BfclAdapter:
    name: str = BENCHMARK
    families: tuple[str, ...] = tuple(FAMILIES)
    refused: dict[str, str] = field(default_factory=dict)
    version: str = UPSTREAM_VERSION
    environment: EnvironmentSpec = ENVIRONMENT
    worker_script: Path = WORKER_SCRIPT
    tool_servers: dict[str, type[UpstreamToolServer]] = field(default_factory=lambda: {SERVER: BfclToolServer})
    default_max_steps_per_turn: int | None = None
    metric: str = "bfcl_accuracy"

    async def materialise(self, worker: UpstreamWorker, family: str, out_dir: Path) -> None:
        """Ask the worker for the category's tasks and gold and write the scenario folder."""
        category = FAMILIES.get(family)
        if category is None:
            raise ValueError(f"unknown BFCL family {family!r}; known: {', '.join(FAMILIES)}")
        answer = await worker.request("tasks", timeout=MATERIALISE_TIMEOUT_SECONDS, category=category)
        write_scenario(family, answer, out_dir)


ADAPTER = BfclAdapter()
