"""Templates, tasks, rubrics, NPCs, seed data and the verifier bundle over real HTTP."""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import shutil
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from eval_pipelines.clients.errors import BadRequest, NotFound
from eval_pipelines.clients.evaluation import EvaluationClient
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.artifacts import RunArtifacts
from tests.service.eval_service_support import SCENARIO, WRITE_KEY, RunningService, running_service

HIDDEN_TASK_FIELDS = {"reference_actions", "reference_answer", "npc_secrets", "verifiers"}


async def test_templates_list_is_a_bare_array_with_counts(
    eval_service: RunningService, client: EvaluationClient
) -> None:
    async with httpx.AsyncClient(base_url=eval_service.url, headers={"API-Key": WRITE_KEY}, timeout=30) as http:
        for path in ("/scenarios", "/v1/scenarios"):
            body = (await http.get(path)).json()
            assert isinstance(body, list)
            assert next(t for t in body if t["scenario_id"] == SCENARIO)["tool_servers"] == [
                {"name": "email", "server_type": "http"}
            ]
    template = next(t for t in await client.list_scenarios() if t.scenario_id == SCENARIO)
    assert (template.num_tasks, template.num_npcs) == (12, 6)


async def test_tasks_listing_hides_execution_only_fields(
    eval_service: RunningService, client: EvaluationClient
) -> None:
    listing = await client.list_tasks(SCENARIO)
    assert listing.scenario_id == SCENARIO and len(listing.tasks) == 12
    task = next(t for t in listing.tasks if t.task_id == "email_ops_001")
    assert "Room 4B" in task.description and task.tool_servers[0].name == "email"
    assert task.rubric is not None and task.rubric.success_criteria and task.rubric.scoring
    assert task.npc_profiles[0].profile_id == "aisha_okafor"
    assert task.seed_data == {"email": ["mailbox.json", "contacts.json"]}

    async with httpx.AsyncClient(base_url=eval_service.url, headers={"API-Key": WRITE_KEY}, timeout=30) as http:
        raw = (await http.get(f"/v1/scenarios/{SCENARIO}/tasks")).json()
    for item in raw["tasks"]:
        assert not HIDDEN_TASK_FIELDS & set(item), sorted(item)
        assert set(item["rubric"]) == {"task_id", "title", "overview", "success_criteria", "scoring"}
        assert all("public_info" not in npc for npc in item["npc_profiles"])
    reference = ScenarioCatalog().get(SCENARIO).task("email_ops_001").reference_answer
    assert reference and reference not in json.dumps(raw)

    # SimLab names a scenario by its family id; the service answers with the newest version's full id.
    by_family = await client.list_tasks(SCENARIO.partition(":")[0])
    assert by_family.scenario_id == SCENARIO and len(by_family.tasks) == 12


async def test_rubric_npcs_and_404s(client: EvaluationClient) -> None:
    rubric = await client.get_rubric(SCENARIO, "email_ops_001")
    assert rubric.task_id == "email_ops_001" and rubric.title and rubric.success_criteria
    npcs = await client.list_npcs(SCENARIO)
    assert npcs.scenario_id == SCENARIO and len(npcs.npc_profiles) == 6
    assert all(npc.public_info for npc in npcs.npc_profiles)
    for call in (
        client.list_tasks("nope:1.0.0"),
        client.get_rubric("nope:1.0.0", "email_ops_001"),
        client.get_rubric(SCENARIO, "no_such_task"),
        client.list_npcs("nope:1.0.0"),
        client.list_seed_data("nope:1.0.0"),
        client.get_seed_file("nope:1.0.0", "mailbox.json"),
        client.download_verifier_bundle("nope:1.0.0"),
    ):
        with pytest.raises(NotFound):
            await call


async def test_seed_data_list_and_file(client: EvaluationClient) -> None:
    listing = await client.list_seed_data(SCENARIO)
    assert listing.files == ["contacts.json", "mailbox.json"]
    seed = await client.get_seed_file(SCENARIO, "mailbox.json")
    assert seed.scenario_id == SCENARIO and seed.filename == "mailbox.json"
    assert json.loads(seed.content)
    with pytest.raises(NotFound) as missing:
        await client.get_seed_file(SCENARIO, "no_such_file.json")
    assert "no_such_file.json" in str(missing.value.detail)
    with pytest.raises(BadRequest):
        await client.get_seed_file(SCENARIO, "../template.json")


async def _raw_get(service: RunningService, raw_path: bytes) -> tuple[int, dict[str, object]]:
    """GET a path byte for byte: httpx would normalise `a/../b` before sending, hiding the traversal."""
    reader, writer = await asyncio.open_connection(service.server.host, service.server.port)
    writer.write(
        b"GET " + raw_path + b" HTTP/1.1\r\nHost: test\r\nAPI-Key: " + WRITE_KEY.encode() + b"\r\n"
        b"Connection: close\r\n\r\n"
    )
    await writer.drain()
    response = await asyncio.wait_for(reader.read(), timeout=30)
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


@pytest.mark.parametrize(
    "raw_tail",
    [
        b"..%2ftemplate.json",
        b"%2e%2e/template.json",
        b"%2E%2E%2Ftemplate.json",
        b"%252e%252e%252ftemplate.json",
        b"../../template.json",
        b"sub/../../template.json",
        b"/etc/passwd",
        b"%2fetc%2fpasswd",
        b"..%5ctemplate.json",
        b"",
    ],
)
async def test_seed_file_traversal_is_400(eval_service: RunningService, raw_tail: bytes) -> None:
    raw_path = b"/scenarios/email_ops:1.0.0/seed_data/" + raw_tail
    status, body = await _raw_get(eval_service, raw_path)
    assert status == 400, (raw_path, status, body)
    assert "detail" in body


async def test_verifier_bundle_is_an_importable_package(client: EvaluationClient, tmp_path: Path) -> None:
    data = await client.download_verifier_bundle(SCENARIO)
    archive = zipfile.ZipFile(io.BytesIO(data))
    names = set(archive.namelist())
    # the package path the hosted product's clients import: collinear/scenarios/<family id>/verifiers
    root = "collinear/scenarios/email_ops/verifiers"
    for package in ("collinear", "collinear/scenarios", "collinear/scenarios/email_ops", root):
        assert f"{package}/__init__.py" in names
    assert f"{root}/projector_request.py" in names and f"{root}/_common.py" in names
    assert data == await client.download_verifier_bundle(SCENARIO)  # deterministic bytes
    assert data == await client.download_verifier_bundle("email_ops")  # by family id: the newest version

    bundle = tmp_path / "bundle.zip"
    bundle.write_bytes(data)
    sys.path.insert(0, str(bundle))
    try:
        module = importlib.import_module("collinear.scenarios.email_ops.verifiers.projector_request")
        result = module.verify(RunArtifacts(task_id="email_ops_001", task="t"))
        assert result is not None  # no state in these artifacts: a failing result, not an import error
    finally:
        sys.path.remove(str(bundle))
        for name in [n for n in sys.modules if n.startswith("collinear")]:
            del sys.modules[name]


async def test_bundle_is_404_for_a_scenario_without_verifiers(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    source = ScenarioCatalog().get(SCENARIO).root
    copy = scenarios / "no_verifiers"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("verifiers"))
    template = json.loads((copy / "template.json").read_text())
    (copy / "template.json").write_text(json.dumps({**template, "scenario_id": "no_verifiers:1.0.0"}))
    for task_file in (copy / "tasks").glob("*.json"):
        task = json.loads(task_file.read_text())
        task_file.write_text(json.dumps({**task, "verifiers": []}))
    with running_service(tmp_path / "data", scenarios_dir=scenarios) as running:
        async with EvaluationClient(running.url, WRITE_KEY) as client:
            assert [t.scenario_id for t in await client.list_scenarios()] == ["no_verifiers:1.0.0"]
            with pytest.raises(NotFound) as missing:
                await client.download_verifier_bundle("no_verifiers:1.0.0")
            assert "no verifiers" in str(missing.value.detail)
