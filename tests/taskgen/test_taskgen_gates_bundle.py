"""Quality gates on real tool-server replays (a verifier must pass the reference replay and fail a no-op run),
the scenario folder write_bundle makes, and reading a toolset from a running server's /tools."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.tools import ToolCall
from eval_pipelines.taskgen import BundleError, QualityGates, parse_request, toolset_from_server, write_bundle
from eval_pipelines.taskgen.assembly import gate_and_assemble
from eval_pipelines.taskgen.context import build_context
from eval_pipelines.taskgen.drafts import default_rubric, render_state_verifier
from eval_pipelines.taskgen.errors import TaskGenRequestError
from eval_pipelines.taskgen.planner import Planner
from eval_pipelines.taskgen.progress import Progress
from eval_pipelines.taskgen.schema_generator import plan_drafts
from eval_pipelines.taskgen.toolset import normalise_toolset
from eval_pipelines.toolservers.host import ToolServerHost
from eval_pipelines.verifiers.loader import load_verifier_package, package_version
from tests.taskgen.conftest import calendar_toolset

ALWAYS_TRUE = "def verify(run_artifacts):\n    return True\n"
NEVER_TRUE = "def verify(run_artifacts):\n    return False, 'the expected event is missing'\n"
SYNTAX_ERROR = "def verify(run_artifacts:\n    return True\n"
USES_PIPELINE = "from eval_pipelines.taskgen.state_check import check_state\n\ndef verify(a):\n    return True\n"
MISSING_MODULE = "import no_such_module_for_gates\n\ndef verify(run_artifacts):\n    return True\n"
HANGS = "def verify(run_artifacts):\n    while True:\n        pass\n"


def test_gates_keep_sound_verifiers_and_fail_the_rest(tmp_path: Path) -> None:
    ctx = build_context(parse_request({"toolset": calendar_toolset(), "num_tasks": 3, "complexity": {"easy": 1}}))
    drafts, _ = plan_drafts(ctx, Planner(ctx))
    sound, bad_only, wrong_action = drafts
    for draft in drafts:
        draft.rubric = default_rubric(draft)
        draft.verifiers = {draft.verifier_module: render_state_verifier(draft)}
    sound.verifiers["sound_always_true"] = ALWAYS_TRUE
    sound.verifiers["sound_never_true"] = NEVER_TRUE
    bad_only.verifiers = {
        "bad_syntax": SYNTAX_ERROR,
        "bad_pipeline_import": USES_PIPELINE,
        "bad_missing_module": MISSING_MODULE,
    }
    wrong_action.actions = [ToolCall(tool_server="calendar", tool_name="delete_event", parameters={"event_id": "x"})]

    progress: list[str] = []
    gates = QualityGates()
    results = asyncio.run(
        gate_and_assemble(
            ctx, drafts, gates=gates, progress=Progress(progress.append), skills_md="# Skills", summary={}
        )
    )
    summary = results.filter_summary
    assert summary is not None
    gate_of = {f["filename"].removesuffix(".FAILED.py"): f["gate"] for f in summary["failed_verifiers"]}
    assert gate_of == {
        "sound_always_true": "noop",
        "sound_never_true": "reference",
        "bad_syntax": "static",
        "bad_pipeline_import": "static",
        "bad_missing_module": "import",
        wrong_action.verifier_module: "reference",
    }
    reasons = {f["filename"]: f["reason"] for f in summary["failed_verifiers"]}
    assert "standalone" in reasons["bad_pipeline_import.FAILED.py"]
    assert "event 'x' not found" in reasons[f"{wrong_action.verifier_module}.FAILED.py"]
    dropped = {d["task_id"]: d["reason"] for d in summary["dropped_tasks"]}
    assert set(dropped) == {bad_only.task_id, wrong_action.task_id}
    assert "reference action 1 (delete_event) failed" in dropped[wrong_action.task_id]
    assert summary["verifiers"] == {"total": 7, "passed": 1, "failed": 6, "ungated": 0}
    assert progress[-1] == "Step 6/6: running quality gates (3/3)"

    folder = write_bundle(results, tmp_path / "scenarios", "gated:0.1", name="Gated")
    scenario = ScenarioCatalog(folder.parent).get("gated:0.1")
    tasks = scenario.tasks()
    assert set(tasks) == {sound.task_id}
    assert tasks[sound.task_id].verifiers == [sound.verifier_module]
    on_disk = sorted(p.name for p in (folder / "verifiers").glob("*.py"))
    assert "sound_always_true.FAILED.py" in on_disk and "bad_syntax.FAILED.py" in on_disk
    assert json.loads((folder / "template.json").read_text())["tool_servers"] == [
        {"name": "calendar", "server_type": "http"}
    ]
    assert (folder / "seed_data" / "calendar_world.json").is_file()
    assert "seed_files" not in json.loads((folder / "tasks" / f"{sound.task_id}.json").read_text())
    # FAILED files never load and never change the package version.
    package = load_verifier_package(folder / "verifiers")
    assert package.get(sound.verifier_module).verify is not None
    before = package_version(folder / "verifiers")
    (folder / "verifiers" / "another.FAILED.py").write_text("raise SystemExit\n")
    assert package_version(folder / "verifiers") == before


def test_write_bundle_refuses_bad_targets(tmp_path: Path) -> None:
    from eval_pipelines.schemas.taskgen import GeneratedFile, TaskGenResults

    task = {"task_id": "t1", "name": "t", "description": "d", "tool_servers": []}
    results = TaskGenResults(job_id="", tasks=[GeneratedFile(filename="t1.json", content=json.dumps(task))])
    with pytest.raises(BundleError, match="scenario_id"):
        write_bundle(results, tmp_path, "bad id!")
    escaping = results.model_copy(update={"verifiers": [GeneratedFile(filename="../evil.py", content="")]})
    with pytest.raises(BundleError, match="verifier"):
        write_bundle(escaping, tmp_path, "ok")
    assert not (tmp_path / "ok").exists()
    write_bundle(results, tmp_path, "ok")
    with pytest.raises(BundleError, match="already exists"):
        write_bundle(results, tmp_path, "ok")
    write_bundle(results, tmp_path, "ok", overwrite=True)
    with pytest.raises(BundleError, match="no tasks"):
        write_bundle(results.model_copy(update={"tasks": []}), tmp_path, "empty")


def test_toolset_from_a_running_server(calendar_url: str) -> None:
    root = toolset_from_server(calendar_url)
    assert all("tool_server" not in t for t in root)
    assert normalise_toolset(root).builtin_servers == ["calendar"]
    named = toolset_from_server(calendar_url, server_name="my_calendar")
    assert {t["tool_server"] for t in named} == {"my_calendar"}
    assert normalise_toolset(named).external_servers == ["my_calendar"]
    with ToolServerHost(["calendar", "email"]) as host:
        mounted = toolset_from_server(host.base_url("email"))
    assert {t["tool_server"] for t in mounted} == {"email"}
    assert {t["name"] for t in mounted} >= {"send_email", "search_emails"}


def test_listings_with_any_schema_key_are_accepted() -> None:
    app = FastAPI()
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    listing: list[dict[str, Any]] = [
        {"name": "create_note", "input_schema": schema},
        {"name": "update_note", "parameters": schema},
        {"name": "delete_note", "inputSchema": schema, "mutates_state": True},
    ]

    @app.get("/tools")
    async def tools() -> list[dict[str, Any]]:
        return listing

    with BackgroundServer(app) as server:
        fetched = toolset_from_server(server.url)
    assert [t["inputSchema"] for t in fetched] == [schema, schema, schema]
    toolset = normalise_toolset(listing)
    assert [t.schema for t in toolset.tools] == [schema, schema, schema]
    with pytest.raises(TaskGenRequestError, match="listed twice"):
        normalise_toolset([*listing, listing[0]])


@pytest.mark.slow
def test_a_hanging_verifier_fails_its_gate_and_the_others_still_run() -> None:
    ctx = build_context(parse_request({"toolset": calendar_toolset(), "num_tasks": 2, "complexity": {"easy": 1}}))
    drafts, _ = plan_drafts(ctx, Planner(ctx))
    for draft in drafts:
        draft.verifiers = {draft.verifier_module: render_state_verifier(draft)}
    drafts[0].verifiers = {"hanging_forever": HANGS, **drafts[0].verifiers}
    # The timeout also covers the worker start-up and imports; 6 s keeps a loaded 2-core CI box from failing the
    # healthy verifiers, while the hanging one (an endless loop) still fails.
    report = asyncio.run(QualityGates(verifier_timeout_seconds=6.0).run(drafts, ctx.seeds(), ["calendar"]))
    assert report.results["hanging_forever"].gate == "reference"
    assert all(report.results[d.verifier_module].passed for d in drafts)


def test_filter_false_keeps_a_task_no_verifier_passed_and_says_so() -> None:
    """`filter: false` (SimLab's `[generation] filter`) keeps what the gates would drop, named as unfiltered."""
    request = {"toolset": calendar_toolset(), "num_tasks": 2, "complexity": {"easy": 1}, "filter": False}
    ctx = build_context(parse_request(request))
    drafts, _ = plan_drafts(ctx, Planner(ctx))
    sound, unsound = drafts
    for draft in drafts:
        draft.rubric = default_rubric(draft)
        draft.verifiers = {draft.verifier_module: render_state_verifier(draft)}
    unsound.verifiers = {"unsound_never_true": NEVER_TRUE}
    results = asyncio.run(
        gate_and_assemble(
            ctx, drafts, gates=QualityGates(), progress=Progress(lambda _: None), skills_md="", summary={}
        )
    )
    summary = results.filter_summary
    assert summary is not None and summary["unfiltered_tasks"] == [unsound.task_id]
    tasks = {json.loads(f.content)["meta"]["task_id"]: json.loads(f.content) for f in results.tasks}
    assert set(tasks) == {sound.task_id, unsound.task_id}
    assert [v["module"].rsplit(".", 1)[-1] for v in tasks[unsound.task_id]["verifiers"]] == ["unsound_never_true"]
    assert "unsound_never_true.py" in {f.filename for f in results.verifiers}


def test_task_files_carry_the_keys_simlab_reads_and_still_load_here(tmp_path: Path) -> None:
    request = {"toolset": calendar_toolset(), "num_tasks": 1, "complexity": {"easy": 1}}
    ctx = build_context(parse_request(request))
    drafts, _ = plan_drafts(ctx, Planner(ctx))
    for draft in drafts:
        draft.rubric = default_rubric(draft)
        draft.verifiers = {draft.verifier_module: render_state_verifier(draft)}
    results = asyncio.run(
        gate_and_assemble(
            ctx, drafts, gates=QualityGates(), progress=Progress(lambda _: None), skills_md="", summary={}
        )
    )
    body = json.loads(results.tasks[0].content)
    draft = drafts[0]
    assert body["meta"] == {
        "task_id": draft.task_id,
        "display_name": draft.name,
        "difficulty": draft.difficulty,
        "category": draft.category,
    }
    assert body["task"] == draft.instruction and body["apps"] == ["calendar"]
    assert body["verifiers"] == [
        {"func": "python_module", "module": f"collinear.scenarios.{ctx.task_prefix}.verifiers.{draft.verifier_module}"}
    ]
    folder = write_bundle(results, tmp_path / "scenarios", "hosted_keys:0.1")
    task = ScenarioCatalog(folder.parent).get("hosted_keys:0.1").tasks()[draft.task_id]
    assert task.verifiers == [draft.verifier_module]
