"""The API-Key header: 401 without a known key, 403 for a read-only key on POST/DELETE; keys from config."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest

from eval_pipelines.clients.errors import Forbidden, Unauthorized
from eval_pipelines.clients.evaluation import EvaluationClient
from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.service.auth import ApiKeyRegistry, KeyConfigError, Permission
from tests.service.eval_service_support import READ_KEY, SIM_ORACLE, WRITE_KEY, RunningService, launch

SCENARIO_PATH = "/scenarios/email_ops:1.0.0"
GETS = [
    "/runs",
    "/runs/run_x",
    "/rollouts",
    "/rollouts/ro_x",
    "/rollouts/ro_x/artifacts",
    "/scenarios",
    f"{SCENARIO_PATH}/tasks",
    f"{SCENARIO_PATH}/tasks/email_ops_001/rubric",
    f"{SCENARIO_PATH}/npcs",
    f"{SCENARIO_PATH}/seed_data",
    f"{SCENARIO_PATH}/seed_data/mailbox.json",
    f"{SCENARIO_PATH}/verifiers/bundle",
    "/v1/task-gen/00000000-0000-0000-0000-000000000000",
    "/v1/task-gen/00000000-0000-0000-0000-000000000000/results",
    "/auth/verify",
]
WRITES = [
    ("POST", "/runs", {"scenario_id": "email_ops:1.0.0", "task_ids": ["email_ops_001"], "model_config": SIM_ORACLE}),
    ("POST", "/runs/run_x/cancel", None),
    ("POST", "/runs/run_x/resume", SIM_ORACLE),
    ("DELETE", "/runs/run_x", None),
    ("POST", "/test-model-config", SIM_ORACLE),
    ("POST", "/v1/task-gen", {"toolset": [{"name": "t"}]}),
]


@pytest.mark.parametrize("prefix", ["", "/v1"])
@pytest.mark.parametrize("key", [None, "wrong-key", ""])
async def test_missing_or_unknown_key_is_401_everywhere(
    eval_service: RunningService, key: str | None, prefix: str
) -> None:
    headers = {} if key is None else {"API-Key": key}
    async with httpx.AsyncClient(base_url=eval_service.url, headers=headers, timeout=30) as http:
        for path in GETS:
            full = path if path.startswith("/v1/") else prefix + path
            response = await http.get(full)
            assert response.status_code == 401, (full, response.text)
            assert "API-Key" in response.json()["detail"]
        for method, path, body in WRITES:
            full = path if path.startswith("/v1/") else prefix + path
            response = await http.request(method, full, json=body)
            assert response.status_code == 401, (full, response.text)


async def test_read_only_key_reads_but_gets_403_on_post_and_delete(eval_service: RunningService) -> None:
    async with httpx.AsyncClient(base_url=eval_service.url, headers={"API-Key": READ_KEY}, timeout=30) as http:
        assert (await http.get("/scenarios")).status_code == 200
        assert (await http.get("/v1/runs")).status_code == 200
        for method, path, body in WRITES:
            response = await http.request(method, path, json=body)
            assert response.status_code == 403, (path, response.text)
            assert "read-only" in response.json()["detail"]
    # The typed client maps both.
    async with EvaluationClient(eval_service.url, READ_KEY, retry=RetryPolicy(max_attempts=1)) as reader:
        with pytest.raises(Forbidden) as forbidden:
            await reader.launch_run(launch(["email_ops_001"]))
        assert forbidden.value.status == 403
        assert len(await reader.list_scenarios()) >= 1
    async with EvaluationClient(eval_service.url, "nope-not-a-key", retry=RetryPolicy(max_attempts=1)) as stranger:
        with pytest.raises(Unauthorized) as unauthorized:
            await stranger.list_scenarios()
        assert unauthorized.value.status == 401 and "nope-not-a-key" not in str(unauthorized.value)


async def test_health_and_openapi_need_no_key(eval_service: RunningService) -> None:
    async with httpx.AsyncClient(base_url=eval_service.url, timeout=30) as http:
        assert (await http.get("/health")).json()["status"] == "healthy"
        document = (await http.get("/openapi.json")).json()
    paths = document["paths"]
    for path in ("/runs", "/v1/runs", "/rollouts/{rollout_id}/artifacts", "/v1/task-gen", "/task-gen/{job_id}/results"):
        assert path in paths
    assert document["components"]["securitySchemes"]["APIKeyHeader"] == {
        "type": "apiKey",
        "in": "header",
        "name": "API-Key",
        "description": document["components"]["securitySchemes"]["APIKeyHeader"]["description"],
    }
    assert {"401", "403"} <= set(paths["/runs"]["post"]["responses"])


async def test_keys_never_reach_the_log(eval_service: RunningService, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient(base_url=eval_service.url, timeout=30) as http:
        await http.get("/runs", headers={"API-Key": "sk-leak-canary-000111222"})
        await http.get("/runs", headers={"API-Key": WRITE_KEY})
    assert "sk-leak-canary-000111222" not in caplog.text and WRITE_KEY not in caplog.text


def test_key_configuration_from_env_string_and_files(tmp_path: Path) -> None:
    registry = ApiKeyRegistry.from_environment({"EVAL_SERVICE_API_KEYS": "alpha:write, beta:read ,gamma"})
    assert registry.permission("alpha") == Permission.WRITE
    assert registry.permission("beta") == Permission.READ
    assert registry.permission("gamma") == Permission.READ  # no permission given: read
    assert registry.permission("delta") is None and registry.permission(None) is None
    assert "alpha" not in repr(registry)

    as_json = tmp_path / "keys.json"
    as_json.write_text(json.dumps({"keys": [{"key": "k1", "permission": "write"}, {"key": "k2"}]}))
    registry = ApiKeyRegistry.from_environment({"EVAL_SERVICE_KEYS_FILE": str(as_json)})
    assert (registry.permission("k1"), registry.permission("k2")) == (Permission.WRITE, Permission.READ)

    as_yaml = tmp_path / "keys.yaml"
    as_yaml.write_text("k3: write\nk4: read\n")
    registry = ApiKeyRegistry.from_environment({"EVAL_SERVICE_KEYS_FILE": str(as_yaml)})
    assert (registry.permission("k3"), registry.permission("k4")) == (Permission.WRITE, Permission.READ)


@pytest.mark.parametrize(
    "environ",
    [{}, {"EVAL_SERVICE_API_KEYS": " , "}, {"EVAL_SERVICE_API_KEYS": "secret-value:admin"}],
)
def test_bad_key_configuration_fails_without_showing_keys(environ: dict[str, str]) -> None:
    with pytest.raises(KeyConfigError) as error:
        ApiKeyRegistry.from_environment(environ)
    assert "secret-value" not in str(error.value)


@pytest.mark.parametrize("prefix", ["", "/v1"])
async def test_auth_verify_accepts_a_known_key_and_names_its_permission(
    eval_service: RunningService, prefix: str
) -> None:
    """`simlab auth login` calls GET /v1/auth/verify with the API-Key header and refuses the key on a 401."""
    async with httpx.AsyncClient(base_url=eval_service.url, timeout=30) as http:
        for key, permission in ((WRITE_KEY, "write"), (READ_KEY, "read")):
            response = await http.get(f"{prefix}/auth/verify", headers={"API-Key": key})
            assert response.status_code == 200, response.text
            assert response.json() == {"valid": True, "permission": permission}
        refused = await http.get(f"{prefix}/auth/verify", headers={"API-Key": "not-a-key"})
        assert refused.status_code == 401 and "not-a-key" not in refused.text
