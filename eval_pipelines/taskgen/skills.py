"""The skills document: what the agent is, the rules it works under, and how to use each tool well."""

from __future__ import annotations

import json
from typing import Any

from eval_pipelines.taskgen.context import GenerationContext
from eval_pipelines.taskgen.toolset import ToolInfo, id_stem

OP_HINTS = {
    "create": "creates a new item from the values you pass",
    "update": "changes fields of an existing item; pass its id and only the fields to change",
    "delete": "removes an existing item; pass its id",
    "modify": "acts on an existing item (named by its id) and records something new about it",
    "global": "changes many items at once; use it only when the request asks for exactly that",
    "read": "reads state without changing it; use it to find ids and check current values",
}


def _param_line(name: str, schema: dict[str, Any], required: bool) -> str:
    kind = schema.get("type", "any")
    extra = []
    if isinstance(schema.get("enum"), list):
        extra.append("one of " + ", ".join(json.dumps(v) for v in schema["enum"]))
    if "format" in schema:
        extra.append(f"format {schema['format']}")
    if "default" in schema:
        extra.append(f"default {json.dumps(schema['default'])}")
    if id_stem(name) is not None:
        extra.append("an id: find it with a read tool first")
    description = str(schema.get("description") or "").strip()
    tail = f" ({'; '.join(extra)})" if extra else ""
    return f"  - `{name}` ({kind}{', required' if required else ''}): {description}{tail}"


def _tool_section(tool: ToolInfo, op: str) -> list[str]:
    lines = [f"### `{tool.server}__{tool.name}`", "", tool.description or "(no description)", ""]
    lines.append(f"- What it does: {OP_HINTS.get(op, OP_HINTS['create'])}.")
    if tool.properties:
        lines.append("- Parameters:")
        lines += [_param_line(n, s, n in tool.required) for n, s in tool.properties.items()]
    else:
        lines.append("- Parameters: none")
    return [*lines, ""]


def render_skills(ctx: GenerationContext, ops: dict[tuple[str, str], str]) -> str:
    """Markdown. `ops` maps (server, tool) to its operation kind as the planner learnt it."""
    resolved = ctx.resolved
    title = resolved.scenario.name or "Generated scenario"
    lines = [f"# {title}: skills", ""]
    if resolved.agent.role or resolved.agent.description:
        lines += ["## The agent", ""]
        if resolved.agent.role:
            lines.append(f"- Role: {resolved.agent.role}")
        if resolved.scenario.role_label:
            lines.append(f"- Acts as: {resolved.scenario.role_label}")
        if resolved.agent.description:
            lines.append(f"- {resolved.agent.description}")
        lines.append("")
    workspace = resolved.workspace
    lines += [
        "## Workspace",
        "",
        f"- Your account: {workspace.agent_email}",
        f"- Colleagues' addresses end in @{workspace.email_domain}",
        "",
    ]
    if resolved.scenario.conventions:
        lines += ["## Conventions", "", resolved.scenario.conventions, ""]
    if resolved.scenario.policies:
        lines += ["## Policies", "", *(f"- {p}" for p in resolved.scenario.policies), ""]
    lines += [
        "## Working rules",
        "",
        "- Use exactly the values the request states (titles, times, addresses); the result is checked against "
        "the tool server's state, not against your reply.",
        "- An item named only by its title must be found first (search or list), then changed by its id.",
        "- Change nothing the request does not mention.",
        "",
    ]
    if resolved.workflows:
        lines += ["## Workflows", ""]
        for workflow in resolved.workflows:
            lines.append(f"- **{workflow.name}**: " + " -> ".join(workflow.steps))
        lines.append("")
    if ctx.npc_profiles:
        lines += ["## People", ""]
        for npc in ctx.npc_profiles:
            lines.append(f"- {npc.first_name} {npc.last_name} <{npc.email}>: {npc.public_info or npc.occupation}")
        lines.append("")
    lines += ["## Tools", ""]
    for tool in ctx.toolset.tools:
        lines += _tool_section(tool, ops.get((tool.server, tool.name), "read" if not tool.mutates else "create"))
    return "\n".join(lines).rstrip() + "\n"
