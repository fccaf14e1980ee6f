"""The schema-driven planner: valid parameters, seeded worlds, difficulty as action count, presets and
workflows, workspace and NPCs, diversity, and a toolset of the user's own (served by a stand-in simulated from
its schemas, so its tasks are gated too)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.taskgen import (
    DefaultTaskGenerator,
    LLMEndpoint,
    SchemaTaskGenerator,
    generate_scenario,
    parse_request,
)
from eval_pipelines.taskgen.context import build_context
from eval_pipelines.taskgen.planner import Planner
from eval_pipelines.taskgen.schema_generator import plan_drafts
from eval_pipelines.taskgen.state_check import check_state
from eval_pipelines.toolservers.email import EmailServer
from tests.taskgen.conftest import calendar_toolset


def _plan(**fields: Any) -> tuple[Any, Planner, list[Any], dict[str, Any]]:
    ctx = build_context(parse_request({"toolset": calendar_toolset(), **fields}))
    planner = Planner(ctx)
    drafts, info = plan_drafts(ctx, planner)
    return ctx, planner, drafts, info


def test_parameters_are_schema_valid_and_update_targets_are_seeded() -> None:
    toolset = calendar_toolset() + [t.as_task_gen_tool() | {"tool_server": "email"} for t in EmailServer().tools()]
    ctx = build_context(parse_request({"toolset": toolset, "num_tasks": 30}))
    planner = Planner(ctx)
    drafts, _ = plan_drafts(ctx, planner)
    assert len(drafts) == 30
    schemas = {(t.server, t.name): t.schema for t in ctx.toolset.tools}
    used = {(a.tool_server, a.tool_name) for d in drafts for a in d.actions}
    assert ("calendar", "update_event") in used and ("email", "send_email") in used
    world = ctx.sandboxes["calendar"].seed
    assert world is not None
    world_events = world["events"]
    for draft in drafts:
        for action in draft.actions:
            errors = list(
                Draft202012Validator(schemas[(action.tool_server, action.tool_name)]).iter_errors(action.parameters)
            )
            assert errors == [], (draft.task_id, action)
            if action.tool_name in ("update_event", "delete_event"):
                # The item it acts on exists in the seed every task starts from.
                assert action.parameters["event_id"] in {e["id"] for e in world_events}
        assert draft.seed_names == {s: f"{s}_world.json" for s in draft.servers}


def test_difficulty_is_the_number_of_actions_and_each_instruction_states_the_values() -> None:
    _, _, drafts, info = _plan(num_tasks=24, complexity={"easy": 1, "medium": 1, "hard": 1})
    assert info["skipped"] == []
    sizes = {"easy": {1}, "medium": {2}, "hard": {3, 4}}
    assert [d.difficulty for d in drafts] == ["easy"] * 8 + ["medium"] * 8 + ["hard"] * 8
    for draft in drafts:
        assert len(draft.actions) in sizes[draft.difficulty]
        for action in draft.actions:
            for name, value in action.parameters.items():
                if name == "event_id" or action.tool_name in ("search_events", "list_events"):
                    continue  # found by the agent, not stated
                for element in value if isinstance(value, list) else [value]:
                    assert str(element) in draft.instruction, (draft.task_id, name, element)


def test_generated_expectations_hold_after_the_actions_and_not_before() -> None:
    ctx, _, drafts, _ = _plan(num_tasks=12)
    sandbox = ctx.sandboxes["calendar"]
    for draft in drafts:
        state = sandbox.fresh()
        for action in draft.actions:
            sandbox.run(state, action.tool_name, dict(action.parameters))
        after = {"metadata": {"state": {"calendar": {"initial": sandbox.fresh(), "final": state}}}}
        before = {"metadata": {"state": {"calendar": {"initial": sandbox.fresh(), "final": sandbox.fresh()}}}}
        assert check_state(after, draft.expect)[0], draft.task_id
        assert not check_state(before, draft.expect)[0], draft.task_id


def test_same_seed_same_tasks_and_another_seed_other_tasks() -> None:
    first = [d.instruction for d in _plan(num_tasks=8, diversity={"seed": 7})[2]]
    again = [d.instruction for d in _plan(num_tasks=8, diversity={"seed": 7})[2]]
    other = [d.instruction for d in _plan(num_tasks=8, diversity={"seed": 8})[2]]
    assert first == again and first != other


def test_vary_holds_the_dimensions_left_out_fixed() -> None:
    closings = re.compile(r"(Leave everything else unchanged|Do not change anything else|Nothing else should change)")

    def closing_kinds(vary: list[str]) -> set[str]:
        drafts = _plan(num_tasks=12, diversity={"vary": vary})[2]
        return {m.group(1) for d in drafts if (m := closings.search(d.instruction))}

    assert len(closing_kinds(["parameters", "entities"])) == 1
    assert len(closing_kinds(["parameters", "phrasing", "entities"])) > 1


def test_max_similar_rejects_near_duplicates() -> None:
    _, _, strict, info = _plan(num_tasks=12, diversity={"max_similar": 0.2})
    _, _, loose, loose_info = _plan(num_tasks=12, diversity={"max_similar": 1.0})
    assert info["too_similar"] > 0 and len(strict) < 12
    assert len(loose) == 12 and loose_info["skipped"] == []
    assert len({d.instruction for d in loose}) == 12


def test_preset_workflows_categories_workspace_and_npcs() -> None:
    ctx, planner, drafts, _ = _plan(
        num_tasks=16,
        preset="office_assistant",
        workspace={"email_domain": "acme.test", "agent_email": "ops@acme.test"},
        npcs=[{"role": "Chief Financial Officer", "typical_asks": ["book the budget review"]}],
    )
    assert planner.unmapped_workflows == []
    followed = {d.workflow for d in drafts if d.workflow}
    assert {"schedule a meeting", "reschedule a meeting", "cancel a meeting", "replace a meeting"} & followed
    for draft in drafts:
        if draft.workflow == "replace a meeting":
            assert [a.tool_name for a in draft.actions][1:] == ["delete_event", "create_event"]
    assert {d.category for d in drafts} <= {"scheduling", "maintenance", "cleanup"}
    assert (ctx.sandboxes["calendar"].seed or {})["account"] == "ops@acme.test"
    (npc,) = ctx.npc_profiles
    assert npc.occupation == "Chief Financial Officer" and npc.email.endswith("@acme.test")
    addresses = [a for d in drafts for act in d.actions for a in act.parameters.get("attendees", [])]
    assert addresses and all(a.endswith("@acme.test") for a in addresses)


def test_a_toolset_of_the_users_own_is_simulated_and_its_tasks_gated() -> None:
    toolset = [
        {
            "name": "create_contact",
            "description": "Add a contact",
            "input_schema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "email": {"type": "string", "format": "email"},
                    "tier": {"type": "string", "enum": ["gold", "silver"]},
                },
                "required": ["name", "email", "tier"],
            },
        },
        {"name": "list_contacts", "description": "List", "parameters": {"type": "object", "properties": {}}},
        {
            "name": "merge_contacts",
            "inputSchema": {
                "type": "object",
                "properties": {"contact_id": {"type": "string"}},
                "required": ["contact_id"],
            },
        },
    ]
    request = parse_request({"toolset": toolset, "num_tasks": 4})
    results = asyncio.run(SchemaTaskGenerator().generate(request, lambda _text: None))
    summary = results.filter_summary
    assert summary is not None and summary["gated"] is True
    assert summary["servers"] == {"tools": "simulated from the toolset's schemas"}
    assert summary["verifiers"] == {"total": 4, "passed": 4, "failed": 0, "ungated": 0}
    used = set()
    for file in results.tasks:
        task = json.loads(file.content)
        used |= {a["tool_name"] for a in task["reference_actions"]}
        for action in task["reference_actions"]:
            if action["tool_name"] == "create_contact":
                assert action["parameters"]["tier"] in ("gold", "silver") and "@" in action["parameters"]["email"]
            else:
                assert set(action["parameters"]) <= {"contact_id"}
    # merging names an existing contact by its id, so only a server to try it on makes it plannable
    assert {"create_contact", "merge_contacts"} <= used


def test_default_generator_without_an_endpoint_runs_offline_and_writes_the_scenario(tmp_path: Path) -> None:
    toolset = [
        {
            "name": "create_contact",
            "inputSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
                "required": ["name", "email"],
            },
        }
    ]
    environ = {"EVAL_TASKGEN_BASE_URL": "", "EVAL_TASKGEN_API_KEY": "sk-should-not-matter"}
    generator = DefaultTaskGenerator.from_environment(environ)
    assert generator.endpoint is None
    request = {"toolset": toolset, "num_tasks": 3, "model": "some-hosted-model", "scenario": {"name": "Contacts"}}
    results, folder = asyncio.run(generate_scenario(request, tmp_path, "contacts:0.1", generator=generator))
    assert results.filter_summary is not None and results.filter_summary["generator"] == "schema"
    assert "EVAL_TASKGEN_BASE_URL" in results.filter_summary["model_ignored"]
    scenario = ScenarioCatalog(tmp_path).get("contacts:0.1")
    assert scenario.template.name == "Contacts" and len(scenario.tasks()) == 3
    assert folder == tmp_path / "contacts_0.1"


def test_endpoint_settings_come_from_the_environment_and_hide_the_key() -> None:
    endpoint = LLMEndpoint.from_environment(
        {
            "EVAL_TASKGEN_BASE_URL": "http://127.0.0.1:8000/v1",
            "EVAL_TASKGEN_API_KEY": "sk-secret-value-123",
            "EVAL_TASKGEN_MODEL": "qwen",
        }
    )
    assert endpoint is not None and endpoint.default_model == "qwen"
    assert "sk-secret-value-123" not in repr(endpoint) and "sk-secret-value-123" not in str(endpoint)
