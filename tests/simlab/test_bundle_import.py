"""A SimLab task bundle (`examples/simlab-bundle/`, written for this project in the format SimLab documents:
tasks/*.json with `meta`, `task`, `tool_servers`, inline `seed_emails`, `npcs`, `verifiers: [{func, module}]`;
verifiers/*.py without an `__init__.py`; npcs/profiles.json), imported as a scenario and run end to end with
the simulated models.

Its verifier is written the way SimLab's are: it reads tool messages as objects naming `tool_server` (by
SimLab's name, `email-env`) and `tool_name`, and queries the live server through `run_artifacts.server_url`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.simlab_bundle import BundleImportError, import_bundle
from eval_pipelines.pipeline.restored_servers import RestoredServers
from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, VerifyJob
from tests.support.task_runs import run_one_task

SCENARIO_ID = "ops_bundle:1.0.0"
AISHA = "aisha.okafor@example.com"

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "simlab-bundle"


def write_bundle(root: Path) -> Path:
    """A copy of the example bundle (its files are SimLab's documented format, written for this project)."""
    return Path(shutil.copytree(EXAMPLE, root / "ops-bundle"))


def test_import_maps_the_bundle_and_reports_what_has_no_place(tmp_path: Path) -> None:
    report = import_bundle(write_bundle(tmp_path), tmp_path / "scenarios", SCENARIO_ID)
    assert report.tasks == ["ask_projector"] and report.unrunnable == {}
    notes = report.notes.get("ask_projector", [])
    assert any(n.startswith("seed_emails[0].body_html") for n in notes) is False  # null html is nothing to drop
    scenario = ScenarioCatalog(tmp_path / "scenarios").get("ops_bundle")
    task = scenario.task("ask_projector")
    assert (task.name, task.difficulty, task.category) == ("Ask Aisha about the projector", "easy", "communication")
    assert [s.name for s in task.tool_servers] == ["email"] and task.simlab_servers == {"email": "email-env"}
    assert task.verifiers == ["projector_mail"] and [p.email for p in task.npc_profiles] == [AISHA]
    assert task.rubric is not None and task.rubric.title == "Projector question"
    [mailbox] = scenario.seed_payload(task, "email")
    assert mailbox["account"] == "agent@example.com"
    assert [(e["from"], e["subject"]) for e in mailbox["emails"]] == [(AISHA, "Ops sync on Thursday")]
    assert (scenario.verifiers_dir / "__init__.py").is_file()
    assert task.unrunnable_reason is None
    assert task.simlab_origin["tool_servers"] == [{"name": "email-env", "tool_server_url": "http://email-env:8040"}]
    assert task.simlab_origin["apps"] == ["Email"] and task.simlab_origin["meta"]["idempotent"] is True


def test_a_server_nobody_plays_makes_the_task_unrunnable_with_the_reason(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path)
    path = bundle / "tasks" / "ask_projector.json"
    task = json.loads(path.read_text())
    task["tool_servers"].append({"name": "sec-edgar", "tool_server_url": "http://sec-edgar:8090"})
    path.write_text(json.dumps(task))
    report = import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID)
    reason = report.unrunnable["ask_projector"]
    assert reason.startswith("tool_servers[1] 'sec-edgar': no built-in server plays it"), reason
    assert "  ask_projector: UNRUNNABLE: tool_servers[1] 'sec-edgar'" in "\n".join(report.lines())
    imported = ScenarioCatalog(tmp_path / "scenarios").get(SCENARIO_ID).task("ask_projector")
    assert imported.unrunnable_reason == reason


def test_a_bundle_without_a_task_id_is_refused_naming_the_file_and_field(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path)
    path = bundle / "tasks" / "ask_projector.json"
    task = json.loads(path.read_text())
    del task["meta"]["task_id"]
    path.write_text(json.dumps(task))
    with pytest.raises(BundleImportError, match=r"ask_projector\.json: meta\.task_id: required"):
        import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID)
    assert not (tmp_path / "scenarios" / "ops_bundle_1.0.0").exists()  # nothing half-written


@pytest.mark.slow
def test_the_imported_simlab_verifier_passes_the_reference_and_fails_an_idle_run(
    tmp_path: Path, local_backend: Callable[..., EvaluationBackend]
) -> None:
    import_bundle(write_bundle(tmp_path), tmp_path / "scenarios", SCENARIO_ID)
    backend = local_backend(tmp_path / "data", ScenarioCatalog(tmp_path / "scenarios"))
    oracle = run_one_task(backend, SCENARIO_ID, "ask_projector", run_label="bundle")
    run_id = oracle.run_id
    assert oracle.result is not None
    [verdict] = oracle.result.verifiers
    assert verdict.success, verdict.message
    assert verdict.message == "Aisha was asked about the projector"
    idle = run_one_task(backend, SCENARIO_ID, "ask_projector", model="sim-noop", run_label="bundle")
    assert idle.result is not None
    [verdict] = idle.result.verifiers
    assert not verdict.success and not verdict.is_error and verdict.message == "no send_email call on email-env"

    # Re-verification (a verifier changed) runs long after the workspaces are gone: the final state is restored
    # into a fresh workspace for the verifier to query, and without that the live query has nothing to ask.
    artifacts = backend.artifacts_file(run_id, oracle.rollout_id)
    assert artifacts is not None
    job = VerifyJob(artifacts, ("projector_mail",))
    verifiers_dir = ScenarioCatalog(tmp_path / "scenarios").get(SCENARIO_ID).verifiers_dir
    with RestoredServers() as restored, IsolatedVerifierRunner(verifiers_dir) as runner:
        [[again]] = runner.run([restored.prepare(job)])
        [[stale]] = runner.run([job])
    assert again.success and again.message == "Aisha was asked about the projector"
    assert stale.is_error and not stale.success


def test_calendar_and_channel_seeds_become_seed_files_the_servers_load(tmp_path: Path) -> None:
    from eval_pipelines.toolservers.calendar import CalendarServer
    from eval_pipelines.toolservers.chat import ChatServer

    bundle = write_bundle(tmp_path)
    path = bundle / "tasks" / "ask_projector.json"
    task = json.loads(path.read_text())
    task["seed_calendar_events"] = [
        {
            "account": "agent@example.com",
            "calendar_id": "default",
            "summary": "Ops sync",
            "description": "Room 4B",
            "start": "2025-03-13T10:00:00Z",
            "end": "2025-03-13T10:30:00Z",
        },
        {"summary": "no times"},
    ]
    task["seed_group_channels"] = [
        {
            "channel_name": "#Facilities",
            "member_profile_ids": ["aisha_okafor"],
            "messages": [{"from_profile_id": "aisha_okafor", "text": "The projector bulb was replaced."}],
        }
    ]
    path.write_text(json.dumps(task))
    report = import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID)
    assert "seed_calendar_events[1]: needs summary, start and end; left out" in report.notes["ask_projector"]
    scenario = ScenarioCatalog(tmp_path / "scenarios").get(SCENARIO_ID)
    imported = scenario.task("ask_projector")
    assert {s.name for s in imported.tool_servers} == {"email", "calendar", "chat"}

    calendar = CalendarServer()
    state = calendar.new_state()
    calendar.seed(state, scenario.seed_payload(imported, "calendar"))
    [event] = state["events"].values()
    assert (event["title"], event["start"]) == ("Ops sync", "2025-03-13T10:00:00Z")

    chat = ChatServer()
    state = chat.new_state()
    chat.seed(state, scenario.seed_payload(imported, "chat"))
    texts = [m["text"] for m in state["messages"].values()]
    assert texts == ["The projector bulb was replaced."]


@pytest.mark.parametrize("task_id", ["../../escaped", "a/b", ".hidden", "x" * 200])
def test_a_task_id_that_is_not_a_plain_name_is_refused_and_nothing_is_written(tmp_path: Path, task_id: str) -> None:
    """The id names the task's files: a hostile one must not reach outside the scenario folder."""
    bundle = write_bundle(tmp_path)
    path = bundle / "tasks" / "ask_projector.json"
    task = json.loads(path.read_text())
    task["meta"]["task_id"] = task_id
    path.write_text(json.dumps(task))
    before = sorted(p for p in tmp_path.rglob("*") if "ops-bundle" not in p.parts)
    with pytest.raises(BundleImportError, match=r"ask_projector\.json: meta\.task_id: .* must be letters"):
        import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID)
    after = sorted(p for p in tmp_path.rglob("*") if "ops-bundle" not in p.parts)
    assert [p for p in after if p not in before and p != tmp_path / "scenarios"] == []


def test_a_linked_verifier_is_not_copied(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path)
    outside = tmp_path / "secret.py"
    outside.write_text("TOKEN = 'not for the scenario'\n")
    (bundle / "verifiers" / "linked.py").symlink_to(outside)
    import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID)
    verifiers = ScenarioCatalog(tmp_path / "scenarios").get(SCENARIO_ID).verifiers_dir
    assert not (verifiers / "linked.py").exists() and (verifiers / "projector_mail.py").is_file()


def test_an_npc_without_a_profile_makes_the_task_unrunnable_with_the_reason(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path)
    path = bundle / "tasks" / "ask_projector.json"
    task = json.loads(path.read_text())
    task["npcs"].append({"id": "nobody_here"})
    path.write_text(json.dumps(task))
    report = import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID)
    assert report.unrunnable == {
        "ask_projector": "npcs[1].id 'nobody_here': no profile of that id in npcs/profiles.json"
    }
