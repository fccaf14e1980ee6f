"""Prompts of the LLM-driven generator, one per step. Each ends with a CONTEXT block (fenced JSON holding the
step name and its data), so the request is self-describing for any model, simulated ones included."""

from __future__ import annotations

import json
from typing import Any

SYSTEM = (
    "You design evaluation tasks for AI agents that use tools. Tasks are checked by reading the tool servers' "
    "state after the agent ran, so every task must leave a precise, checkable change in that state. Follow the "
    "requested output format exactly and add nothing else."
)

STATE_SHAPE = (
    "A verifier is a Python module defining verify(run_artifacts) -> (bool, str). run_artifacts is a dict or an "
    "object with a `metadata` attribute (use getattr or .get). metadata['state'][server] = {'initial': S, "
    "'final': S}, where S maps a collection name to {item_id: item_dict}. Compare final with initial. Use only "
    "the Python standard library (never import eval_pipelines). Compare text case-insensitively and ignore "
    "surrounding whitespace; compare lists of addresses as sets. New items have ids you cannot predict: find "
    "them as keys of final that are not in initial. Return (False, reason) when something is missing."
)


def _context(data: dict[str, Any]) -> str:
    return "CONTEXT:\n```json\n" + json.dumps(data, indent=1, default=str) + "\n```"


def skills_prompt(context: dict[str, Any]) -> str:
    return (
        "Write the skills document (Markdown) for the agent: its role, the workspace, conventions and policies, "
        "and for every tool what it does, its parameters and when to use it (including how to find the ids "
        "other tools need). Reply with the Markdown only.\n\n" + _context({"step": "skills", **context})
    )


def tasks_prompt(context: dict[str, Any]) -> str:
    count, difficulty = context["count"], context["difficulty"]
    actions = context["actions_per_task"]
    return (
        f"Write {count} {difficulty} task(s). A {difficulty} task has exactly {' or '.join(map(str, actions))} "
        "reference action(s) (tool calls, reads included), in the order a competent agent makes them. Rules:\n"
        "- at least one action changes state; use only the listed tools, with parameters valid for their schema;\n"
        "- refer to existing items by the ids shown in `world`; an agent given only a title must look it up first;\n"
        "- make every task different from the others and from those listed in `avoid`;\n"
        "- `example_calls` are valid calls you may reuse or vary.\n"
        'Reply with JSON only: {"tasks": [{"name": str, "category": str, "difficulty": str, "summary": str, '
        '"reference_actions": [{"tool_server": str, "tool_name": str, "parameters": {}}]}]}\n\n'
        + _context({"step": "tasks", **context})
    )


def instruction_prompt(context: dict[str, Any]) -> str:
    return (
        "Write the instruction the agent receives for this task, as the person asking would say it. It must "
        "state, word for word, every value listed in `must_state` (these are checked in the state), name items "
        "the way `reference_actions` finds them, and ask for nothing else. Reply with the instruction text "
        "only.\n\n" + _context({"step": "instructions", **context})
    )


def rubric_prompt(context: dict[str, Any]) -> str:
    return (
        "Write the grading rubric of this task. Reply with JSON only: "
        '{"title": str, "overview": str, "success_criteria": [str], "quality_criteria": [str], '
        '"scoring": [{"label": "pass"|"partial"|"fail", "description": str}]}\n\n'
        + _context({"step": "rubrics", **context})
    )


def verifier_prompt(context: dict[str, Any]) -> str:
    return (
        "Write the state verifier of this task. " + STATE_SHAPE + " It must pass when every change in "
        "`expected_changes` is in the final state and fail when the state did not change. Reply with one "
        "```python block.\n\n" + _context({"step": "verifiers", **context})
    )
