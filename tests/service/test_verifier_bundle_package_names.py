"""A family id that is not a Python identifier (`9lives`, `mail-ops`) is served as a bundle package that is one
(`_9lives`, `mail_ops`); SimLab reads the scenario to fetch from a task's verifier path, so it asks for
`/v1/scenarios/_9lives/verifiers/bundle`, and the service finds family `9lives` by it."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import httpx

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from tests.service.eval_service_support import SCENARIO, WRITE_KEY, running_service


def _copy_as(scenarios: Path, family: str) -> None:
    folder = scenarios / family
    shutil.copytree(ScenarioCatalog().get(SCENARIO).root, folder)
    template = json.loads((folder / "template.json").read_text())
    (folder / "template.json").write_text(json.dumps({**template, "scenario_id": f"{family}:1.0.0"}))


def test_simlab_fetches_a_bundle_by_the_package_name_of_a_family_id_that_is_no_identifier(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    for family in ("9lives", "mail-ops", "a-b", "a.b"):
        _copy_as(scenarios, family)
    with (
        running_service(tmp_path / "data", scenarios_dir=scenarios) as running,
        httpx.Client(base_url=running.url, headers={"API-Key": WRITE_KEY}, timeout=60) as http,
    ):
        for package, family in (("_9lives", "9lives"), ("mail_ops", "mail-ops")):
            listed = http.get(f"/v1/scenarios/{family}/tasks").json()["tasks"]
            answer = http.get(f"/v1/scenarios/{package}/verifiers/bundle")
            assert answer.status_code == 200, answer.text
            names = zipfile.ZipFile(io.BytesIO(answer.content)).namelist()
            manifest = json.loads(
                zipfile.ZipFile(io.BytesIO(answer.content)).read(f"collinear/scenarios/{package}/bundle.json")
            )
            assert manifest["scenario_id"] == f"{family}:1.0.0"
            assert f"collinear/scenarios/{package}/verifiers/projector_request.py" in names
            assert answer.content == http.get(f"/v1/scenarios/{family}/verifiers/bundle").content
            assert listed[0]["verifier_modules"][0].startswith(f"collinear.scenarios.{package}.verifiers.")

        # Two families served under one package name: neither is guessed.
        ambiguous = http.get("/v1/scenarios/a_b/verifiers/bundle")
        assert ambiguous.status_code == 404 and "a_b" in ambiguous.json()["detail"]
        assert http.get("/v1/scenarios/_nothing/verifiers/bundle").status_code == 404
