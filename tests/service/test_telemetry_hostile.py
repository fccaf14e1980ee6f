"""SimLab telemetry (`POST /telemetry/cli-events`) against what a key holder may paste into feedback: no key of the
service's (not only the sender's own) and no provider credential reaches `feedback.jsonl`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from eval_pipelines.service.layout import feedback_log_path
from tests.service.eval_service_support import READ_KEY, WRITE_KEY, RunningService, running_service

PASTED = {
    "write key in prose": f"the admin's key is {WRITE_KEY}.",
    "write key as a setting": f"I set EVAL_KEY={WRITE_KEY} and",
    "write key quoted": f'headers = {{"API-Key": "{WRITE_KEY}"}}',
    "google key": "GOOGLE_API_KEY AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
    "hugging face token": "hf_abcdefghijklmnopqrstuvwxyz012345",
    "bearer token": "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig'",
}
SECRETS = [
    WRITE_KEY,
    "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
    "hf_abcdefghijklmnopqrstuvwxyz012345",
    "eyJhbGciOiJIUzI1NiJ9",
]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with running_service(tmp_path_factory.mktemp("telemetry-hostile") / "data") as running:
        yield running


@pytest.mark.parametrize("pasted", list(PASTED.values()), ids=list(PASTED))
def test_no_key_of_the_service_s_and_no_credential_is_written(service: RunningService, pasted: str) -> None:
    path: Path = feedback_log_path(service.service.settings.data_dir)
    before = path.read_text().count("\n") if path.is_file() else 0
    event = {"event": "feedback_submitted", "properties": {"message": f"it broke; {pasted} thanks", "env_name": pasted}}
    answer = httpx.post(f"{service.url}/telemetry/cli-events", json=event, headers={"API-Key": READ_KEY}, timeout=30)
    assert answer.status_code == 202 and answer.json()["stored"] is True
    lines = path.read_text().splitlines()
    assert len(lines) == before + 1
    record = json.loads(lines[-1])
    assert record["message"].startswith("it broke;") and "[REDACTED]" in record["message"]
    assert all(secret not in lines[-1] for secret in SECRETS)
