"""Every route of both local services, enumerated from their served OpenAPI documents, refuses a missing or
invalid credential (401) and a credential without the permission (403): a read-only key on the evaluation
service's POST/DELETE, a token of another space on every platform route that takes a space_id."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx

from tests.platform.conftest import BENIGN_ROW, SPACE
from tests.security.conftest import (
    Operation,
    Served,
    ServedPlatform,
    app_operations,
    document_operations,
    served_openapi,
)
from tests.service.eval_service_support import READ_KEY, SCENARIO, SIM_ORACLE, WRITE_KEY

#: Deliberately open: liveness and the API's own documentation. The only routes that take no credential.
EVAL_OPEN: frozenset[Operation] = frozenset(
    {
        ("GET", "/health"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("GET", "/docs/oauth2-redirect"),
        ("GET", "/redoc"),
    }
)
PLATFORM_OPEN: frozenset[Operation] = EVAL_OPEN
#: Platform routes whose request names no space (any valid token may call them). None since synthetic data
#: takes the `space_id` the collinear SDK sends: a space named there must be the token's own.
PLATFORM_SPACELESS: frozenset[Operation] = frozenset()

#: Plausible values for path parameters; an unknown parameter fails the sweep, so a new route gets a value here.
PATH_VALUES = {
    "run_id": str(uuid.uuid4()),
    "rollout_id": str(uuid.uuid4()),
    "job_id": str(uuid.uuid4()),
    "scenario_id": SCENARIO,
    "task_id": "email_ops_001",
    "filename": "inbox.json",
}
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_PARAMETER = re.compile(r"\{(\w+)\}")

EVAL_BODIES: dict[str, Any] = {
    "/runs": {"scenario_id": SCENARIO, "task_ids": ["email_ops_001"], "rollout_count": 1, "model_config": SIM_ORACLE},
    "/runs/{run_id}/resume": SIM_ORACLE,
    "/test-model-config": SIM_ORACLE,
    "/task-gen": {"toolset": [{"name": "send_email"}], "num_tasks": 1},
    "/telemetry/cli-events": {"event": "cli_command", "properties": {}},
}
#: Writes a read-only key may make: SimLab's CLI posts its telemetry with whatever key its user holds, and an event
#: changes nothing of the service's (feedback goes to the operator's log). Missing and invalid keys are still 401.
EVAL_READ_KEY_WRITES: frozenset[str] = frozenset({"/telemetry/cli-events"})


def _url(base: str, path: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in PATH_VALUES, f"path parameter {name!r} of {path} has no plausible value in PATH_VALUES"
        return PATH_VALUES[name]

    return base + _PARAMETER.sub(value, path)


def _has_body(document: dict[str, Any], method: str, path: str) -> bool:
    return "requestBody" in document["paths"][path][method.lower()]


def _eval_body(path: str) -> Any:
    bare = path.removeprefix("/v1")
    assert bare in EVAL_BODIES, f"{path} takes a body; give a minimal one in EVAL_BODIES"
    return EVAL_BODIES[bare]


def _call(client: httpx.Client, method: str, url: str, headers: dict[str, str], **body: Any) -> httpx.Response:
    return client.request(method, url, headers=headers, **body)


def _checked_routes(served: Served, document: dict[str, Any], open_routes: frozenset[Operation]) -> set[Operation]:
    """The document's operations less the open ones, after checking no route is routed but undocumented."""
    documented = document_operations(document)
    routed = app_operations(served.app)
    undocumented = routed - documented - open_routes
    assert not undocumented, f"routes served but neither documented nor listed as open: {sorted(undocumented)}"
    assert open_routes <= routed, f"open routes no longer served: {sorted(open_routes - routed)}"
    return documented - open_routes


def test_eval_service_routes_refuse_missing_invalid_and_read_only_keys(eval_service: Served) -> None:
    document = served_openapi(eval_service.url)
    routes = _checked_routes(eval_service, document, EVAL_OPEN)
    failures: list[str] = []
    checked: set[Operation] = set()
    with httpx.Client(timeout=30.0) as client:
        for method, path in sorted(routes):
            url = _url(eval_service.url, path)
            body = {"json": _eval_body(path)} if _has_body(document, method, path) else {}
            expectations: list[tuple[str, dict[str, str], set[int]]] = [
                ("no key", {}, {401}),
                ("invalid key", {"API-Key": "not-a-key-" + uuid.uuid4().hex}, {401}),
                ("empty key", {"API-Key": ""}, {401}),
            ]
            if method in WRITE_METHODS and path.removeprefix("/v1") in EVAL_READ_KEY_WRITES:
                expectations.append(("read-only key (accepted)", {"API-Key": READ_KEY}, {202}))
            elif method in WRITE_METHODS:
                expectations.append(("read-only key", {"API-Key": READ_KEY}, {403}))
            else:
                # The control: the read key does reach a GET, so the 403s above are about permission.
                expectations.append(("read key (control)", {"API-Key": READ_KEY}, {200, 202, 400, 404, 500}))
            for label, headers, allowed in expectations:
                response = _call(client, method, url, headers, **body)
                if response.status_code not in allowed:
                    failures.append(f"{method} {path} [{label}]: {response.status_code} {response.text[:200]}")
                elif response.status_code in (401, 403) and "detail" not in response.json():
                    failures.append(f"{method} {path} [{label}]: {response.status_code} without detail")
            checked.add((method, path))
        for method, path in sorted(EVAL_OPEN):
            if client.request(method, eval_service.url + path).status_code != 200:
                failures.append(f"{method} {path} is listed as open but does not answer 200 without a key")
    assert not failures, "\n".join(failures)
    assert checked == document_operations(document) - EVAL_OPEN
    # Both the bare and the /v1 routes, every resource of spec 000: a sweep of a handful of routes proves little.
    assert len(checked) >= 40, sorted(checked)
    assert WRITE_KEY not in json.dumps(document)


def _platform_request(document: dict[str, Any], method: str, path: str, space: str) -> dict[str, Any]:
    """A minimal, valid request body for the operation, naming `space` wherever it takes a space_id."""
    content = document["paths"][path][method.lower()]["requestBody"]["content"]
    if "multipart/form-data" in content:
        rows = json.dumps([BENIGN_ROW]).encode()
        return {
            "files": {"file": ("rows.json", rows, "application/json")},
            "data": {"dataset_name": "auth-sweep", "space_id": space},
        }
    bodies: dict[str, dict[str, Any]] = {
        "/api/v1/judge/create/sdk": {"judge_name": f"sweep-{uuid.uuid4().hex[:8]}", "model_name": "veritas"},
        "/api/v1/judge/conversation": {
            "conversation_prefix": BENIGN_ROW["conv_prefix"],
            "response": BENIGN_ROW["response"],
            "judge_id": str(uuid.uuid4()),
        },
        "/api/v1/dataset/assess/run": {
            "dataset_id": str(uuid.uuid4()),
            "judge_ids": [str(uuid.uuid4())],
            "name": "auth-sweep",
        },
        "/api/v1/synth_data/generate": {
            "model_id": str(uuid.uuid4()),
            "multiplier": 1,
            "examples": [{"text": "hello"}],
            "prompt": "paraphrase",
        },
    }
    assert path in bodies, f"{method} {path} takes a JSON body; give a minimal one here"
    body = dict(bodies[path])
    if (method, path) not in PLATFORM_SPACELESS:
        body["space_id"] = space
    return {"json": body}


def _takes_space(document: dict[str, Any], method: str, path: str) -> bool:
    content = document["paths"][path][method.lower()].get("requestBody", {}).get("content", {})
    schemas = document.get("components", {}).get("schemas", {})
    for media in content.values():
        reference = media.get("schema", {}).get("$ref", "")
        schema = schemas.get(reference.rsplit("/", 1)[-1], media.get("schema", {}))
        if "space_id" in schema.get("properties", {}):
            return True
    return False


def test_platform_routes_refuse_missing_invalid_and_foreign_tokens(platform_service: ServedPlatform) -> None:
    document = served_openapi(platform_service.url)
    routes = _checked_routes(platform_service, document, PLATFORM_OPEN | {("GET", "/health")})
    failures: list[str] = []
    checked: set[Operation] = set()
    with httpx.Client(timeout=30.0) as client:
        for method, path in sorted(routes):
            url = platform_service.url + path
            takes_space = _takes_space(document, method, path)
            if takes_space == ((method, path) in PLATFORM_SPACELESS):
                failures.append(f"{method} {path}: takes_space={takes_space} contradicts PLATFORM_SPACELESS")
            expectations: list[tuple[str, dict[str, str], set[int]]] = [
                ("no token", {}, {401}),
                ("invalid token", {"Authorization": f"Bearer not-a-token-{uuid.uuid4().hex}"}, {401}),
                ("not a bearer header", {"Authorization": f"Basic {platform_service.token}"}, {401}),
                ("bearer without a token", {"Authorization": "Bearer"}, {401}),
            ]
            if takes_space:
                expectations.append(
                    ("another space's token", {"Authorization": f"Bearer {platform_service.other_token}"}, {403})
                )
                # The control: the same request with the space's own token is not refused.
                expectations.append(
                    ("own token (control)", {"Authorization": f"Bearer {platform_service.token}"}, {200, 404, 422})
                )
            for label, headers, allowed in expectations:
                response = _call(client, method, url, headers, **_platform_request(document, method, path, SPACE))
                if response.status_code not in allowed:
                    failures.append(f"{method} {path} [{label}]: {response.status_code} {response.text[:200]}")
                elif response.status_code in (401, 403) and "detail" not in response.json():
                    failures.append(f"{method} {path} [{label}]: {response.status_code} without detail")
            checked.add((method, path))
        for method, path in sorted(PLATFORM_OPEN | {("GET", "/health")}):
            if client.request(method, platform_service.url + path).status_code != 200:
                failures.append(f"{method} {path} is listed as open but does not answer 200 without a token")
    assert not failures, "\n".join(failures)
    assert checked == document_operations(document) - PLATFORM_OPEN
    assert len(checked) >= 6, sorted(checked)
