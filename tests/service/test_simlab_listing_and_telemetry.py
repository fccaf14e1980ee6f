"""What the hosted product serves beyond spec 000 and SimLab reads, over real HTTP: scenario guidance and
visibility, hidden and test tasks, `filter_summary` in the hosted keys, and the CLI's telemetry (feedback kept
for the operator, redacted and bounded; every other event dropped)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.schemas.service_wire import MAX_CLI_EVENT_BYTES, MAX_CLI_EVENT_PROPERTIES, FeedbackRecord
from eval_pipelines.schemas.taskgen import with_simlab_filter_keys
from eval_pipelines.service.layout import feedback_log_path
from eval_pipelines.service.routes import telemetry
from tests.service.eval_service_support import READ_KEY, WRITE_KEY, RunningService, running_service

GUIDANCE = "# Guidance\n\nAlways sign emails as the operations desk."


def _edit_json(path: Path, **fields: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in scenarios, with email_ops guided by a guidance.md and holding a test and a hidden task,
    office_ops guided by its template, and team_chat hidden."""
    root = tmp_path_factory.mktemp("scenarios")
    shutil.copytree(builtin_scenarios_dir(), root, dirs_exist_ok=True)
    (root / "email_ops" / "guidance.md").write_text(f"\n{GUIDANCE}\n")
    _edit_json(root / "email_ops" / "tasks" / "email_ops_001.json", category="Test")
    _edit_json(root / "email_ops" / "tasks" / "email_ops_002.json", visibility="hidden")
    _edit_json(root / "office_ops" / "template.json", scenario_guidance_md="Office rules.")
    _edit_json(root / "team_chat" / "template.json", visibility="hidden")
    return root


@pytest.fixture(scope="module")
def service(scenarios: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with running_service(tmp_path_factory.mktemp("data"), scenarios_dir=scenarios) as running:
        yield running


def _get(service: RunningService, path: str, key: str = WRITE_KEY) -> Any:
    response = httpx.get(service.url + path, headers={"API-Key": key}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_templates_carry_guidance_and_hidden_ones_are_listed_on_request(service: RunningService) -> None:
    listed = {t["scenario_id"]: t for t in _get(service, "/v1/scenarios")}
    assert set(listed) == {"email_ops:1.0.0", "office_ops:1.0.0"}
    assert listed["email_ops:1.0.0"]["scenario_guidance_md"] == GUIDANCE
    assert listed["office_ops:1.0.0"]["scenario_guidance_md"] == "Office rules."
    assert listed["email_ops:1.0.0"]["visibility"] == "public"
    everything = {t["scenario_id"]: t for t in _get(service, "/v1/scenarios?include_hidden=true")}
    assert everything["team_chat:1.0.0"]["visibility"] == "hidden"
    assert everything["team_chat:1.0.0"]["scenario_guidance_md"] is None
    # hidden from the listing, not from a caller who names it
    assert _get(service, "/v1/scenarios/team_chat/tasks")["tasks"]


def test_guidance_file_linking_out_of_the_folder_is_not_served(scenarios: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("not for listing")
    folder = tmp_path / "scenarios"
    shutil.copytree(scenarios / "email_ops", folder / "email_ops")
    (folder / "email_ops" / "guidance.md").unlink()
    (folder / "email_ops" / "guidance.md").symlink_to(secret)
    with running_service(tmp_path / "data", scenarios_dir=folder) as running:
        (template,) = _get(running, "/scenarios")
    assert template["scenario_guidance_md"] is None


def test_test_tasks_need_include_test_false_to_be_hidden_and_hidden_tasks_include_hidden(
    service: RunningService,
) -> None:
    def ids(query: str) -> set[str]:
        return {t["task_id"] for t in _get(service, f"/v1/scenarios/email_ops/tasks{query}")["tasks"]}

    everything = ids("?include_hidden=true&include_test=true")
    assert {"email_ops_001", "email_ops_002"} <= everything and len(everything) == 12
    # what SimLab's `tasks list` sends without --include-test
    assert ids("?include_hidden=true&include_test=false") == everything - {"email_ops_001"}
    # no flags (spec 000's own clients): test tasks stay, hidden ones do not
    assert ids("") == everything - {"email_ops_002"}
    assert ids("?include_test=false") == everything - {"email_ops_001", "email_ops_002"}


def test_filter_summary_in_the_hosted_keys_names_each_dropped_task_at_its_furthest_gate() -> None:
    ours = {
        "produced": {"num_tasks": 5},
        "failed_verifiers": [
            {"task_id": "t1", "filename": "t1_a.FAILED.py", "gate": "static", "reason": "does not compile"},
            {"task_id": "t1", "filename": "t1_b.FAILED.py", "gate": "noop", "reason": "passes a run that changed"},
            {"task_id": "t2", "filename": "t2_a.FAILED.py", "gate": "reference", "reason": "fails the replay"},
            {"task_id": "t9", "filename": "t9_a.FAILED.py", "gate": "import", "reason": "kept unfiltered"},
        ],
        "dropped_tasks": [
            {"task_id": "t1", "reason": "no verifier passed its quality gates"},
            {"task_id": "t2", "reason": "no verifier passed its quality gates (replay)"},
            {"task_id": "t3", "reason": "no usable instruction"},
        ],
        "unfiltered_tasks": ["t9"],
    }
    summary = with_simlab_filter_keys(ours)
    assert summary is not None
    assert summary["dropped_tasks"] == ours["dropped_tasks"]  # ours stay beside them
    assert summary["total"] == 8
    by_name = {entry["display_name"]: entry for entry in summary["filtered_tasks"]}
    assert set(by_name) == {"t1", "t2", "t3"}
    assert by_name["t1"]["checks"] == {
        "usable_draft": 1,
        "verifier_compiles": 1,
        "verifier_imports": 1,
        "reference_run_passes": 1,
        "idle_run_fails": 0,
    }
    assert by_name["t2"]["checks"]["reference_run_passes"] == 0 and by_name["t3"]["checks"] == {"usable_draft": 0}
    assert by_name["t3"]["issues"] == ["no usable instruction"]
    stats = summary["stage_stats"]
    assert [stats[f"check{i}"]["filtered"] for i in range(1, 6)] == [1, 0, 0, 1, 1]
    assert [stats[f"check{i}"]["passed"] for i in range(1, 6)] == [7, 7, 7, 6, 5]
    assert stats["check5"]["passed"] == ours["produced"]["num_tasks"]
    assert with_simlab_filter_keys(None) is None


# -- telemetry ---------------------------------------------------------------------------------------------


def _post(service: RunningService, body: Any, key: str | None = WRITE_KEY) -> httpx.Response:
    headers = {"API-Key": key} if key else {}
    if not isinstance(body, dict):  # raw bytes, or an iterator of chunks (sent without a Content-Length)
        return httpx.post(service.url + "/telemetry/cli-events", content=body, headers=headers, timeout=30)
    return httpx.post(service.url + "/telemetry/cli-events", json=body, headers=headers, timeout=30)


def _feedback_lines(service: RunningService) -> list[dict[str, Any]]:
    path = feedback_log_path(service.service.settings.data_dir)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def test_feedback_is_kept_redacted_and_other_events_are_dropped(service: RunningService) -> None:
    before = len(_feedback_lines(service))
    started = _post(service, {"event": "cli_command_started", "properties": {"command": "feedback"}})
    assert started.status_code == 202 and started.json() == {"status": "accepted", "stored": False}
    message = (
        f"env init lost my guidance; my key is {READ_KEY}, token sk-abcdefghijklmnop1234 "
        "and see http://me:hunter2@example.com/x?token=abc"
    )
    properties = {
        "message": message,
        "env_name": "em",
        "install_id": "install-123",
        "session_id": "session-456",
        "simlab_version": "0.2.0",
    }
    stored = _post(service, {"event": "feedback_submitted", "properties": properties}, key=READ_KEY)
    assert stored.status_code == 202 and stored.json()["stored"] is True
    lines = _feedback_lines(service)
    assert len(lines) == before + 1
    record = lines[-1]
    assert record["message"].startswith("env init lost my guidance")
    assert record["context"] == {"env_name": "em", "simlab_version": "0.2.0"}
    text = json.dumps(record)
    for secret in (READ_KEY, "sk-abcdefghijklmnop1234", "hunter2", "token=abc", "install-123", "session-456"):
        assert secret not in text
    assert text.count("[REDACTED]") >= 3
    path = feedback_log_path(service.service.settings.data_dir)
    assert path.stat().st_mode & 0o077 == 0


def test_telemetry_refuses_unknown_keys_and_bodies_over_the_limits(service: RunningService) -> None:
    event = {"event": "feedback_submitted", "properties": {"message": "hi"}}
    assert _post(service, event, key=None).status_code == 401
    assert _post(service, event, key="not-a-key").status_code == 401
    before = len(_feedback_lines(service))
    big = json.dumps({"event": "feedback_submitted", "properties": {"message": "x" * MAX_CLI_EVENT_BYTES}})
    too_big = _post(service, big.encode())
    assert too_big.status_code == 413 and "at most" in too_big.json()["detail"]
    chunked = _post(service, iter([big.encode()[:1000], big.encode()[1000:]]))  # no Content-Length
    assert chunked.status_code == 413
    many = {f"p{i}": i for i in range(MAX_CLI_EVENT_PROPERTIES + 1)}
    assert _post(service, {"event": "x", "properties": many}).status_code == 422
    assert _post(service, {"event": "", "properties": {}}).status_code == 422
    assert _post(service, {"event": "feedback_submitted", "properties": {"message": "  "}}).status_code == 422
    assert _post(service, b"{not json").status_code == 422
    assert _post(service, b"[" * 50 + b"]" * 50).status_code == 422
    assert len(_feedback_lines(service)) == before


def test_feedback_log_is_rotated_at_its_size_limit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(telemetry, "MAX_FEEDBACK_LOG_BYTES", 600)
    path = tmp_path / "feedback.jsonl"
    for index in range(6):
        telemetry._append(path, FeedbackRecord(received_at="now", message=f"message {index} " + "y" * 150))
    assert path.stat().st_size <= 600
    rotated = path.with_name("feedback.jsonl.1")
    assert rotated.is_file() and rotated.stat().st_size <= 600
    assert json.loads(path.read_text().splitlines()[-1])["message"].startswith("message 5")
