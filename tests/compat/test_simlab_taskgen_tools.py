"""`simlab tasks-gen run --tools` (SimLab CLI 0.2.0, unmodified) with toolsets of a user's own, against
`eval-pipelines serve eval-service`: the user's schemas are the authority.

Each toolset is one a user brings (tests/support/user_toolsets.py): a ticketing toolset whose tools are named
like the built-in records server's with other schemas, a read-only catalog, OpenAI function items and a CRM.
The job succeeds and every task file of the bundle SimLab writes calls the user's tools with the user's
parameter names; a toolset no server can serve is refused, SimLab printing which tool and which field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.compat.conftest import EvalServiceUnderTest, describe
from tests.compat.test_simlab_cli import SimLab
from tests.support.user_toolsets import USER_TOOLSETS, catalog

pytestmark = pytest.mark.slow

NUM_TASKS = 3


@pytest.fixture
def simlab(eval_service: EvalServiceUnderTest, tmp_path: Path) -> SimLab:
    return SimLab(eval_service, tmp_path)


def _schemas(toolset: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    flat = [t.get("function", t) for t in toolset]
    return {t["name"]: t.get("inputSchema") or t.get("parameters") for t in flat}


@pytest.mark.parametrize("name", sorted(USER_TOOLSETS))
def test_tasks_gen_run_with_a_users_own_tools(simlab: SimLab, name: str) -> None:
    toolset = USER_TOOLSETS[name]()
    (simlab.cwd / "tools.json").write_text(json.dumps(toolset))
    out = simlab.ok(
        "tasks-gen", "run", "--tools", "tools.json", "--num-tasks", str(NUM_TASKS), "--model", "schema", "--out", "gen"
    )
    assert f"Done — {NUM_TASKS} tasks generated" in out, out
    bundle = simlab.cwd / "gen"
    schemas = _schemas(toolset)
    task_files = sorted((bundle / "tasks").glob("*.json"))
    assert len(task_files) == NUM_TASKS
    for path in task_files:
        task = json.loads(path.read_text())
        assert task["apps"] == ["tools"], path.name
        for action in task["reference_actions"]:
            schema = schemas[action["tool_name"]]  # only the user's tools
            assert set(action["parameters"]) <= set(schema["properties"]), action
            assert not list(Draft202012Validator(schema).iter_errors(action["parameters"])), action
        for entry in task["verifiers"]:
            assert (bundle / "verifiers" / f"{entry['module'].rsplit('.', 1)[-1]}.py").is_file(), entry
            if name == "catalog":
                assert entry["module"].endswith("_answer"), entry
    assert not list((bundle / "verifiers").glob("*.FAILED.py"))
    simlab.ok("tasks", "validate", "--tasks-dir", str(bundle))


def test_a_toolset_no_server_can_serve_is_refused_naming_the_tool_and_the_field(simlab: SimLab) -> None:
    toolset = catalog()
    toolset[0]["inputSchema"]["properties"]["product_id"]["pattern"] = "^[0-9a-f]{32}$"
    (simlab.cwd / "tools.json").write_text(json.dumps(toolset))
    refused = simlab.run("tasks-gen", "run", "--tools", "tools.json", "--num-tasks", "2", "--model", "schema")
    printed = refused.stdout + refused.stderr
    assert refused.returncode == 1 and "Traceback" not in printed, describe(refused)
    assert "HTTP 422" in printed and "get_product" in printed, describe(refused)
    assert re.search(r"toolset\[0\].*inputSchema.*properties.*product_id", printed), describe(refused)
