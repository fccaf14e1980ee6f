"""`sim-taskgen`: a SIMULATED model for the LLM-driven task generator, served by `create_sim_app(personas=...)`.

It reads the CONTEXT block (fenced JSON with a `step`) that every task-generation prompt ends with and answers
the way a capable model would: a skills document, tasks composed from the prompt's example calls, instructions
that state every required value, rubrics as JSON, and verifiers written from the expected state changes. It is
deterministic (the same prompt gives the same reply) and, like every simulated model, says nothing about any
real model's quality.
"""

from __future__ import annotations

import json
import re
from typing import Any

from eval_pipelines.llm.types import ChatRequest

SIM_TASKGEN = "sim-taskgen"
UNKNOWN_STEP_REPLY = "I can only help with task-generation prompts."

_CONTEXT = re.compile(r"CONTEXT:\s*```json\s*\n(.*?)\n```", re.DOTALL)


def prompt_context(request: ChatRequest) -> dict[str, Any] | None:
    """The CONTEXT object of a task-generation prompt (first user message), or None."""
    text = request.first_user_content() or ""
    match = _CONTEXT.search(text)
    if match is None:
        return None
    try:
        data = json.loads(match.group(1))
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def prompt_step(request: ChatRequest) -> str | None:
    context = prompt_context(request)
    step = context.get("step") if context else None
    return step if isinstance(step, str) else None


def _skills(context: dict[str, Any]) -> str:
    lines = ["# Skills", "", f"Agent role: {context.get('agent', {}).get('role') or 'assistant'}.", "", "## Tools", ""]
    for tool in context.get("tools", []):
        lines.append(f"- `{tool.get('tool_server')}__{tool.get('name')}`: {tool.get('description') or ''}")
    lines += ["", "Find ids with the read tools before changing an item.", ""]
    return "\n".join(lines)


def _tasks(context: dict[str, Any]) -> str:
    examples = context.get("example_calls") or []
    writes = [e for e in examples if e.get("mutates")]
    reads = [e for e in examples if not e.get("mutates")]
    actions = int((context.get("actions_per_task") or [1])[0])
    count = int(context.get("count") or 1)
    # Earlier rounds' replies may have been rejected without reaching `avoid`: move past them too.
    offset = len(context.get("avoid") or []) + (int(context.get("round") or 1) - 1) * count
    if not writes:
        return json.dumps({"tasks": []})
    tasks = []
    for k in range(count):
        number = offset + k
        chosen: list[dict[str, Any]] = []
        if actions >= 2 and reads and number % 3 == 0:
            chosen.append(reads[number % len(reads)])
        stride = max(1, len(writes) // max(1, actions))
        order = [writes[(number + j * stride) % len(writes)] for j in range(len(writes))]
        order += [writes[(number + j) % len(writes)] for j in range(len(writes))]
        for candidate in order:
            if len(chosen) >= actions:
                break
            if candidate not in chosen:
                chosen.append(candidate)
        calls = [
            {"tool_server": c["tool_server"], "tool_name": c["tool_name"], "parameters": c["parameters"]}
            for c in chosen
        ]
        name = " then ".join(c["tool_name"].replace("_", " ") for c in chosen)
        tasks.append(
            {
                "name": f"{name} #{number + 1}",
                "category": "",
                "difficulty": context.get("difficulty"),
                "summary": f"Task {number + 1}: {name}.",
                "reference_actions": calls,
            }
        )
    return json.dumps({"tasks": tasks}, indent=1)


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_value_text(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k} {_value_text(v)}" for k, v in value.items())
    return str(value)


def _instruction(context: dict[str, Any]) -> str:
    task = context.get("task") or {}
    parts = []
    for call in task.get("reference_actions") or []:
        params = ", ".join(f"{k.replace('_', ' ')} {_value_text(v)}" for k, v in call.get("parameters", {}).items())
        parts.append(f"use {call.get('tool_name', '').replace('_', ' ')} with {params}" if params else "")
    body = "; then ".join(p for p in parts if p)
    return f"Please take care of this ({task.get('name', 'task')}): {body}. Change nothing else."


def _rubric(context: dict[str, Any]) -> str:
    task = context.get("task") or {}
    return json.dumps(
        {
            "title": task.get("name") or "Task",
            "overview": task.get("summary") or "",
            "success_criteria": context.get("expected_changes") or ["The requested change is made"],
            "quality_criteria": ["Nothing else changes"],
            "scoring": [
                {"label": "pass", "description": "Every criterion holds."},
                {"label": "fail", "description": "A criterion does not hold."},
            ],
        }
    )


_VERIFIER_BODY = """

def _norm(value):
    if isinstance(value, str):
        return " ".join(value.split()).lower()
    if isinstance(value, list):
        return sorted((_norm(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def _match(actual, pattern):
    if "eq" in pattern:
        return _norm(actual) == _norm(pattern["eq"])
    if "fields" in pattern:
        return isinstance(actual, dict) and all(_match(actual.get(k), p) for k, p in pattern["fields"].items())
    if "contains" in pattern:
        return isinstance(actual, list) and all(any(_match(a, p) for a in actual) for p in pattern["contains"])
    return False


def verify(run_artifacts):
    if isinstance(run_artifacts, dict):
        metadata = run_artifacts.get("metadata") or {}
    else:
        metadata = getattr(run_artifacts, "metadata", None) or {}
    states = metadata.get("state") or {}
    for server, rules in EXPECTED.items():
        recorded = states.get(server) or {}
        initial, final = recorded.get("initial") or {}, recorded.get("final") or {}
        for rule in rules.get("removed", []):
            if rule["key"] in (final.get(rule["collection"]) or {}):
                return False, f"{rule['key']} still exists"
        for rule in rules.get("changed", []):
            item = (final.get(rule["collection"]) or {}).get(rule["key"])
            if item is None or not _match(item, rule["pattern"]):
                return False, f"{rule['key']} does not have the expected values"
        for rule in rules.get("added", []):
            before = initial.get(rule["collection"]) or {}
            new = [v for k, v in (final.get(rule["collection"]) or {}).items() if k not in before]
            if not any(_match(item, rule["pattern"]) for item in new):
                return False, f"no new item in {rule['collection']} with the expected values"
    return True, "the state has every expected change"
"""


def _verifier(context: dict[str, Any]) -> str:
    expected = json.dumps(context.get("expected_changes") or {})
    code = f'"""Verifier for {context.get("task_id")}."""\n\nimport json\n\nEXPECTED = json.loads({expected!r})\n'
    return "```python\n" + code + _VERIFIER_BODY + "```"


_STEPS = {
    "skills": _skills,
    "tasks": _tasks,
    "instructions": _instruction,
    "rubrics": _rubric,
    "verifiers": _verifier,
}


def taskgen_persona(request: ChatRequest) -> str:
    """The reply text to one task-generation prompt."""
    context = prompt_context(request)
    step = context.get("step") if context else None
    handler = _STEPS.get(step) if isinstance(step, str) else None
    if context is None or handler is None:
        return UNKNOWN_STEP_REPLY
    return handler(context)
