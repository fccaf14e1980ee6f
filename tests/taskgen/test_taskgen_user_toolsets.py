"""Task generation from a user's own tools: their schemas are the authority.

A tool named like a built-in one but with another schema is served by a stand-in simulated from the user's
schema, never by the built-in; a read-only toolset gets questions answered from the data; OpenAI function
items are read like plain tools. A generated task's reference actions, replayed by the rollout engine on the
served tools, pass its own verifier, and a run that does nothing fails it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from eval_pipelines.agents.base import BaseAgent
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutOutcome, RolloutSpec
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.scenarios import Task, TaskToolServer
from eval_pipelines.schemas.taskgen import TaskGenResults
from eval_pipelines.sim.taskgen import SIM_TASKGEN
from eval_pipelines.taskgen import SchemaTaskGenerator, TaskGenRequestError, check_toolset, parse_request
from eval_pipelines.taskgen.answer_check import check_answer, states
from eval_pipelines.taskgen.context import build_context
from eval_pipelines.taskgen.default import READ_ONLY_NOTE, DefaultTaskGenerator, LLMEndpoint
from eval_pipelines.taskgen.gates import NoopAgent, ReplayAgent
from eval_pipelines.taskgen.sandbox import unique_title
from eval_pipelines.taskgen.schema_server import SchemaToolServer
from eval_pipelines.taskgen.state_check import check_state
from eval_pipelines.taskgen.toolset import normalise_toolset
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.toolservers.base import ToolContext, ToolError
from eval_pipelines.toolservers.host import ToolServerHost
from eval_pipelines.toolservers.records import RecordsServer
from tests.support.user_toolsets import USER_TOOLSETS, billing_openai, catalog, crm, ticketing


def _generate(toolset: list[dict[str, Any]], num_tasks: int = 4) -> TaskGenResults:
    request = parse_request({"toolset": toolset, "num_tasks": num_tasks})
    return asyncio.run(SchemaTaskGenerator().generate(request, lambda _text: None))


def _schemas(toolset: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    flat = [t.get("function", t) for t in toolset]
    return {t["name"]: t.get("inputSchema") or t.get("parameters") for t in flat}


# -- binding ------------------------------------------------------------------------------------------


def test_a_tool_named_like_a_builtin_one_with_another_schema_is_simulated_from_the_users_schema() -> None:
    toolset = normalise_toolset(ticketing())
    (server,) = toolset.servers.values()
    assert server.name == "tools" and server.builtin is None
    assert any("create_ticket" in n and "'description'" in n and "records" in n for n in toolset.notes)
    served = build_context(parse_request({"toolset": ticketing(), "num_tasks": 1})).server_classes["tools"]
    assert issubclass(served, SchemaToolServer)
    create = next(t for t in served().tools() if t.name == "create_ticket")
    assert create.parameters == ticketing()[0]["inputSchema"]


def test_tools_with_the_builtin_schema_still_bind_to_the_builtin_server() -> None:
    records = [t.as_task_gen_tool() for t in RecordsServer().tools()]
    assert normalise_toolset(records).builtin_servers == ["records"]
    # the user may leave out optional parameters the built-in has: it still serves the user's calls
    schema = records[0]["inputSchema"]
    without_tags = {name: value for name, value in schema["properties"].items() if name != "tags"}
    create = dict(records[0], inputSchema={**schema, "properties": without_tags})
    assert create["name"] == "create_ticket"
    assert normalise_toolset([create, *records[1:]]).builtin_servers == ["records"]


def test_a_server_named_like_a_builtin_one_must_hold_its_tools_as_they_are() -> None:
    tagged = [dict(t, tool_server="records") for t in ticketing()]
    with pytest.raises(TaskGenRequestError) as caught:
        normalise_toolset(tagged)
    assert caught.value.field == "toolset[0].inputSchema"
    assert "'create_ticket'" in caught.value.message and "'description'" in caught.value.message


def test_an_id_parameter_no_generated_id_fits_is_refused_naming_the_tool_and_the_parameter() -> None:
    toolset = catalog()
    toolset[0]["inputSchema"]["properties"]["product_id"]["pattern"] = "^[0-9a-f]{32}$"
    with pytest.raises(TaskGenRequestError) as caught:
        check_toolset(toolset)
    assert caught.value.field == "toolset[0].inputSchema.properties.product_id"
    assert "'get_product'" in caught.value.message


def test_openai_function_items_and_mcp_read_only_hints_are_read() -> None:
    toolset = normalise_toolset(billing_openai())
    assert [t.name for t in toolset.tools] == ["create_invoice", "get_invoice", "list_invoices", "void_invoice"]
    assert toolset.tools[0].properties["currency"]["enum"] == ["EUR", "USD", "GBP"]
    hinted = normalise_toolset([{"name": "ping_product", "inputSchema": {}, "annotations": {"readOnlyHint": True}}])
    assert not hinted.tools[0].mutates


# -- the simulated server -----------------------------------------------------------------------------


def test_the_stand_in_serves_the_users_tools_with_the_users_parameters() -> None:
    served = build_context(parse_request({"toolset": crm(), "num_tasks": 1})).server_classes["tools"]
    server = served()
    state = server.new_state()

    def call(tool: str, **params: Any) -> Any:
        return json.loads(server.execute(ToolContext(workspace_id="w", state=state), tool, params))

    created = call("add_contact", full_name="Ada Lovelace", email="ada@example.com", stage="lead")["created"]
    assert created == {"id": "CON-1001", "full_name": "Ada Lovelace", "email": "ada@example.com", "stage": "lead"}
    assert call("find_contacts", query="ada")["count"] == 1 and call("find_contacts", query="bob")["count"] == 0
    call("update_contact", contact_id="CON-1001", stage="customer")
    assert state["contacts"]["CON-1001"]["stage"] == "customer"
    logged = call("log_call", contact_id="CON-1001", notes="Renewal", minutes=5)["created"]
    assert logged["contact_id"] == "CON-1001" and "calls" in state
    with pytest.raises(ToolError, match="no contact with id 'CON-9'"):
        call("log_call", contact_id="CON-9", notes="x")
    with pytest.raises(ToolError, match="'stage'"):  # the user's schema validates: stage is an enum
        call("add_contact", full_name="B", email="b@example.com", stage="friend")
    with pytest.raises(ToolError, match="'description'"):  # a built-in's parameter is not the user's
        call("add_contact", full_name="B", email="b@example.com", stage="lead", description="x")


def test_the_stand_in_of_a_read_only_catalog_starts_with_data_to_ask_about() -> None:
    ctx = build_context(parse_request({"toolset": catalog(), "num_tasks": 1}))
    world = ctx.sandboxes["tools"].base_state
    assert len(world["products"]) >= 6 and len(world["categories"]) >= 6
    category_names = {c["name"] for c in world["categories"].values()}
    for product in world["products"].values():
        assert set(product) == {"id", "name", "category", "price"}
        assert product["category"] in category_names
    sandbox = ctx.sandboxes["tools"]
    first = next(iter(world["products"].values()))
    found = json.loads(sandbox.run(sandbox.fresh(), "search_products", {"query": first["name"], "max_price": 10_000}))
    assert first in found["products"]
    cheaper = json.loads(sandbox.run(sandbox.fresh(), "search_products", {"query": "", "max_price": first["price"]}))
    assert all(p["price"] <= first["price"] for p in cheaper["products"]) and first in cheaper["products"]


# -- generation -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(USER_TOOLSETS))
def test_every_generated_task_uses_the_users_tools_with_their_parameter_names(name: str) -> None:
    toolset = USER_TOOLSETS[name]()
    schemas = _schemas(toolset)
    results = _generate(toolset)
    summary = results.filter_summary
    assert summary is not None and summary["gated"] is True
    assert summary["verifiers"] == {"total": 4, "passed": 4, "failed": 0, "ungated": 0}
    assert len(results.tasks) == 4
    for file in results.tasks:
        task = json.loads(file.content)
        assert task["apps"] == ["tools"]
        for action in task["reference_actions"]:
            assert action["tool_name"] in schemas
            schema = schemas[action["tool_name"]]
            assert not list(Draft202012Validator(schema).iter_errors(action["parameters"])), action
            assert set(action["parameters"]) <= set(schema.get("properties", {})), action


def test_a_read_only_toolset_gets_questions_verified_on_the_final_answer() -> None:
    results = _generate(catalog(), num_tasks=6)
    assert len(results.tasks) == 6
    verifiers = {f.filename: f.content for f in results.verifiers}
    for file in results.tasks:
        task = json.loads(file.content)
        assert {a["tool_name"] for a in task["reference_actions"]} <= {"get_product", "search_products"}
        (entry,) = task["verifiers"]
        assert entry["module"].endswith("_answer")
        source = verifiers[entry["module"].rsplit(".", 1)[-1] + ".py"]
        assert "EXPECT_ANSWER" in source and "import eval_pipelines" not in source
        assert task["reference_answer"] and "?" in task["description"]


def test_the_answer_check_reads_numbers_text_and_the_last_assistant_message() -> None:
    assert states("It costs $24.50.", 24.5) and states("Price: 1,200", 1200.0) and not states("PRO-1024", 24)
    assert states("The category is  Weekly budget CHECK-IN.", "Weekly budget check-in")
    expected = [{"value": 7.0, "describe": "the price"}, {"value": "PRO-1003", "describe": "the id"}]
    assert check_answer({"final_observation": "PRO-1003 costs 7."}, expected)[0]
    assert not check_answer({"final_observation": "PRO-1003 costs 8."}, expected)[0]
    messages = [{"role": "assistant", "content": "PRO-1003, 7 euros"}, {"role": "tool", "content": "x"}]
    assert check_answer({"final_observation": None, "messages": messages}, expected)[0]
    assert check_answer({"final_observation": ""}, expected) == (False, "the run ended without a final answer")


# -- a generated task, replayed ---------------------------------------------------------------------


def _rollout(task: Task, seed: dict[str, Any] | None, served: type[SchemaToolServer], agent: BaseAgent) -> Any:
    config = ModelConfig.model_validate({"model": "none", "api_key": "unused", "base_url": "http://127.0.0.1:9/v1"})

    async def run(host: ToolServerHost) -> RolloutOutcome:
        clients, admin = ChatClientPool(), ToolServerAdmin(timeout_seconds=30.0)
        try:
            engine = RolloutEngine(clients, admin, agent_factory=lambda _spec, _c, _s: agent)
            spec = RolloutSpec(
                rollout_id="user-toolset",
                run_id="user-toolset",
                scenario_id="user-toolset",
                task=task,
                model_config=config,
                tool_server_urls={"tools": host.base_url("tools")},
                seed={"tools": [seed]} if seed is not None else {},
                timeout_seconds=60.0,
            )
            return await engine.execute(spec)
        finally:
            await admin.aclose()
            await clients.aclose()

    with ToolServerHost(["tools"], extra={"tools": served}) as host:
        return asyncio.run(run(host)).artifacts


VerifierFn = Callable[[Any], tuple[bool, str]]


def _verifier(source: str) -> VerifierFn:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<generated verifier>", "exec"), namespace)
    verify: VerifierFn = namespace["verify"]
    return verify


@pytest.mark.parametrize(("name", "checker"), [("ticketing", check_state), ("catalog", check_answer)])
def test_a_generated_tasks_reference_actions_pass_its_verifier_and_doing_nothing_fails(
    name: str, checker: Callable[..., Any]
) -> None:
    toolset = USER_TOOLSETS[name]()
    results = _generate(toolset, num_tasks=3)
    ctx = build_context(parse_request({"toolset": toolset, "num_tasks": 3}))
    served = ctx.server_classes["tools"]
    assert issubclass(served, SchemaToolServer)
    verifiers = {f.filename: f.content for f in results.verifiers}
    medium = next(json.loads(f.content) for f in results.tasks if json.loads(f.content)["difficulty"] == "medium")
    task = Task.model_validate(
        {
            "task_id": medium["task_id"],
            "name": medium["name"],
            "description": medium["description"],
            "tool_servers": [TaskToolServer(name="tools").model_dump()],
            "reference_actions": medium["reference_actions"],
            "reference_answer": medium["reference_answer"],
        }
    )
    seed = next(iter(medium["seed_files"].values()), None)
    source = verifiers[medium["verifiers"][0]["module"].rsplit(".", 1)[-1] + ".py"]
    assert f"def {checker.__name__}(" in source
    verify = _verifier(source)

    replayed = _rollout(task, seed, served, ReplayAgent(task.reference_actions, task.reference_answer))
    assert [r.is_error for r in replayed.tool_results] == [False] * len(task.reference_actions)
    assert [c.tool_name for c in replayed.tool_calls] == [a.tool_name for a in task.reference_actions]
    success, message = verify(replayed)
    assert success, message
    nothing = _rollout(task, seed, served, NoopAgent())
    failed, why = verify(nothing)
    assert not failed and why
    if name == "ticketing":
        # the state the verifier read is the stand-in's, holding the user's fields (no built-in `description`)
        final = replayed.metadata["state"]["tools"]["final"]["tickets"]
        assert final and all("subject" in t and "description" not in t for t in final.values())


def test_service_entries_of_a_simlab_config_are_stood_in_for_by_the_builtin_server_their_name_says() -> None:
    services = [
        {"name": "Helpdesk", "description": "Tickets", "operations": ["search", "create", "update"]},
        {"name": "Email", "description": "Send and read emails", "operations": ["send", "read"]},
        {"name": "Browser", "description": "Browse the web", "operations": ["navigate"]},
    ]
    toolset = normalise_toolset(services)
    assert toolset.builtin_servers == ["records", "email"]
    assert {t.name for t in toolset.servers["records"].tools} == {t.name for t in RecordsServer().tools()}
    assert any(n.startswith("Browser:") and "left out" in n for n in toolset.notes)
    with pytest.raises(TaskGenRequestError, match="no tool to generate tasks with: Browser"):
        normalise_toolset(services[2:])
    # a tool without a schema is still a tool, not a service
    assert normalise_toolset([{"name": "list_categories", "description": "x"}]).servers["tools"].tools


def test_a_read_only_toolset_gets_questions_even_with_a_model_endpoint(taskgen_llm: Callable[..., str]) -> None:
    generator = DefaultTaskGenerator(LLMEndpoint(base_url=taskgen_llm(), default_model=SIM_TASKGEN))
    request = parse_request({"toolset": catalog(), "num_tasks": 2, "model": SIM_TASKGEN})
    results = asyncio.run(generator.generate(request, lambda _text: None))
    assert results.filter_summary is not None and results.filter_summary["model_ignored"] == READ_ONLY_NOTE
    assert len(results.tasks) == 2
    assert all(json.loads(f.content)["verifiers"][0]["module"].endswith("_answer") for f in results.tasks)


def test_an_item_is_looked_up_by_its_title_only_when_no_other_item_shares_it() -> None:
    invoices = {
        "INV-1": {"id": "INV-1", "customer_name": "Mei Meyer"},
        "INV-2": {"id": "INV-2", "customer_name": " mei  meyer"},
        "INV-3": {"id": "INV-3", "customer_name": "Diego Martin"},
    }
    assert unique_title(invoices, "INV-1") is None and unique_title(invoices, "INV-2") is None
    assert unique_title(invoices, "INV-3") == "Diego Martin"
    results = _generate(billing_openai(), num_tasks=8)
    for file in results.tasks:
        task = json.loads(file.content)
        world = next(iter(task["seed_files"].values()))["invoices"]
        for action in task["reference_actions"]:
            if action["tool_name"] == "list_invoices" and "titled" in task["description"]:
                names = [i["customer_name"].casefold() for i in world]
                titles = re.findall(r'titled "([^"]+)"', task["description"])
                assert all(names.count(t.casefold()) <= 1 for t in titles), task["description"]


def test_ids_take_the_shape_the_id_parameters_ask_for() -> None:
    uuid = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
    shapes = {"PRO-1001": {"type": "string"}, "1001": {"type": "string", "pattern": "^[0-9]+$"}}
    shapes["00000000-0000-4000-8000-000000001001"] = {"type": "string", "pattern": uuid}
    for expected, schema in shapes.items():
        toolset = catalog()
        toolset[0]["inputSchema"]["properties"]["product_id"] = schema
        served = build_context(parse_request({"toolset": toolset, "num_tasks": 1})).server_classes["tools"]
        assert issubclass(served, SchemaToolServer)
        assert served.layout.collections["products"].new_id({}) == expected
    toolset = catalog()
    toolset[0]["inputSchema"]["properties"]["product_id"] = {"type": "integer"}
    ctx = build_context(parse_request({"toolset": toolset, "num_tasks": 1}))
    assert sorted(ctx.sandboxes["tools"].base_state["products"])[0] == "1001"
    results = _generate(toolset, num_tasks=3)
    gets = [
        a for f in results.tasks for a in json.loads(f.content)["reference_actions"] if a["tool_name"] == "get_product"
    ]
    assert gets and all(isinstance(a["parameters"]["product_id"], int) for a in gets)


def _tool(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object", "properties": properties, "required": required}}


def test_what_each_tool_does_is_read_from_its_name_and_parameters() -> None:
    text, ticket, invoice = {"type": "string"}, {"ticket_id": {"type": "string"}}, {"invoice_id": {"type": "string"}}
    tools = [
        _tool("get_ticket_status", ticket, ["ticket_id"]),
        _tool("set_ticket_priority", {**ticket, "priority": text}, ["ticket_id", "priority"]),
        _tool("list_ticket_comments", ticket, ["ticket_id"]),
        _tool("add_ticket_note", {**ticket, "note": text}, ["ticket_id", "note"]),
        _tool("close_ticket", ticket, ["ticket_id"]),
        _tool("mark_invoice_paid", invoice, ["invoice_id"]),
        _tool("delete_invoice", invoice, ["invoice_id"]),
        _tool("update_profile", {"display_name": text}, []),
        _tool("create_invoice", {"customer": text}, ["customer"]),
    ]
    layout = build_context(parse_request({"toolset": tools, "num_tasks": 1})).server_classes["tools"].layout
    got = {name: (b.action, b.collection, b.target, b.status) for name, b in layout.behaviours.items()}
    assert got == {
        "get_ticket_status": ("get", "tickets", "ticket_id", None),
        "set_ticket_priority": ("change", "tickets", "ticket_id", None),
        "list_ticket_comments": ("list", "comments", None, None),
        "add_ticket_note": ("add", "notes", None, None),
        "close_ticket": ("change", "tickets", "ticket_id", "closed"),
        "mark_invoice_paid": ("change", "invoices", "invoice_id", "paid"),
        "delete_invoice": ("remove", "invoices", "invoice_id", None),
        "update_profile": ("put", "profiles", None, None),
        "create_invoice": ("add", "invoices", None, None),
    }


def test_a_tool_schema_that_is_not_json_schema_is_refused_naming_the_tool_and_the_field() -> None:
    toolset = crm()
    toolset[2]["inputSchema"]["properties"]["stage"]["type"] = "strnig"
    with pytest.raises(TaskGenRequestError) as caught:
        check_toolset(toolset)
    assert caught.value.field == "toolset[2].inputSchema.properties.stage.type"
    assert "'update_contact'" in caught.value.message
